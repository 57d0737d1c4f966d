"""The scheduler: runs a group of schedules on a bus.

On the in-memory transport the process owns every schedule. On Kafka every
process running the group's scheduler joins one consumer group
(:mod:`a2a_bus.schedule.kafka_owners`), and each schedule is fired by the one
member that owns it; its state topic (:mod:`a2a_bus.schedule.ticks`) carries
what was fired across restarts and hand-overs. All members of a group must
declare the same schedules.

.. code-block:: python

    schedules = [
        Schedule("heartbeat", every=60, publish="ops.heartbeat"),
        Schedule("report", cron="0 9 * * 1-5", call=("reports", "build"), missed="catch_up"),
    ]
    async with Bus.kafka() as bus, Scheduler(bus, schedules, group="ops"):
        ...
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from a2a_bus.core.routing import validate_name
from a2a_bus.schedule.spec import Schedule
from a2a_bus.schedule.ticks import ScheduleRun, StateTopic


class Scheduler:
    """Fires ``schedules`` on ``bus`` as group ``group`` (async or sync context manager)."""

    def __init__(
        self,
        bus: Any,
        schedules: Sequence[Schedule],
        *,
        group: str = "default",
        clock: Callable[[], float] = time.time,
    ) -> None:
        validate_name(group, "scheduler group")
        names = [schedule.name for schedule in schedules]
        if len(set(names)) != len(names):
            twice = next(name for name in names if names.count(name) > 1)
            raise ValueError(f"two schedules are named {twice!r}")
        self.bus = bus
        self.schedules = {schedule.name: schedule for schedule in schedules}
        self.group = group
        self.topic = f"{bus.topics.prefix}.schedule.{group}"
        self.source = f"a2a-bus/schedule/{group}"
        self._clock = clock
        self.runs: dict[str, ScheduleRun] = {}
        self._owners: Any = None
        self._states = StateTopic(bus.transport, self.topic, self.source)

    # -- ownership --------------------------------------------------------------------

    async def _own(self, names: list[str]) -> None:
        if not names:
            return
        states = await self._states.load()
        for name in names:
            if name in self.runs:
                continue
            run = ScheduleRun(
                self.schedules[name], self.bus, self._states, states.get(name), clock=self._clock
            )
            self.runs[name] = run
            run.start()

    async def _lose(self, names: list[str]) -> None:
        runs = [self.runs.pop(name) for name in names if name in self.runs]
        await asyncio.gather(*(run.stop() for run in runs))

    # -- lifecycle --------------------------------------------------------------------

    async def astart(self) -> None:
        """Start on the running bus (from its loop)."""
        from a2a_bus.transport.kafka.transport import KafkaTransport

        transport = self.bus.transport
        transport.declare_compacted(self.topic)
        if isinstance(transport, KafkaTransport):
            from a2a_bus.schedule.kafka_owners import KafkaOwners

            owners = KafkaOwners(
                transport, self.topic, self.topic, list(self.schedules), self._own, self._lose
            )
            await owners.start()
            self._owners = owners
        else:
            await self._own(list(self.schedules))

    async def astop(self) -> None:
        """Stop firing (a tick being fired finishes first) and hand the schedules over."""
        owners, self._owners = self._owners, None
        if owners is not None:
            await owners.stop()
        await self._lose(list(self.runs))

    def start(self) -> Scheduler:
        """Start from sync code (not on the bus loop)."""
        _on_bus_loop(self.bus, self.astart())
        return self

    def stop(self) -> None:
        _on_bus_loop(self.bus, self.astop())

    async def __aenter__(self) -> Scheduler:
        await self.astart()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.astop()

    def __enter__(self) -> Scheduler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _on_bus_loop(bus: Any, coro: Any) -> Any:
    return asyncio.run_coroutine_threadsafe(coro, bus.loop).result()


class _Shared:
    """One scheduler per bus and group in a process, however many replicas ask."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[tuple[int, str], tuple[Scheduler, int]] = {}

    def acquire(self, bus: Any, group: str, schedules: Sequence[Schedule]) -> None:
        with self._lock:
            key = (id(bus), group)
            scheduler, count = self._running.get(key) or (None, 0)
            if scheduler is None:
                scheduler = Scheduler(bus, schedules, group=group).start()
            self._running[key] = (scheduler, count + 1)

    def release(self, bus: Any, group: str) -> None:
        with self._lock:
            key = (id(bus), group)
            scheduler, count = self._running.get(key) or (None, 0)
            if scheduler is None:
                return
            if count > 1:
                self._running[key] = (scheduler, count - 1)
                return
            del self._running[key]
            scheduler.stop()


#: Schedules declared by agents: started by their first replica in this process,
#: stopped with the last (from the actors' threads).
shared = _Shared()
