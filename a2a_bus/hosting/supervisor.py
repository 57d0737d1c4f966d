"""Supervision of one agent replica: restart with backoff, bounded retries.

pykka has no supervision: an exception inside ``tell`` stops the actor and
its queued messages are dropped. The replica therefore remembers every job
it handed over until the job's outcome arrives; after a crash it starts a new
actor (a fresh agent instance) after a backoff, hands it the jobs the old one
never finished, and retries the job that crashed it at most ``max_retries``
times before declaring it dead (the host writes it to the dead-letter topic).
A job whose input cannot be given again, or whose output cannot be taken back
(``Job.unretryable``), is dead at once, also when it was parked (``Job.parks``)
on the actor that another job crashed.
An actor that fails to start (its constructor or ``on_start`` raises) is
restarted the same way, and is ``not_started`` (not running) until a start
succeeds. After more than ``max_retries`` failed starts in a row the jobs it
holds, and those that come while it waits for its next start, are dead (the start
failure the reason, a request answered -32002 "Agent unavailable" naming it),
and once the replica stops nothing starts it again. After ``max_failed_starts``
failed starts in a row the replica gives up: it is *failed* (``failure`` says
why, logged once as an error), is never started again, and answers every job at
once with -32002 (a notification or event is dead-lettered with it). A stop that
waited long enough for a handler, or for the agent's ``on_start`` or ``on_stop``,
abandons the replica (:meth:`Replica.abandon`). The jobs held and their bound are
the replica's :class:`~a2a_bus.hosting.mailbox.Mailbox`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pykka

from a2a_bus.core.metrics import Metrics
from a2a_bus.hosting.actor import AgentActor, Job, KeptAlive, Outcome, thread_safe
from a2a_bus.hosting.agent import Agent
from a2a_bus.hosting.mailbox import Mailbox
from a2a_bus.protocol import ErrorCode, JsonRpcError

log = logging.getLogger(__name__)

#: The message of the error a failed replica answers with (code -32002).
UNAVAILABLE = "Agent unavailable"


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """How crashed agents come back."""

    #: Times the message that crashed an agent is tried again before it is dead.
    max_retries: int = 2
    backoff_initial: float = 0.05
    backoff_max: float = 2.0
    #: Starts in a row that may fail before a replica gives up (it is then failed).
    max_failed_starts: int = 10


class Replica(Mailbox):
    """One actor of an agent, restarted on crash; at most ``mailbox_size`` jobs held."""

    def __init__(
        self,
        factory: Callable[[], Agent],
        *,
        name: str,
        mailbox_size: int,
        policy: RestartPolicy,
        metrics: Metrics,
        on_pressure: Callable[[bool], None] = lambda full: None,
        tracer: Any = None,
        on_status: Callable[[], None] = lambda: None,
        drain_timeout: float = math.inf,
    ) -> None:
        super().__init__(mailbox_size, metrics, on_pressure)
        self.name = name
        #: Seconds :meth:`stop` waits for the agent's ``on_stop`` (or an ``on_start``
        #: still running) before it goes on without it.
        self._drain_timeout = drain_timeout
        self._factory = factory
        #: The bus's tracer (None: no spans), for what the agent's handlers run.
        self._tracer = tracer
        self._policy = policy
        #: Told (on the loop) when ``not_started`` or ``failure`` changed.
        self._on_status = on_status
        self._kept: KeptAlive | None = None
        self._generation = 0
        self._backoff = policy.backoff_initial
        #: Set by stop() while it waits for the actor's thread to end (``on_stop``).
        self._ending: asyncio.Future[None] | None = None
        self._restart_handle: asyncio.TimerHandle | None = None
        #: The agent's latest start has not ended: its ``on_start`` runs (and may
        #: never return).
        self._starting = False
        #: Starts that failed since the actor last ran a job.
        self._failed_starts = 0
        #: Set by stop(): a start that fails from then on is not tried again.
        self._stopping = False
        #: Why jobs cannot run here any more: the agent could not start and the
        #: replica is stopping or gave up (jobs submitted meanwhile end at once).
        self._dead: str | None = None
        #: Why the agent cannot run its jobs until a start succeeds: more than
        #: ``max_retries`` starts in a row failed (jobs that come meanwhile end at once).
        self._unstartable: str | None = None
        #: Why the agent is not running: its latest start failed, none succeeded
        #: since (None: it runs, or its first start is under way).
        self.not_started: str | None = None
        #: Why the replica gave up starting its agent (None: it has not).
        self.failure: str | None = None

    def holding(self) -> list[str]:
        """What the jobs it holds (queued, running or parked) handle: their labels,
        with ``on_start`` ahead of them while the start they wait for runs; the hook
        the stop waits for (``on_stop``, or that ``on_start``) while it waits for the
        agent's thread."""
        labels = [job.label for job in self._outstanding]
        if self._starting and (labels or self._ending is not None):
            labels.insert(0, "on_start")
        elif self._ending is not None:
            labels.append("on_stop")
        return labels

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._spawn()

    def _spawn(self) -> None:
        loop = self._loop
        assert loop is not None
        generation = self._generation
        report = thread_safe(loop, functools.partial(self._on_outcome, generation))
        failed = thread_safe(loop, functools.partial(self._on_start_failure, generation))
        started = thread_safe(loop, functools.partial(self._on_started, generation))
        kept = self._kept = KeptAlive()
        agent = self._factory()
        self._actor = AgentActor.start(agent, report, failed, loop, self._tracer, kept, started)
        self._starting = True
        for job in self._outstanding:
            self._tell(job)

    def _tell(self, job: Job) -> None:
        if self._actor is None:
            if self._dead is not None:  # never to start again
                self._resolve(job, self._dead_outcome())
            elif self._unstartable is not None:  # not held until a start that may fail too
                self._resolve(job, self._unavailable(self._unstartable))
            return  # restarting: the job is handed over after the restart
        # A try block, not contextlib.suppress: this runs for every message.
        try:  # noqa: SIM105
            self._actor.tell(job)
        except pykka.ActorDeadError:
            pass  # its crash report is on its way; the job is retold on restart

    def _on_outcome(self, generation: int, job: Job, outcome: Outcome) -> None:
        if job not in self._outstanding:
            return
        if outcome.crash is None:
            if generation == self._generation:
                self._backoff = self._policy.backoff_initial
                self._failed_starts = 0
            outcome.attempts = job.attempts + 1
            self._resolve(job, outcome)
            return
        if generation != self._generation:
            return  # a report from an actor already replaced
        self._failed_starts = 0  # it started: it ran this job
        job.attempts += 1
        log.warning(
            "agent %s crashed on %s (attempt %d): %s",
            self.name,
            job.label,
            job.attempts,
            outcome.crash,
        )
        why_not = job.unretryable() if job.unretryable is not None else None
        if job.attempts > self._policy.max_retries or why_not is not None:
            outcome.attempts = job.attempts
            if why_not is not None:
                outcome.crash = f"{outcome.crash}; not retried: {why_not}"
            self._resolve(job, outcome)
        else:
            self._metrics.redeliveries += 1
        self._end_unreplayable(job)
        self._crashed()

    def _end_unreplayable(self, crashed: Job) -> None:
        """Jobs the crashed actor had started and cannot be given again die with it."""
        for job in list(self._outstanding):
            why_not = job.unretryable() if job is not crashed and job.unretryable else None
            if why_not is not None:
                reason = f"the agent restarted while this stream was open; not retried: {why_not}"
                self._resolve(job, Outcome(crash=reason, attempts=job.attempts + 1))

    def _on_start_failure(self, generation: int, reason: str) -> None:
        if generation == self._generation:
            self._starting = False
            self._start_failed(reason)

    def _on_started(self, generation: int) -> None:
        """The agent's ``on_start`` returned; after failed starts, it runs again (until
        then an agent starting is taken to run)."""
        if generation != self._generation:
            return
        self._starting = False
        if self.not_started is None:
            return
        log.info("agent %s started after %d failed starts", self.name, self._failed_starts)
        self._failed_starts = 0
        self._unstartable = self.not_started = None
        self._on_status()

    def _start_failed(self, reason: str) -> None:
        """Restart after a backoff, as after a crash; the held jobs never ran, but
        they die when starts keep failing or the replica is stopping."""
        log.warning("agent %s failed to start: %s", self.name, reason)
        self._failed_starts += 1
        starts = self._failed_starts
        why = f"the agent failed to start ({starts} failed starts in a row): {reason}"
        if self._stopping:  # never started again: its jobs end now
            self._give_up(why)
            return
        if starts >= self._policy.max_failed_starts:
            self._fail(reason)
            return
        was_running = self.not_started is None
        self.not_started = f"failed to start (restarting): {reason}"
        if starts > self._policy.max_retries:
            self._unstartable = why
            self._end_held(why)
        self._crashed()
        if was_running:
            self._on_status()

    def _unavailable(self, reason: str) -> Outcome:
        """What a job the agent cannot run ends with: dead (``reason`` is why), its
        caller answered -32002 naming the agent and ``reason``."""
        error = JsonRpcError(ErrorCode.AGENT_UNAVAILABLE, UNAVAILABLE, f"{self.name}: {reason}")
        return Outcome(error=error, crash=reason, attempts=max(1, self._failed_starts))

    def _dead_outcome(self) -> Outcome:
        """What a job submitted to a replica that will not start again ends with."""
        if self.failure is not None:  # gave up: the caller is told so, no crash
            detail = f"agent {self.name} {self.failure}"
            return Outcome(error=JsonRpcError(ErrorCode.AGENT_UNAVAILABLE, UNAVAILABLE, detail))
        assert self._dead is not None
        return self._unavailable(self._dead)

    def _fail(self, reason: str) -> None:
        """Starts kept failing: start no more, answer every job at once, say so once."""
        self.failure = f"failed to start {self._failed_starts} times in a row; last: {reason}"
        self.not_started = None
        log.error("agent %s %s; it is not started again", self.name, self.failure)
        self._give_up(f"the agent {self.failure}")
        self._on_status()

    def _give_up(self, reason: str) -> None:
        """Stopping with an agent that cannot start: end its jobs, start it no more."""
        if self._restart_handle is not None:
            self._restart_handle.cancel()
        self._actor = None
        self._generation += 1  # reports of the actor that failed are stale now
        self._dead = reason
        self._end_held(reason)

    def _end_held(self, reason: str) -> None:
        """The held jobs are dead: the agent could not be started to run them."""
        for job in list(self._outstanding):
            self._resolve(job, self._unavailable(reason))

    def _crashed(self) -> None:
        assert self._loop is not None
        self._actor = None
        self._generation += 1
        self._metrics.restarts += 1
        delay, self._backoff = self._backoff, min(self._backoff * 2, self._policy.backoff_max)
        self._restart_handle = self._loop.call_later(delay, self._restart)

    def _restart(self) -> None:
        # A constructor that fails here (unlike at the first start, which raises
        # to spawn()) would otherwise leave the held jobs waiting forever.
        try:
            self._spawn()
        except Exception as exc:
            self._start_failed(f"{type(exc).__name__} in the constructor: {exc}")

    def begin_stop(self) -> None:
        """The replica is stopping: an agent that cannot start is not waited for.

        If a restart after a failed start is pending, the held jobs end now (as
        do jobs submitted from now on); a start that fails from now on ends them
        too. A restart after a crash still goes ahead: it runs the held jobs.
        """
        self._stopping = True
        if self._actor is None and self._failed_starts and self._dead is None:
            starts = self._failed_starts
            self._give_up(
                f"the agent failed to start ({starts} failed starts in a row) and was stopped"
            )

    def abandon(self, reason: str) -> None:
        """Stop without waiting for the held jobs any longer (their handlers do not
        return): they end now, dead with ``reason`` (a request answered -32002), as
        do jobs submitted from now on. The actor stops once its handler returns, if
        ever; its thread no longer keeps the process alive."""
        self.let_go()
        self._give_up(reason)
        if self._ending is not None:  # stop() waits for on_stop: no longer
            _settle(self._ending)

    def let_go(self) -> None:
        """Ask the actor to stop once its handler returns, without waiting for it
        (from any thread: the loop may be gone); its thread no longer keeps the
        process alive."""
        actor, self._actor = self._actor, None
        if actor is not None:
            actor.stop(block=False)
        if self._kept is not None:
            self._kept.leave()

    async def stop(self) -> None:
        """Let held jobs finish, then stop the actor (its ``on_stop`` runs, waited for
        up to the drain timeout, as is an ``on_start`` still running).

        Jobs an agent that cannot start holds are ended, not waited for (see
        :meth:`begin_stop`); nor are jobs once the replica is abandoned.
        """
        self.begin_stop()
        await self._drain()
        if self._restart_handle is not None:
            self._restart_handle.cancel()
        actor, self._actor = self._actor, None
        if actor is not None:
            await self._stop_actor(actor)

    async def _stop_actor(self, actor: pykka.ActorRef[AgentActor]) -> None:
        """Ask the actor to stop and wait, up to the drain timeout, for its thread to
        end (``on_stop`` runs there, once an ``on_start`` still running returned);
        :meth:`abandon` ends the wait sooner. No thread blocks on it: a hook that
        never returns holds none of the loop's."""
        assert self._kept is not None
        loop = asyncio.get_running_loop()
        ending = self._ending = loop.create_future()
        self._kept.when_left(thread_safe(loop, functools.partial(_settle, ending)))
        actor.stop(block=False)  # a dead actor's thread has ended (or soon will)
        timeout = None if math.isinf(self._drain_timeout) else self._drain_timeout
        try:
            await asyncio.wait_for(asyncio.shield(ending), timeout)
        except TimeoutError:
            if ending.done():  # abandoned meanwhile: the bus said so
                return
            log.warning(
                "agent %s: %s still running after the %g s drain timeout; stopping"
                " without it, its thread left to end by itself",
                self.name,
                "on_start" if self._starting else "on_stop",
                self._drain_timeout,
            )
            self.let_go()
        finally:
            self._ending = None


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
