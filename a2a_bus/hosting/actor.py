"""A pykka actor hosting one agent, and how work crosses between it and the asyncio loop.

The loop hands a :class:`Job` to the actor with ``tell`` (never ``ask``: the
loop must not block on a pykka future); the actor runs it in its own thread
and reports the :class:`Outcome` back with ``loop.call_soon_threadsafe``.
An exception other than :class:`JsonRpcError` is a crash: it is reported,
then re-raised so pykka logs the traceback and stops the actor; the
supervisor restarts it. A job that may wait for input (``Job.parks``: a
handler reading a caller's stream) runs in a :class:`~a2a_bus.runtime.fiber.Fiber`
and gives the actor back while it waits; the actor is told to resume it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import queue
import threading
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pykka

from a2a_bus.hosting.agent import Agent
from a2a_bus.hosting.control import IDLE, RunControl
from a2a_bus.protocol import JsonRpcError
from a2a_bus.runtime.fiber import Fiber
from a2a_bus.runtime.keepalive import ACTORS
from a2a_bus.runtime.tracing import ORIGIN, Origin, attach, detach, parent_of
from a2a_bus.runtime.tuples import build

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Outcome:
    """What a job ended with: a result, a JSON-RPC error, or a crash reason (with
    the error its caller gets instead of -32603, when the agent did not run it)."""

    result: Any = None
    error: JsonRpcError | None = None
    crash: str | None = None
    #: Set by the supervisor when retries are exhausted: the message is dead.
    attempts: int = 1


@dataclass(eq=False, slots=True)
class Job:
    """One message for an agent: ``call(agent)`` runs in the actor thread."""

    call: Callable[[Agent], Any]
    label: str
    event: Any = None
    redelivered: bool = False
    #: For streaming handlers: called in the actor thread with (seq, item);
    #: False means the stream was cancelled and the generator is closed.
    emit: Callable[[int, Any], bool] | None = None
    attempts: int = 0
    #: Called on the loop after a crash: why the job cannot be tried again (its
    #: input was used up, or its output stream partly sent), or None. None here:
    #: it can always be retried.
    unretryable: Callable[[], str | None] | None = field(default=None, repr=False)
    future: asyncio.Future[Outcome] | None = field(default=None, repr=False)
    #: Called on the loop with the job and its final outcome, right after ``future``
    #: is resolved (before anything awaiting it resumes); True when it answered the
    #: caller itself (a caller in this process).
    answer: Callable[[Job, Outcome], bool] | None = field(default=None, repr=False)
    answered: bool = False
    #: The call may park (wait for input without holding the actor): it runs in
    #: a Fiber, and the replica's mailbox bound does not count it.
    parks: bool = False
    #: What the handler sees as ``self.cancelled`` / ``self.progress``.
    control: RunControl = IDLE


Report = Callable[[Job, Outcome], None]

_actor_thread = threading.local()


def serving_loop() -> asyncio.AbstractEventLoop | None:
    """The loop whose agent the calling thread runs (None outside actor threads):
    a call that blocks until that loop's handlers end must not be made here."""
    return getattr(_actor_thread, "loop", None)


class KeptAlive:
    """An actor thread's count on the keeper of the process (``ACTORS``), given back
    once: when the thread ends, or before that when its bus stops without waiting
    for it (a handler that never returns must not keep the process alive)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held = False
        self._when_left: list[Callable[[], None]] = []

    def enter(self) -> None:
        """Count the thread (before it starts)."""
        with self._lock:
            self._held = True
            ACTORS.enter()

    def leave(self) -> None:
        """Give the count back; once only, however often it is called."""
        with self._lock:
            held, self._held = self._held, False
            if held:
                ACTORS.leave()
            calls, self._when_left = self._when_left, []
        for call in calls:
            call()

    def when_left(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the count is given back (at once if it is), from
        the thread that gives it back."""
        with self._lock:
            if self._held:
                self._when_left.append(callback)
                return
        callback()


class AgentActor(pykka.ThreadingActor):
    """Hosts one agent instance; handles jobs one at a time, in order."""

    def __init__(
        self,
        agent: Agent,
        report: Report,
        report_start_failure: Callable[[str], None],
        loop: asyncio.AbstractEventLoop | None = None,
        tracer: Any = None,
        kept: KeptAlive | None = None,
        report_started: Callable[[], None] | None = None,
    ):
        super().__init__()
        self.agent = agent
        #: The bus's tracer (None: no spans), handed on to what handlers run.
        self._tracer = tracer
        #: The loop this actor's reports go to (what :func:`serving_loop` tells).
        self.loop = loop
        self._report = report
        self._report_start_failure = report_start_failure
        #: Told when the agent started (None: nobody waits to hear it).
        self._report_started = report_started
        #: What keeps the process alive while this actor's thread runs.
        self.kept = kept or KeptAlive()
        #: Calls that gave the actor back while they wait for input (see Fiber).
        self._fibers: dict[Fiber, Job] = {}

    def __str__(self) -> str:
        # pykka names the actor so in the log, with the traceback of its failures.
        return f"agent {self.agent.agent_id} ({self.actor_urn})"

    @staticmethod
    def _create_actor_inbox() -> Any:
        # pykka's hook for actor types: a C-implemented SimpleQueue puts and gets
        # without the Condition of queue.Queue (the mailbox bound is the replica's).
        return queue.SimpleQueue()

    # A daemon thread, so that starting one does not cost more with every agent
    # running; ACTORS keeps the process alive while it runs (see runtime.keepalive).
    use_daemon_thread = True

    def _start_actor_loop(self) -> None:
        self.kept.enter()
        try:
            super()._start_actor_loop()
        except BaseException:
            self.kept.leave()
            raise

    def _actor_loop(self) -> None:
        try:
            super()._actor_loop()
        finally:
            self.kept.leave()

    def on_start(self) -> None:
        _actor_thread.loop = self.loop  # the thread is this actor's alone
        try:
            self.agent.on_start()
        except Exception as exc:
            self._report_start_failure(f"{type(exc).__name__} in on_start: {exc}")
            raise
        if self._report_started is not None:
            self._report_started()

    def on_stop(self) -> None:
        self._abort_fibers()
        self.agent.on_stop()

    def on_failure(self, *exc_info: Any) -> None:
        self._abort_fibers()

    def _handle_receive(self, message: Any) -> Any:
        # pykka's hook: a job goes straight to on_receive, before pykka tests the
        # message against each of its own kinds (this runs for every message).
        if type(message) is Job:
            return self.on_receive(message)
        return super()._handle_receive(message)

    def on_receive(self, message: Any) -> Any:
        if type(message) is not Job:
            if type(message) is _Resume and self._fibers.get(message.fiber) is message.job:
                self._run_slice(message.job, message.fiber)
            return None
        job = message
        agent = self.agent
        if job.parks:
            call = functools.partial(_serve, self.loop, self._origin(job), job.call, agent)
            fiber = Fiber(call, name=f"{job.label} reader")
            fiber.wake = functools.partial(_tell_quietly, self.actor_ref, _Resume(job, fiber))
            self._fibers[fiber] = job
            self._run_slice(job, fiber)
            return None
        agent.event = job.event
        agent.redelivered = job.redelivered or job.attempts > 0
        agent.control = job.control
        # What the handler's own messages continue (their trace, call depth and chain).
        origin = self._origin(job)
        token = ORIGIN.set(origin)
        # With an SDK, the span handling the event is current in the handler.
        traced = None if self._tracer is None or origin is None else attach(parent_of(origin))
        try:
            value = job.call(agent)
            if job.emit is not None and inspect.isgenerator(value):
                count = 0
                for item in value:
                    if not job.emit(count, item):
                        value.close()  # runs the generator's finally blocks
                        break
                    count += 1
                value = count
        except JsonRpcError as exc:
            self._report(job, Outcome(error=exc))
            return None
        except BaseException as exc:
            self._report(job, Outcome(crash=f"{type(exc).__name__}: {exc}"))
            # pykka logs an Exception with its traceback and stops this actor alone;
            # it answers any other BaseException (SystemExit, say) by stopping every
            # actor in the process.
            if isinstance(exc, Exception):
                raise
            raise HandlerEscaped(exc) from exc
        finally:
            ORIGIN.reset(token)
            if traced is not None:
                detach(traced)
        self._report(job, Outcome(value))
        return None

    def _origin(self, job: Job) -> Origin | None:
        event = job.event
        if event is None:
            return None
        fields = (event.get_attributes(), self.agent.agent_id, self._tracer)
        return build(Origin, fields)  # one per job

    def _run_slice(self, job: Job, fiber: Fiber) -> None:
        """Run ``job``'s fiber until it parks (other messages go on) or ends."""
        agent = self.agent
        agent.event = job.event
        agent.redelivered = job.redelivered or job.attempts > 0
        agent.control = job.control
        if not fiber.run_slice():
            return
        del self._fibers[fiber]
        error = fiber.error
        if error is None:
            self._report(job, Outcome(fiber.result))
        elif isinstance(error, JsonRpcError):
            self._report(job, Outcome(error=error))
        else:
            self._report(job, Outcome(crash=f"{type(error).__name__}: {error}"))
            # As above: logged by pykka, this actor alone stops.
            if isinstance(error, Exception):
                raise error
            raise HandlerEscaped(error) from error

    def _abort_fibers(self) -> None:
        """This agent instance is done: unwind the calls parked on it."""
        fibers, self._fibers = self._fibers, {}
        for fiber in fibers:
            fiber.abort()


class HandlerEscaped(RuntimeError):
    """A handler raised a BaseException that is no Exception (SystemExit,
    KeyboardInterrupt, GeneratorExit): a crash of its agent, like any other."""

    def __init__(self, escaped: BaseException) -> None:
        super().__init__(f"the handler raised {type(escaped).__name__}: {escaped}")


@dataclass(frozen=True, slots=True)
class _Resume:
    """Told to the actor when the parked ``fiber`` running ``job`` may go on."""

    job: Job
    fiber: Fiber


def _serve(
    loop: asyncio.AbstractEventLoop | None,
    origin: Origin | None,
    call: Callable[[Agent], Any],
    agent: Agent,
) -> Any:
    """``call(agent)`` on a fiber's thread, which serves ``loop`` and ``origin`` as
    its actor's does (the thread is the call's alone: nothing to reset)."""
    _actor_thread.loop = loop
    ORIGIN.set(origin)
    if origin is not None and origin.tracer is not None:
        attach(parent_of(origin))
    return call(agent)


def _tell_quietly(actor: pykka.ActorRef[Any], message: Any) -> None:
    with contextlib.suppress(pykka.ActorDeadError):  # its fibers were aborted with it
        actor.tell(message)


class _LoopCalls:
    """Calls made from actor threads, run on the loop in order: one loop wake-up
    (self-pipe write) per burst rather than one per call."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._calls: deque[tuple[Callable[..., None], tuple[Any, ...]]] = deque()
        self._scheduled = False

    def call(self, callback: Callable[..., None], *args: Any) -> None:  # any thread
        self._calls.append((callback, args))
        if self._scheduled:
            return  # the pending drain runs it
        self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # the loop is closed: the bus is gone
            log.debug("dropped a report after the loop closed")

    def _drain(self) -> None:  # on the loop
        # Cleared first: a call appended from now on schedules another drain, so
        # none is left behind (deque appends and pops are atomic).
        self._scheduled = False
        calls = self._calls
        while calls:
            callback, args = calls.popleft()
            try:
                callback(*args)
            except Exception:
                log.exception("a report from an actor failed on the loop")


_loop_calls: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopCalls] = (
    weakref.WeakKeyDictionary()
)


def thread_safe(
    loop: asyncio.AbstractEventLoop, callback: Callable[..., None]
) -> Callable[..., None]:
    """Wrap ``callback`` so any thread can schedule it on ``loop`` (in call order;
    calls that come in a burst share one wake-up of the loop)."""
    calls = _loop_calls.get(loop)
    if calls is None:
        calls = _loop_calls[loop] = _LoopCalls(loop)
    return functools.partial(calls.call, callback)
