"""Firing one schedule's ticks, exactly once even across a restart.

A tick is an event whose id is ``<schedule>@<tick time>`` and whose source names
the scheduler group, so every copy of one tick is the same event to the bus.
Its state (the last tick fired) is kept on a compacted topic, keyed by schedule:

1. the intent: ``{fired: previous, pending: tick, from: <the target topic's ends>}``
   (the ends are read while waiting for the tick, so none of its writes waits for a read);
2. the tick event;
3. ``{fired: tick}``.

A scheduler that finds an intent (its predecessor stopped between 1 and 3) reads
the target topic from the recorded ends for the tick's id: found, the tick was
fired; not found, it fires it now. So a tick is neither lost nor doubled by a
restart, as long as one scheduler at a time owns the schedule.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.client import AsyncClient
from a2a_bus.core.dispatch import Dispatcher
from a2a_bus.protocol import Adaptor, Kind, classify, ext, new_event
from a2a_bus.schedule.spec import MAX_COUNTED, Schedule, iso

log = logging.getLogger(__name__)

STATE_TYPE = "a2a.schedule.state"
#: Seconds before a tick that could not be fired is tried again (at most).
RETRY = 5.0


def tick_id(schedule: Schedule, ms: int) -> str:
    return f"{schedule.name}@{iso(ms)}"


def tick_event(adaptor: Adaptor, schedule: Schedule, ms: int, source: str) -> CloudEvent:
    """The event of one tick: published on the subject, or a notification calling
    the agent's method."""
    tick = {"schedule": schedule.name, "tick": iso(ms)}
    if schedule.publish is not None:
        attributes: dict[str, Any] = {
            "id": tick_id(schedule, ms),
            "source": source,
            "type": f"{adaptor.prefix}.{schedule.publish}",
            "subject": schedule.publish,
            "datacontenttype": "application/json",
        }
        return new_event(attributes, tick if schedule.data is None else schedule.data)
    assert schedule.call is not None
    agent, method = schedule.call
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if schedule.params is not None:
        message["params"] = schedule.params
    kind = classify(message)
    event = adaptor.event_from_message(message, kind) if isinstance(kind, Kind) else kind
    if not isinstance(event, CloudEvent):
        raise ValueError(f"schedule {schedule.name!r}: cannot call {method!r}: {event.data}")
    attributes = event.get_attributes()
    attributes.update(id=tick_id(schedule, ms), source=source)
    attributes[ext.TARGET_AGENT] = agent
    return event


class StateTopic:
    """The last state of each schedule of a group, on a compacted topic."""

    def __init__(self, transport: Any, topic: str, source: str) -> None:
        self.transport = transport
        self.topic = topic
        self.source = source

    async def load(self) -> dict[str, dict[str, Any]]:
        """Every schedule's latest state (the topic read to its end)."""
        states: dict[str, dict[str, Any]] = {}
        position = None
        while True:
            batch = await self.transport.read(self.topic, limit=1000, position=position)
            if not batch.events:
                return states
            position = batch.position
            for event in batch.events:
                data = event.get_data()
                if isinstance(data, dict) and isinstance(data.get("schedule"), str):
                    states[data["schedule"]] = data

    async def save(self, name: str, state: Mapping[str, Any]) -> None:
        attributes = {
            "source": self.source,
            "type": STATE_TYPE,
            "datacontenttype": "application/json",
        }
        event = new_event(attributes, {"schedule": name, **state})
        await self.transport.publish(self.topic, event, key=name.encode())


class ScheduleRun:
    """Fires one schedule's ticks while this process owns it; ``stop()`` lets a
    tick being fired finish first."""

    def __init__(
        self,
        schedule: Schedule,
        dispatcher: Dispatcher,
        client: AsyncClient,
        states: StateTopic,
        state: Mapping[str, Any] | None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.schedule = schedule
        self._dispatcher = dispatcher
        self._context = dispatcher.context
        self.client = client
        self.states = states
        self._state = dict(state or {})
        self._clock = clock
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: Ticks this run fired (for logs and tests).
        self.fired = 0

    def start(self) -> None:
        # In a context of its own: a tick starts a trace, whatever code started the
        # schedule (an agent spawned from a handler would otherwise lend it its trace).
        self._task = asyncio.create_task(
            self._run(), name=f"schedule {self.schedule.name}", context=contextvars.Context()
        )

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    def _now(self) -> int:
        return int(self._clock() * 1000)

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), max(0.0, seconds))

    async def _run(self) -> None:
        schedule = self.schedule
        while True:
            try:
                fired = await self._resolve()
                break
            except Exception as exc:  # the broker out of reach: the state is read again
                log.warning("schedule %s: reading its state failed: %s", schedule.name, exc)
                await self._sleep(RETRY)
                if self._stopping.is_set():
                    return
        if fired is None:
            fired = self._now()  # never fired: from now on, no history is made up
        target: tuple[str, Mapping[int, int]] | None = None
        while not self._stopping.is_set():
            ticks: list[int] = []
            try:
                if target is None:
                    # Read while no tick is due: the coming ticks land after these ends.
                    target = await self._target()
                ticks = self._due(fired, self._now())
                for ms in ticks:
                    if self._stopping.is_set():
                        return
                    await self._fire(fired, ms, target)
                    fired = ms
            except Exception as exc:  # an unknown agent, the broker out of reach
                log.warning("schedule %s: tick not fired: %s", schedule.name, exc)
                await self._sleep(min(RETRY, schedule.every or RETRY))
                continue
            if ticks:
                target = None
                continue
            now = self._now()
            await self._sleep((schedule.next_after(max(fired, now)) - now) / 1000)

    def _due(self, fired: int, now: int) -> list[int]:
        """The ticks to fire now, as ``missed`` says."""
        schedule = self.schedule
        skip = schedule.missed == "skip"
        ticks, dropped = schedule.due(fired, now, 1 if skip else None)
        if dropped:
            capped = schedule.cron is not None and dropped > MAX_COUNTED
            count = f"more than {MAX_COUNTED}" if capped else str(dropped)
            if skip:
                log.info("schedule %s: %s missed ticks skipped", schedule.name, count)
            else:
                log.warning("schedule %s: %s missed ticks over max_catch_up", schedule.name, count)
        return ticks

    async def _target(self) -> tuple[str, Mapping[int, int]]:
        """The topic the ticks go to, and its ends now."""
        event = tick_event(self._context.adaptor, self.schedule, 0, self.states.source)
        topic = self._dispatcher.route(event).topic
        return topic, (await self._context.transport.read(topic, limit=1, newest=True)).position

    async def _fire(self, previous: int, ms: int, target: tuple[str, Mapping[int, int]]) -> None:
        topic, ends = target
        name = self.schedule.name
        intent = {"fired": previous, "pending": ms, "topic": topic, "from": _keys(ends)}
        await self.states.save(name, intent)
        tick = tick_event(self._context.adaptor, self.schedule, ms, self.states.source)
        await self.client.publish_event(tick)
        await self.states.save(name, {"fired": ms})
        self.fired += 1

    async def _resolve(self) -> int | None:
        """The last tick fired, settling an intent left by a scheduler that stopped."""
        state = self._state
        fired = state.get("fired")
        pending = state.get("pending")
        if pending is None:
            return fired if isinstance(fired, int) else None
        event_id = tick_id(self.schedule, pending)
        position = {int(p): o for p, o in (state.get("from") or {}).items()}
        if await self._published(str(state.get("topic")), position, event_id):
            await self.states.save(self.schedule.name, {"fired": pending})
            return int(pending)
        return fired if isinstance(fired, int) else None

    async def _published(self, topic: str, position: dict[int, int], event_id: str) -> bool:
        source = self.states.source
        transport = self._context.transport
        start: dict[int, int] | None = position or None
        while True:
            batch = await transport.read(topic, limit=1000, position=start)
            if not batch.events:
                return False
            if any(e.get_id() == event_id and e.get_source() == source for e in batch.events):
                return True
            start = batch.position


def _keys(position: Mapping[int, int]) -> dict[str, int]:
    return {str(p): o for p, o in position.items()}
