"""Pub/sub fan-out in memory: an event's way to every subscriber, by number of subscribers.

``n`` agents subscribe to one subject; the async client publishes events one after
the other, each when every subscriber's handler has run for the one before. For
each event the time from the publish to the last handler's run, p50, and this
process's CPU per event; beside the floor of a fan-out on the same design: the loop
``tell``s ``n`` bare pykka actors, each of which hands its arrival back to the loop
the way agent actors report (one wake-up per burst).

The curve says how a subscriber's cost grows with their number: a bus that did
more per subscriber than a ``tell`` and a hand-back would pull away from the floor
as ``n`` grows.
"""

from __future__ import annotations

import asyncio
import queue
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pykka

from a2a_bus.bench.load import stop_actors
from a2a_bus.bench.report import Curve, Point, Progress, Report, Row
from a2a_bus.bus import Bus
from a2a_bus.hosting.actor import thread_safe
from a2a_bus.hosting.agent import Agent, subscribe
from a2a_bus.runtime import loops

TITLE = "Pub/sub fan-out in memory, by number of subscribers"
SUBSCRIBERS = (1, 10, 100, 1000)
QUICK_SUBSCRIBERS = (1, 10, 100)
SUBJECT = "bench.fanout"

Publish = Callable[[int], Awaitable[Any]]


@dataclass(frozen=True)
class FanOut:
    """One path at one number of subscribers."""

    p50_us: float  # from the publish until the last subscriber's handler ran
    cpu_us: float  # this process's CPU per event, all threads


class Arrivals:
    """Counts handler runs for the event in flight; done when all ``expected`` ran."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._expected = 0
        self._count = 0
        self._done: asyncio.Future[None] | None = None
        #: What a handler calls, on its actor's thread.
        self.arrived = thread_safe(loop, self._arrived)

    def expect(self, count: int) -> asyncio.Future[None]:
        self._expected, self._count = count, 0
        self._done = self._loop.create_future()
        return self._done

    def _arrived(self) -> None:
        self._count += 1
        if self._count == self._expected and self._done is not None:
            self._done.set_result(None)


async def timed(publish: Publish, arrivals: Arrivals, subscribers: int, events: int) -> FanOut:
    """``events`` published one after the other, each waited for at every subscriber."""
    samples = []
    cpu = time.process_time()
    for i in range(events):
        start = time.perf_counter()
        done = arrivals.expect(subscribers)
        await publish(i)
        await done
        samples.append(time.perf_counter() - start)
    cpu_us = (time.process_time() - cpu) / events * 1e6
    return FanOut(statistics.median(samples) * 1e6, cpu_us)


def subscriber_classes(count: int, arrivals: Arrivals) -> list[type[Agent]]:
    """``count`` distinct agents, each calling ``arrivals.arrived`` per event."""

    def on_event(self: Agent, event: Any) -> None:
        arrivals.arrived()

    handler = subscribe(SUBJECT)(on_event)
    return [
        type(f"FanOut{n}", (Agent,), {"agent_id": f"fanout-{n}", "on_event": handler})
        for n in range(count)
    ]


class _Arriving(pykka.ThreadingActor):
    """The floor's subscriber: hands its arrival back to the loop."""

    def __init__(self, arrived: Callable[[], None]) -> None:
        super().__init__()
        self._arrived = arrived

    @staticmethod
    def _create_actor_inbox() -> Any:
        return queue.SimpleQueue()  # as agent actors' (see a2a_bus.hosting.actor)

    def on_receive(self, message: Any) -> None:
        self._arrived()


async def on_bus(subscribers: int, events: int) -> FanOut:
    arrivals = Arrivals(asyncio.get_running_loop())
    bus = Bus.memory(pin_cpu="off")
    for cls in subscriber_classes(subscribers, arrivals):
        bus.spawn(cls)
    async with bus:
        client = bus.async_client()

        async def publish(i: int) -> Any:
            return await client.publish(SUBJECT, {"n": i})

        await timed(publish, arrivals, subscribers, min(events, 20))  # warm
        return await timed(publish, arrivals, subscribers, events)


async def on_floor(subscribers: int, events: int) -> FanOut:
    arrivals = Arrivals(asyncio.get_running_loop())
    actors = [_Arriving.start(arrivals.arrived) for _ in range(subscribers)]
    try:

        async def publish(i: int) -> None:
            for actor in actors:
                actor.tell(i)

        await timed(publish, arrivals, subscribers, min(events, 20))
        return await timed(publish, arrivals, subscribers, events)
    finally:
        await stop_actors(actors)


async def measure(
    counts: tuple[int, ...], quick: bool, progress: Progress | None = None
) -> dict[str, dict[int, FanOut]]:
    """The bus and the floor at each number of subscribers."""
    found: dict[str, dict[int, FanOut]] = {"bus": {}, "floor": {}}
    for done, count in enumerate(counts):
        if progress is not None:
            progress(f"{count:,} subscribers", done, len(counts))
        events = events_at(count, quick)
        found["bus"][count] = await on_bus(count, events)
        found["floor"][count] = await on_floor(count, events)
    return found


def report(found: Mapping[str, Mapping[int, FanOut]]) -> Report:
    """Rows of the bus beside the floor at each count, the curves and the slope."""
    out = Report(TITLE)
    bus, floor = found["bus"], found["floor"]
    for count in bus:
        case = f"{count:,} subscribers: publish to last handler run, p50"
        out.add(Row(case, bus[count].p50_us, "us", floor[count].p50_us, "floor"))
    for name, field, label in (("p50", "p50_us", "p50 (µs)"), ("cpu", "cpu_us", "CPU (µs)")):
        series = {
            path: [Point(n, getattr(fan, field)) for n, fan in by.items()]
            for path, by in found.items()
        }
        what = "until the last subscriber ran" if name == "p50" else "CPU per event"
        curve = Curve(
            f"fanout-{name}",
            f"In memory: publish {what}, by subscribers",
            "subscribers",
            f"per event, {label}",
            series,
        )
        curve.log_y = True
        out.curves.append(curve)
    first, last = min(bus), max(bus)
    if last > first:
        slopes = ", ".join(
            f"{path} {(by[last].cpu_us - by[first].cpu_us) / (last - first):.1f} us"
            for path, by in found.items()
        )
        out.notes.append(f"CPU per added subscriber, {first} to {last:,}: {slopes}")
    out.notes.append(
        "floor: the loop tells one bare pykka actor per subscriber, each hands its "
        "arrival back to the loop the way agent actors report (one wake-up per burst)"
    )
    return out


def events_at(subscribers: int, quick: bool) -> int:
    """Events per path at ``subscribers``: fewer as each reaches more."""
    most = 50 if quick else 200
    return max(20, min(most, 20_000 // subscribers))


def run(quick: bool = False, progress: Progress | None = None) -> Report:
    counts = QUICK_SUBSCRIBERS if quick else SUBSCRIBERS
    return report(loops.run(measure(counts, quick, progress)))


if __name__ == "__main__":
    run().print()
