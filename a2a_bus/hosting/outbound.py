"""What leaves an agent host for its callers: outcomes in a form every transport
carries, and a generator handler's items streamed as chunks.

A stream's items are published in order, each as a chunk on the caller's reply
topic, then the end with the count (or the error). Chunks are pipelined: each is
handed to the transport as soon as it comes, without waiting for the one before
to be acknowledged (on Kafka a wait is a broker round trip), and their
acknowledgements are taken in ``seq`` order (:class:`Unacknowledged`). The actor
may run :data:`STREAM_CREDITS` items ahead of the acknowledged chunks; a caller's
``stream/cancel`` closes the generator at its next item; an item no transport
carries ends the stream with that error, and so does the first chunk, in ``seq``
order, that the transport failed to write; a generator that crashed after its
first chunk is not run again (its chunks cannot be taken back).

Order: every chunk is handed over by one task, in ``seq`` order. A publish that
returns a future has handed its record over already (Kafka appends it to its
partition's open batch at once, and hands a partition's batches to the producer
one at a time, in order); any other awaitable hands it over only when awaited,
so it is awaited before the next chunk goes. All chunks of a stream share one
record key, so one partition.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from a2a_bus.core.context import BusContext
from a2a_bus.core.dispatch import Dispatcher
from a2a_bus.core.errors import transport_refusal
from a2a_bus.core.payload import error_message, refusal
from a2a_bus.core.streams import ChunkEvents, end_event
from a2a_bus.hosting.actor import Job, Outcome, thread_safe
from a2a_bus.hosting.supervisor import Replica
from a2a_bus.protocol import (
    ErrorCode,
    JsonRpcError,
    error_response,
    ext,
    record_key,
    result_response,
)
from a2a_bus.transport.base import Delivery
from a2a_bus.transport.errors import TransportError

log = logging.getLogger(__name__)

#: Chunks an agent may emit ahead of the loop publishing them.
STREAM_CREDITS = 256
#: Why a generator that crashed after its first chunk is not tried again.
STREAM_PARTLY_SENT = "its output stream was partly sent, and sent chunks cannot be taken back"

#: Writes a delivery to the dead-letter topic: (delivery, reason, attempts).
DeadLetter = Callable[[Delivery, str, int], Awaitable[None]]


class OutboundStreams:
    """Runs the generator handlers of one agent host, streaming to their callers."""

    def __init__(
        self, context: BusContext, dispatcher: Dispatcher, agent_id: str, dead_letter: DeadLetter
    ) -> None:
        self._context = context
        self._dispatcher = dispatcher
        self._agent_id = agent_id
        self._dead_letter = dead_letter

    async def run(
        self,
        replica: Replica,
        delivery: Delivery,
        message: dict[str, Any],
        job: Job,
        before_end: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Run a generator handler; publish each item as a chunk, in order, then the end."""
        event = delivery.event
        request_id = event.get_id()
        reply_to = event.get_extension(ext.REPLY_TO)
        control = self._context.reply_topic
        loop = asyncio.get_running_loop()
        handover: Handover[tuple[int, Any] | None] = Handover(loop)
        # Items of a burst share one wake-up of the loop, in order with the outcome's report.
        put = thread_safe(loop, handover.put)
        credits = Credits(STREAM_CREDITS)
        # Plain flags, not threading.Events: read for every item, in two threads.
        cancelled = False
        #: Set once a chunk is on its way: a crash after it is final (see unretryable).
        sent = False
        #: The first chunk, in seq order, that was not sent: the stream ends with this error there.
        refused: list[tuple[int, JsonRpcError]] = []

        def emit(seq: int, item: Any) -> bool:  # runs in the actor thread
            nonlocal sent
            if cancelled:
                return False
            if not credits.take(timeout=60):
                raise TimeoutError("the stream's reader stopped taking chunks")
            if cancelled:
                return False
            if seq == 0:  # before the crash report that may follow, from this thread
                sent = True
            put((seq, item))
            return True

        def unretryable() -> str | None:  # on the loop, after a crash
            # A retry's chunks would carry on from the first run's: two runs stitched.
            return STREAM_PARTLY_SENT if sent else None

        def cancel() -> None:  # on the loop: the caller sent stream/cancel, or a chunk failed
            nonlocal cancelled
            if cancelled:
                return
            cancelled = True
            job.control.cancel()
            credits.give(STREAM_CREDITS)  # wake an emit waiting for credit

        def on_settled(seq: int, error: BaseException | None) -> None:  # in seq order
            if error is not None and not refused:
                refused.append((seq, _unsent(seq, error)))
                cancel()  # the generator is closed at its next item
            credits.give()

        async def pump() -> None:
            transport = self._context.transport
            chunks = None
            if isinstance(reply_to, str):
                chunks = ChunkEvents(self._context.adaptor, event, reply_to, control)
            unacknowledged = Unacknowledged(loop, on_settled)
            entries = handover.entries
            while (entry := entries.popleft() if entries else await handover.take()) is not None:
                seq, item = entry
                if chunks is None or cancelled:
                    credits.give()
                    continue
                if (error := refusal(item, f"chunk {seq}", result=True)) is not None:
                    cancel()  # nothing after it goes; it is settled after those before it
                    unacknowledged.settled(seq, error)
                    continue
                chunk = chunks(seq, item)
                try:
                    ack = transport.publish(chunks.reply_to, chunk, key=chunks.key)
                    if isinstance(ack, asyncio.Future):  # handed over: the next one may go
                        unacknowledged.add(seq, ack)
                        continue
                    await ack  # hands the record over: the next chunk must not overtake it
                except Exception as exc:  # the broker refused it, or is gone
                    cancel()
                    unacknowledged.settled(seq, exc)
                    continue
                unacknowledged.settled(seq, None)
            await unacknowledged.wait()

        job.emit = emit
        job.unretryable = unretryable
        self._dispatcher.stream_started(request_id, cancel)
        pumping = loop.create_task(pump())
        try:
            outcome = await replica.submit(job)
        finally:
            handover.put(None)
            try:
                await pumping
            finally:
                self._dispatcher.stream_ended(request_id)
        if refused:  # ended where an item could not be sent
            error = refused[0][1]
            log.warning("stream %s of %s ended: %s", request_id, self._agent_id, error.data)
            outcome = Outcome(error=error)
        elif cancelled:  # the caller is gone: nothing more to send
            self._context.metrics.handled += 1
            await self._failed(delivery, outcome)
            return
        id = message.get("id")
        if outcome.result is not None and outcome.error is None and outcome.crash is None:
            count = outcome.result
            response = result_response({"chunks": count}, id)
        else:
            count = refused[0][0] if refused else 0
            await self._failed(delivery, outcome)
            error = carried(outcome).error or JsonRpcError(
                ErrorCode.INTERNAL_ERROR, "Internal error"
            )
            response = error_response(error.code, error.message, id, error.data)
        self._context.metrics.handled += 1
        if before_end is not None:
            await before_end()
        if isinstance(reply_to, str):
            end = end_event(self._context.adaptor, event, count, response, reply_to)
            await self._context.transport.publish(reply_to, end, key=record_key(end))

    async def _failed(self, delivery: Delivery, outcome: Outcome) -> None:
        if outcome.crash is not None:
            await self._dead_letter(delivery, f"handler-crash: {outcome.crash}", outcome.attempts)


T = TypeVar("T")


class Handover(Generic[T]):
    """Entries put on the loop, in order, and taken by one task there.

    What an ``asyncio.Queue`` does for one reader, with less per entry: the
    entries are a deque the reader pops (:attr:`entries`), and it waits on a
    future only while there is none (:meth:`take`).
    """

    __slots__ = ("_loop", "_waiter", "entries")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiter: asyncio.Future[None] | None = None
        self.entries: deque[T] = deque()

    def put(self, entry: T) -> None:
        """Add ``entry`` (on the loop), waking the reader if it waits."""
        self.entries.append(entry)
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def take(self) -> T:
        """The next entry, once there is one."""
        entries = self.entries
        while not entries:
            waiter = self._waiter = self._loop.create_future()
            await waiter
        return entries.popleft()


class Credits:
    """How far an actor may run ahead of the chunks settled: :meth:`take` in the
    actor's thread, :meth:`give` on the loop.

    Each count is written by one thread only, so neither takes a lock per chunk
    (a ``threading.Semaphore`` takes one, in Python, on both sides); the actor
    blocks, and is woken, only when it has no credit left.
    """

    __slots__ = ("_given", "_limit", "_taken", "_waiting", "_wake")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._taken = 0  # written by the actor's thread only
        self._given = 0  # written on the loop only
        self._waiting = False
        #: A token per wake-up; one left over from a wake-up not needed only makes
        #: the next wait look again.
        self._wake: queue.SimpleQueue[None] = queue.SimpleQueue()

    def take(self, timeout: float) -> bool:
        """One credit, waiting ``timeout`` seconds at most for it (False: none came)."""
        if self._taken - self._given >= self._limit and not self._wait(timeout):
            return False
        self._taken += 1
        return True

    def _wait(self, timeout: float) -> bool:
        """Until a credit is given (True), or ``timeout`` seconds passed (False)."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                self._waiting = True
                # Looked at after saying so: a credit given before that woke nobody.
                if self._taken - self._given < self._limit:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                try:
                    self._wake.get(timeout=left)
                except queue.Empty:
                    return False
        finally:
            self._waiting = False

    def give(self, count: int = 1) -> None:
        """``count`` more credits, waking the actor if it waits for one."""
        self._given += count
        if self._waiting:
            self._waiting = False
            self._wake.put(None)


class Unacknowledged:
    """The chunks of one stream handed to the transport and not settled yet.

    Each is settled (``on_settled(seq, error)``, ``error`` None once acknowledged)
    in the order it was added, which is ``seq`` order: one acknowledged before an
    earlier one waits for it, so the first error settled is that of the first
    chunk not sent.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        on_settled: Callable[[int, BaseException | None], None],
    ) -> None:
        self._loop = loop
        self._on_settled = on_settled
        #: (seq, its acknowledgement, or None once settled with the error beside it).
        self._waiting: deque[tuple[int, asyncio.Future[None] | None, BaseException | None]]
        self._waiting = deque()
        self._empty: asyncio.Future[None] | None = None

    def add(self, seq: int, ack: asyncio.Future[None]) -> None:
        """Chunk ``seq`` was handed over; ``ack`` is done when the transport wrote it."""
        self._waiting.append((seq, ack, None))
        ack.add_done_callback(self._settle_ready)

    def settled(self, seq: int, error: BaseException | None) -> None:
        """Chunk ``seq`` is settled already: sent, or refused before it was handed over."""
        if self._waiting:
            self._waiting.append((seq, None, error))
        else:
            self._on_settled(seq, error)

    async def wait(self) -> None:
        """Until every chunk added is settled."""
        if self._waiting:
            self._empty = self._loop.create_future()
            await self._empty

    def _settle_ready(self, _: object = None) -> None:
        waiting = self._waiting
        while waiting:
            seq, ack, error = waiting[0]
            if ack is not None:
                if not ack.done():
                    return  # the chunks after it wait for it
                error = asyncio.CancelledError() if ack.cancelled() else ack.exception()
            waiting.popleft()
            self._on_settled(seq, error)
        if self._empty is not None and not self._empty.done():
            self._empty.set_result(None)


def _unsent(seq: int, exc: BaseException) -> JsonRpcError:
    """The error a stream ends with when its chunk ``seq`` could not be published:
    the transport's refusal (a record too large: -32005; not delivered in time:
    -32001) or -32603, its data naming the chunk."""
    if isinstance(exc, JsonRpcError):
        return exc
    unsent = f"chunk {seq} could not be sent"
    if isinstance(exc, TransportError):
        refused = transport_refusal(exc, response=True)
        return JsonRpcError(refused.code, refused.message, f"{unsent}: {exc}")
    detail = f"{unsent}: {type(exc).__name__}: {exc}"
    return JsonRpcError(ErrorCode.INTERNAL_ERROR, "Internal error", detail)


def carried(outcome: Outcome) -> Outcome:
    """``outcome`` as it can travel (see :mod:`a2a_bus.core.payload`): a result no
    transport carries becomes the error the caller gets; an error's ``data`` that
    none carries is replaced by why (its code is kept, its message made one that
    travels: :func:`~a2a_bus.core.payload.error_message`)."""
    if outcome.crash is not None:
        return outcome
    if outcome.error is None:
        error = refusal(outcome.result, "the result", result=True)
        if error is not None:
            log.warning("a result was not sent: %s", error.data)
            return Outcome(error=error, attempts=outcome.attempts)
        return outcome
    error = outcome.error
    message = error_message(error.message)
    data = error.data
    if data is not None and (left_out := refusal(data, "the error's data")):
        log.warning("an error's data was not sent: %s", left_out.data)
        data = f"left out: {left_out.data}"
    if message is error.message and data is error.data:
        return outcome
    return Outcome(error=JsonRpcError(error.code, message, data), attempts=outcome.attempts)
