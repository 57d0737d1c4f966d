"""The jobs a replica holds, each from its submission to its outcome.

A replica holds every job it handed to its actor until the job's outcome arrives:
pykka drops a crashed actor's queued messages, so the supervisor
(:mod:`a2a_bus.hosting.supervisor`) hands the held ones to the next actor. At most
``mailbox_size`` are held: a submission beyond that waits for room, and
``on_pressure`` is told when the mailbox fills (the host pauses its input) and
again once it is half empty. Parked jobs (``Job.parks``) are bounded by the host
(open streams), not by the mailbox: a mailbox full of jobs waiting for input would
pause the very input they wait for.

Submitting and resolving run for every message: they add no call they can do without.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Awaitable, Callable

import pykka

from a2a_bus.core.metrics import Metrics
from a2a_bus.hosting.actor import AgentActor, Job, Outcome


class Mailbox(abc.ABC):
    """The jobs of one replica's actor, at most ``mailbox_size`` held (parked ones aside).

    A job goes to the running actor; with none, :meth:`_tell` decides what becomes
    of it. :meth:`_resolve` ends a job with its final outcome.
    """

    def __init__(
        self, mailbox_size: int, metrics: Metrics, on_pressure: Callable[[bool], None]
    ) -> None:
        self.mailbox_size = max(1, mailbox_size)
        self._metrics = metrics
        self._on_pressure = on_pressure
        self._outstanding: dict[Job, None] = {}  # insertion-ordered set
        self._parking = 0  # outstanding jobs that may park: not held against the bound
        #: The running actor (None: restarting, or never to run again).
        self._actor: pykka.ActorRef[AgentActor] | None = None
        #: The loop the jobs' futures belong to (set when the replica starts).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._space = asyncio.Event()
        self._space.set()
        self._full = False
        #: Set by :meth:`_drain` while it waits for the held jobs to end (no Event
        #: set and cleared per job: this is on every request's path).
        self._drained: asyncio.Future[None] | None = None

    @property
    def held(self) -> int:
        """Jobs queued or running in this replica, parked ones excepted."""
        return len(self._outstanding) - self._parking

    @abc.abstractmethod
    def _tell(self, job: Job) -> None:
        """Hand a held ``job`` to the actor, or, with none running, settle what
        becomes of it."""

    def submit(self, job: Job) -> Awaitable[Outcome]:
        """Hand ``job`` to the actor; await the result for its final outcome.

        With room in the mailbox that is the job's future itself (no coroutine
        on the request path); when full, a coroutine that waits for room first.
        """
        outstanding = self._outstanding
        held = len(outstanding) - self._parking  # held against the bound, this job aside
        if job.parks:
            self._parking += 1
        elif held >= self.mailbox_size:
            return self._submit_when_room(job)
        else:
            held += 1
        assert self._loop is not None
        future = job.future = self._loop.create_future()
        outstanding[job] = None
        metrics = self._metrics
        if held > metrics.peak_mailbox:
            metrics.peak_mailbox = held
        if held >= self.mailbox_size:
            self._set_full(True)
        actor = self._actor
        if actor is None:
            self._tell(job)  # restarting (or dead): _tell knows what to do
            return future
        # _tell's common case, spelled out: this runs for every message.
        try:  # noqa: SIM105
            actor.tell(job)
        except pykka.ActorDeadError:
            pass  # its crash report is on its way; the job is retold on restart
        return future

    async def _submit_when_room(self, job: Job) -> Outcome:
        while self.held >= self.mailbox_size:
            await self._space.wait()
        return await self.submit(job)

    def _set_full(self, full: bool) -> None:
        if full == self._full:
            return
        self._full = full
        if full:
            self._space.clear()
            self._metrics.pauses += 1
        else:
            self._space.set()
        self._on_pressure(full)

    def _resolve(self, job: Job, outcome: Outcome) -> None:
        outstanding = self._outstanding
        if outstanding.pop(job, False) is None and job.parks:
            self._parking -= 1
        # The future first: the callbacks it schedules (the handler that submitted
        # the job resumes, finishing that delivery) then run before those of the
        # answer (the caller, who may send the next request at once), so no
        # bookkeeping is left on the loop after that request is handed to an actor,
        # when it would hold the GIL the actor's thread wakes up for.
        future = job.future
        if future is not None and not future.done():
            future.set_result(outcome)
        if job.answer is not None:
            job.answered = job.answer(job, outcome)
        if self._full and len(outstanding) - self._parking <= self.mailbox_size // 2:
            self._set_full(False)
        if not outstanding and self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    async def _drain(self) -> None:
        """Wait until no job is held."""
        while self._outstanding:
            assert self._loop is not None
            self._drained = self._loop.create_future()
            await self._drained
        self._drained = None
