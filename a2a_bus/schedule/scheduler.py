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
    async with Bus.kafka() as bus, bus.scheduler(schedules, group="ops"):
        ...

Agents declare schedules too (``Agent.schedules``): their host runs them, once
per process whatever the number of replicas, in the group named after the agent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from a2a_bus.client import AsyncClient
from a2a_bus.core.dispatch import Dispatcher
from a2a_bus.core.routing import validate_name
from a2a_bus.runtime.portal import Portal
from a2a_bus.schedule.spec import Schedule
from a2a_bus.schedule.ticks import ScheduleRun, StateTopic

Names = Callable[[list[str]], Awaitable[None]]


class Owners(Protocol):
    """Shares a group's schedules among the processes that run it (Kafka:
    :class:`~a2a_bus.schedule.kafka_owners.KafkaOwners`): calls ``own(names)`` for
    those this process fires, ``lose(names)`` for those it hands over."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


#: Makes the owners of a group: ``(topic, group, names, own, lose)``.
OwnersFactory = Callable[[str, str, Sequence[str], Names, Names], Owners]


class Scheduler:
    """Fires ``schedules`` as group ``group`` (async or sync context manager).

    Made by :meth:`Bus.scheduler <a2a_bus.bus.Bus.scheduler>` with the collaborators
    it uses: the dispatcher (routes, the bus's topics and transport), a client (sends
    the ticks) and the portal into the bus loop (for the sync methods).
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        client: AsyncClient,
        portal: Portal,
        schedules: Sequence[Schedule],
        *,
        group: str = "default",
        owners: OwnersFactory | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        validate_name(group, "scheduler group")
        names = [schedule.name for schedule in schedules]
        if len(set(names)) != len(names):
            twice = next(name for name in names if names.count(name) > 1)
            raise ValueError(f"two schedules are named {twice!r}")
        context = dispatcher.context
        self._dispatcher = dispatcher
        self._client = client
        self._portal = portal
        self._transport = context.transport
        self.schedules = {schedule.name: schedule for schedule in schedules}
        self.group = group
        self.topic = f"{context.topics.prefix}.schedule.{group}"
        self.source = f"a2a-bus/schedule/{group}"
        self._clock = clock
        self.runs: dict[str, ScheduleRun] = {}
        self._make_owners = owners
        self._owners: Owners | None = None
        self._states = StateTopic(context.transport, self.topic, self.source)

    # -- ownership --------------------------------------------------------------------

    async def _own(self, names: list[str]) -> None:
        if not names:
            return
        states = await self._states.load()
        for name in names:
            if name in self.runs:
                continue
            run = ScheduleRun(
                self.schedules[name],
                self._dispatcher,
                self._client,
                self._states,
                states.get(name),
                clock=self._clock,
            )
            self.runs[name] = run
            run.start()

    async def _lose(self, names: list[str]) -> None:
        runs = [self.runs.pop(name) for name in names if name in self.runs]
        await asyncio.gather(*(run.stop() for run in runs))

    # -- lifecycle --------------------------------------------------------------------

    async def astart(self) -> None:
        """Start on the running bus (from its loop)."""
        transport = self._transport
        transport.declare_compacted(self.topic)
        if self._make_owners is not None:
            owners = self._make_owners(
                self.topic, self.topic, list(self.schedules), self._own, self._lose
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
        self._portal.run(self.astart())
        return self

    def stop(self) -> None:
        self._portal.run(self.astop())

    async def __aenter__(self) -> Scheduler:
        await self.astart()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.astop()

    def __enter__(self) -> Scheduler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
