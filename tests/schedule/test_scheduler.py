"""Schedules on the in-memory bus: ticks published and calls made, stable tick ids,
missed ticks after a restart, an interrupted tick settled; the timing rules."""

from __future__ import annotations

import asyncio
import itertools
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from a2a_bus import Agent, Bus, method, subscribe
from a2a_bus.schedule import Schedule, ScheduleError
from a2a_bus.schedule.spec import MAX_COUNTED, iso
from a2a_bus.schedule.ticks import StateTopic, tick_event

WAIT = 30.0  # upper bound on any wait; never a performance assertion


def eventually(predicate: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


class Seen:
    def __init__(self) -> None:
        self.items: list[Any] = []
        self.lock = threading.Lock()

    def add(self, item: Any) -> None:
        with self.lock:
            self.items.append(item)

    def __len__(self) -> int:
        with self.lock:
            return len(self.items)


def ms_of(tick_id: str) -> int:
    text = tick_id.split("@", 1)[1].replace("Z", "+00:00")
    return int(datetime.fromisoformat(text).timestamp() * 1000)


@pytest.fixture
def bus() -> Iterator[Bus]:
    with Bus.memory(prefix=f"t{uuid.uuid4().hex[:8]}", request_timeout=WAIT) as running:
        yield running


def published(bus: Bus, subject: str) -> list[str]:
    page = bus.client().read(subject, limit=1000)
    return [event.get_id() for event in page.events]


def test_an_interval_schedule_publishes_ticks_with_stable_ids(bus: Bus) -> None:
    seen = Seen()

    class Listener(Agent):
        agent_id = "listener"

        @subscribe("ops.beat")
        def on_beat(self, event: Any) -> None:
            seen.add(event)

    bus.spawn(Listener)
    # catch_up: a loaded machine may wake the scheduler more than a tick late, and
    # skip (the default) would then fire only the later of the two ticks due.
    beat = Schedule("beat", every=0.2, publish="ops.beat", missed="catch_up")
    with bus.scheduler([beat], group="ops"):
        eventually(lambda: len(seen) >= 3)
    events = list(seen.items)
    ids = [event.get_id() for event in events]
    assert all(i.startswith("beat@") for i in ids)
    assert [ms_of(i) % 200 for i in ids] == [0] * len(ids)  # on the multiples of 0.2 s
    assert all(b - a == 200 for a, b in zip(map(ms_of, ids), map(ms_of, ids[1:]), strict=False))
    first = events[0]
    assert first.get_source() == "a2a-bus/schedule/ops"
    assert first.get_data() == {"schedule": "beat", "tick": ids[0].split("@")[1]}


def test_a_schedule_calls_an_agents_method(bus: Bus) -> None:
    notes = Seen()

    class Worker(Agent):
        agent_id = "worker"

        @method
        def tick(self, note: str) -> None:
            notes.add((note, self.event.get_id()))

    bus.spawn(Worker)
    call = Schedule("nudge", every=0.2, call=("worker", "tick"), params={"note": "hi"})
    with bus.scheduler([call]):
        eventually(lambda: len(notes) >= 2)
    assert {note for note, _ in notes.items} == {"hi"}
    assert all(event_id.startswith("nudge@") for _, event_id in notes.items)


@pytest.mark.parametrize("missed", ["catch_up", "skip"])
def test_ticks_missed_while_stopped_follow_the_policy(bus: Bus, missed: str) -> None:
    beat = Schedule("beat", every=0.2, publish="ops.beat", missed=missed)  # type: ignore[arg-type]
    with bus.scheduler([beat]):
        eventually(lambda: len(published(bus, "ops.beat")) >= 2)
    before = published(bus, "ops.beat")
    time.sleep(1.0)  # five ticks or more fall due while no scheduler runs
    restarted = time.time()
    with bus.scheduler([beat]):
        eventually(lambda: len(published(bus, "ops.beat")) >= len(before) + 2)
    ticks = [ms_of(i) for i in published(bus, "ops.beat")]
    assert len(ticks) == len(set(ticks))
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    if missed == "catch_up":
        assert set(gaps) == {200}  # none lost
    else:
        assert max(gaps) >= 800  # the missed ones were skipped...
        after_gap = ticks[gaps.index(max(gaps)) + 1]
        assert after_gap <= restarted * 1000 < after_gap + 200  # ...but the latest fired


async def async_published(bus: Bus, subject: str, count: int) -> list[int]:
    """The ticks on ``subject`` once there are at least ``count``."""
    client = bus.async_client()
    async with asyncio.timeout(WAIT):
        while True:
            page = await client.read(subject, limit=1000)
            if len(page.events) >= count:
                return [ms_of(event.get_id()) for event in page.events]
            await asyncio.sleep(0.02)


async def test_an_interrupted_tick_is_settled_without_firing_it_twice() -> None:
    beat = Schedule("beat", every=0.2, publish="ops.beat", missed="catch_up")
    async with Bus.memory(prefix=f"t{uuid.uuid4().hex[:8]}") as bus:
        scheduler = bus.scheduler([beat], group="g")
        bus.transport.declare_compacted(scheduler.topic)
        states = StateTopic(bus.transport, scheduler.topic, scheduler.source)
        pending = int(time.time() * 1000) // 200 * 200 - 200
        # What a scheduler killed between a tick's event and its "fired" state leaves.
        intent = {"fired": pending - 200, "pending": pending, "topic": "", "from": {}}
        intent["topic"] = bus.dispatcher.route(
            tick_event(bus.adaptor, beat, pending, scheduler.source)
        ).topic
        await states.save("beat", intent)
        await bus.async_client().publish_event(
            tick_event(bus.adaptor, beat, pending, scheduler.source)
        )
        async with scheduler:
            ticks = await async_published(bus, "ops.beat", 3)
    assert ticks.count(pending) == 1
    assert ticks[:2] == [pending, pending + 200]


async def test_an_interrupted_tick_that_did_not_go_out_is_fired() -> None:
    beat = Schedule("beat", every=0.2, publish="ops.beat", missed="catch_up")
    async with Bus.memory(prefix=f"t{uuid.uuid4().hex[:8]}") as bus:
        scheduler = bus.scheduler([beat], group="g")
        bus.transport.declare_compacted(scheduler.topic)
        states = StateTopic(bus.transport, scheduler.topic, scheduler.source)
        pending = int(time.time() * 1000) // 200 * 200 - 200
        topic = bus.topics.subject("ops.beat")
        await states.save("beat", {"fired": pending - 200, "pending": pending, "topic": topic})
        async with scheduler:
            ticks = await async_published(bus, "ops.beat", 2)
    assert ticks[:2] == [pending, pending + 200]


# -- timing and declarations ---------------------------------------------------------


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def test_interval_ticks_fall_on_multiples_and_catch_up_is_bounded() -> None:
    every = Schedule("s", every=60, publish="a", max_catch_up=3)
    assert every.next_after(ms("2026-01-01T10:00:30")) == ms("2026-01-01T10:01:00")
    assert every.next_after(ms("2026-01-01T10:01:00")) == ms("2026-01-01T10:02:00")
    ticks, dropped = every.due(ms("2026-01-01T10:00:00"), ms("2026-01-01T10:05:30"))
    assert [iso(t) for t in ticks] == [
        "2026-01-01T10:03:00.000Z",
        "2026-01-01T10:04:00.000Z",
        "2026-01-01T10:05:00.000Z",
    ]
    assert dropped == 2
    assert every.due(ms("2026-01-01T10:05:00"), ms("2026-01-01T10:05:59")) == ([], 0)


def test_a_long_gap_of_cron_ticks_is_counted_only_so_far() -> None:
    """A cron expression's missed ticks are found one at a time, on the bus loop: a
    per-second schedule down for a week held it for seconds to count 600,000 of them."""
    seconds = Schedule("s", cron="* * * * * *", publish="a", max_catch_up=3)
    until = ms("2026-01-08T00:00:00")
    ticks, dropped = seconds.due(ms("2026-01-01T00:00:00"), until)
    assert ticks == [until - 2000, until - 1000, until]
    assert dropped == MAX_COUNTED + 1  # "more than MAX_COUNTED"
    assert seconds.due(ms("2026-01-01T00:00:00"), until, 1) == ([until], MAX_COUNTED + 1)
    assert seconds.due(until - 5000, until) == ([until - 2000, until - 1000, until], 2)


def test_cron_ticks_in_a_time_zone() -> None:
    daily = Schedule("d", cron="0 9 * * *", timezone="Europe/Oslo", publish="a")
    # 09:00 in Oslo is 08:00 UTC in winter, 07:00 UTC in summer.
    assert iso(daily.next_after(ms("2026-01-10T12:00:00"))) == "2026-01-11T08:00:00.000Z"
    assert iso(daily.next_after(ms("2026-07-10T12:00:00"))) == "2026-07-11T07:00:00.000Z"
    ticks, dropped = daily.due(ms("2026-01-10T08:00:00"), ms("2026-01-13T08:00:00"))
    assert [iso(t)[:10] for t in ticks] == ["2026-01-11", "2026-01-12", "2026-01-13"]
    assert dropped == 0
    seconds = Schedule("s", cron="* * * * * */10", publish="a")  # six fields: seconds last
    assert iso(seconds.next_after(ms("2026-01-01T00:00:01"))) == "2026-01-01T00:00:10.000Z"


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"publish": "a"}, "every"),
        ({"every": 1, "cron": "* * * * *", "publish": "a"}, "every"),
        ({"every": 0.001, "publish": "a"}, "every"),
        ({"cron": "every day", "publish": "a"}, "cron"),
        ({"every": 1}, "publish"),
        ({"every": 1, "publish": "a", "timezone": "Mars/Olympus"}, "timezone"),
        ({"every": 1, "publish": "a", "missed": "later"}, "missed"),
        ({"every": 1, "call": ("a", "b"), "params": "x"}, "params"),
        ({"every": math.inf, "publish": "a"}, "every"),
        ({"every": 400 * 86400, "publish": "a"}, "every"),
        ({"cron": "0 0 30 2 *", "publish": "a"}, "cron"),
        ({"every": 1, "publish": ""}, "publish"),
        ({"every": 1, "publish": "ops.*"}, "publish"),
        ({"every": 1, "publish": "a b"}, "publish"),
        ({"every": 1, "call": ("bad id*", "b")}, "call"),
        ({"every": 1, "publish": "a", "data": {"x": math.nan}}, "data"),
        ({"every": 1, "call": ("a", "b"), "params": [1 << 70]}, "params"),
        ({"every": 1, "publish": "a", "params": {"x": 1}}, "params"),
        ({"every": 1, "call": ("a", "b"), "data": "x"}, "data"),
        ({"cron": 5, "publish": "a"}, "cron"),
        ({"every": 1, "publish": "a", "timezone": 1}, "timezone"),
        ({"every": 1, "call": ("a",)}, "call"),
        ({"every": 1, "call": ("a", 5)}, "call"),
        ({"every": 1, "call": ("a", "")}, "call"),
        ({"every": 1, "call": "a.b"}, "call"),
        ({"every": 1, "call": ("a", "rpc.discover")}, "call"),
    ],
)
def test_schedules_that_cannot_work_are_refused(options: dict[str, Any], key: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        Schedule("s", **options)
    assert caught.value.key == key


def test_schedules_as_agent_files_write_them() -> None:
    schedule = Schedule.from_dict(
        "report", {"every": "5m", "call": {"agent": "reports", "method": "build"}}
    )
    assert (schedule.every, schedule.call) == (300.0, ("reports", "build"))
    with pytest.raises(ScheduleError, match="expected seconds or a duration"):
        Schedule.from_dict("x", {"every": "soon", "publish": "a"})
    with pytest.raises(ScheduleError, match=r"expected \{agent"):
        Schedule.from_dict("x", {"every": 1, "call": "reports.build"})
    with pytest.raises(ScheduleError, match="unknown keyword"):
        Schedule.from_dict("x", {"every": 1, "publish": "a", "at": "noon"})


def test_a_schedule_made_in_code_takes_every_as_a_file_does() -> None:
    assert Schedule("s", every="1h", publish="a").every == 3600.0
    assert Schedule("s", every=90, publish="a").every == 90.0
    for every in ("soon", [60], True):
        with pytest.raises(ScheduleError, match="expected seconds or a duration"):
            Schedule("s", every=every, publish="a")


def test_two_schedules_of_one_name_are_refused(bus: Bus) -> None:
    beat = Schedule("beat", every=1, publish="a")
    with pytest.raises(ValueError, match="two schedules are named 'beat'"):
        bus.scheduler([beat, beat])
