"""Ordered streams: chunk sequencing, the end marker, and receiver-side checks.

A stream is a run of events sharing one record key (so one partition, in
order), numbered by the ``seq`` attribute from 0, closed by an end marker that
carries ``streamend`` and the number of chunks. The receiver still checks
``seq``: a repeat is dropped and counted, a chunk ahead of its turn waits in a
bounded buffer, and a gap left when the end marker arrives breaks the stream.

Agent -> caller: chunks are response events (``collaborationid`` = the
request id), each ``result`` one item. Caller -> agent: chunks are JSON-RPC
notifications of the method with ``params._sessionId``/``_seq``/``chunk``; the
end marker is the request itself (``_seq`` = chunk count, ``_end``: true),
answered like any request. A caller that gives up before the end sends the end
as a notification with ``_abort``: true; the handler's stream breaks at once.

A request answered by a stream but made as a plain call (not as a stream)
gets the items gathered into one list (:class:`Collected`), bounded in bytes.

Cancel: every agent -> caller chunk names, in ``streamcontrol``, the reply
topic of the node running the generator. A caller that stops reading sends
the JSON-RPC notification ``stream/cancel`` (``params.requestId``) there; that
node stops the generator (it is closed at its next item) and sends nothing more.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import orjson
from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol import Adaptor, ErrorCode, JsonRpcError, ext, key_of, new_id, result_response
from a2a_bus.protocol.events import adopt_event
from a2a_bus.runtime.fiber import Fiber, FiberAborted

#: Extension flag on the event that closes a stream.
STREAM_END = "streamend"
#: Extension on agent -> caller chunks: where to send ``stream/cancel``.
STREAM_CONTROL = "streamcontrol"
#: The notification that stops an agent -> caller stream upstream.
CANCEL_METHOD = "stream/cancel"
#: params member carrying one item of a caller -> agent stream; and its end flag.
CHUNK_PARAM = "chunk"
END_PARAM = "_end"
#: With ``_end``: the caller gave up; the stream is broken, not ended.
ABORT_PARAM = "_abort"
#: params members that belong to the stream, not to the handler.
STREAM_PARAMS = (CHUNK_PARAM, END_PARAM, ABORT_PARAM)
#: Bound of a stream gathered into one list, as JSON (the gateway's default body limit).
COLLECT_MAX_BYTES = 1 << 20


class ChunkEvents:
    """The agent -> caller chunks answering ``request``, made by calling it with
    each ``(seq, item)``; ``control`` is where a cancel for this stream goes.

    The attributes are built once (the response's, ``seq``, ``replyto``,
    ``streamcontrol``) and copied for each chunk with its own ``id`` and ``seq``
    (and ``time``, when a task's records carry one): the same events as building
    each afresh, at a fraction of the cost on a stream's path.
    """

    __slots__ = ("_attributes", "_id", "key", "reply_to")

    def __init__(
        self, adaptor: Adaptor, request: CloudEvent, reply_to: str, control: str | None = None
    ) -> None:
        message = request.get_data()
        self._id = message.get("id") if isinstance(message, dict) else None
        attributes = adaptor.response_event(request, {}).get_attributes()
        attributes[ext.SEQ] = 0
        attributes[ext.REPLY_TO] = reply_to
        if control is not None:
            attributes[STREAM_CONTROL] = control
        self._attributes = attributes
        #: Where the chunks go: the caller's reply topic.
        self.reply_to = reply_to
        #: The record key of every chunk: they share one, so one partition, in order.
        self.key = key_of(attributes)

    def __call__(self, seq: int, item: Any) -> CloudEvent:
        attributes = self._attributes.copy()
        attributes["id"] = new_id()
        attributes[ext.SEQ] = seq
        if "time" in attributes:
            attributes["time"] = datetime.now(UTC)
        return adopt_event(attributes, result_response(item, self._id))


def chunk_event(
    adaptor: Adaptor,
    request: CloudEvent,
    seq: int,
    item: Any,
    reply_to: str,
    control: str | None = None,
) -> CloudEvent:
    """One agent -> caller chunk answering ``request`` (see :class:`ChunkEvents`)."""
    return ChunkEvents(adaptor, request, reply_to, control)(seq, item)


def cancel_message(request_id: str) -> dict[str, Any]:
    """The JSON-RPC notification that stops the stream answering ``request_id``."""
    return {"jsonrpc": "2.0", "method": CANCEL_METHOD, "params": {"requestId": request_id}}


def end_event(
    adaptor: Adaptor, request: CloudEvent, count: int, response: dict[str, Any], reply_to: str
) -> CloudEvent:
    """The end marker: ``response`` is ``{"chunks": count}`` or the error."""
    event = adaptor.response_event(request, response)
    attributes = event.get_attributes()
    attributes[ext.SEQ] = count
    attributes[STREAM_END] = True
    attributes[ext.REPLY_TO] = reply_to
    return event


class SeqReceiver:
    """Puts chunks back in ``seq`` order; drops repeats; reports gaps.

    With ``restart_breaks``, a repeat of seq 0 after later chunks breaks the stream
    instead: the sender started over (a generator run again after its node died),
    and the second run's chunks would carry on from the first run's.
    """

    def __init__(self, window: int = 4096, *, restart_breaks: bool = False) -> None:
        self.expected = 0
        self.window = window
        self.restart_breaks = restart_breaks
        self.duplicates = 0
        self.out_of_order = 0
        self._ahead: dict[int, Any] = {}

    def accept(self, seq: Any, item: Any) -> list[Any]:
        """The items now deliverable in order (possibly none)."""
        if type(seq) is not int or seq < 0:
            raise JsonRpcError(ErrorCode.STREAM_BROKEN, "Stream broken", f"bad seq {seq!r}")
        if seq == 0 and self.expected > 0 and self.restart_breaks:
            detail = (
                f"the stream started over after {self.expected} chunks (its generator ran "
                "again, its node having stopped): two runs are not joined into one stream"
            )
            raise JsonRpcError(ErrorCode.STREAM_BROKEN, "Stream broken", detail)
        if seq < self.expected or seq in self._ahead:
            self.duplicates += 1
            return []
        if seq > self.expected:
            if len(self._ahead) >= self.window:
                raise JsonRpcError(
                    ErrorCode.STREAM_BROKEN, "Stream broken", f"gap at seq {self.expected}"
                )
            self.out_of_order += 1
            self._ahead[seq] = item
            return []
        ready = [item]
        self.expected += 1
        while self.expected in self._ahead:
            ready.append(self._ahead.pop(self.expected))
            self.expected += 1
        return ready

    def finish(self, count: Any) -> None:
        """Check that exactly ``count`` chunks (0..count-1) arrived."""
        if type(count) is int and count == self.expected and not self._ahead:
            return
        missing = self.expected if type(count) is int and count > self.expected else None
        detail = f"gap at seq {missing}" if missing is not None else f"ended at {count!r}"
        raise JsonRpcError(
            ErrorCode.STREAM_BROKEN, "Stream broken", f"{detail}; got {self.expected}"
        )


class Collected:
    """The items of a response stream gathered into one list, up to ``max_bytes`` of JSON."""

    def __init__(self, max_bytes: int = COLLECT_MAX_BYTES) -> None:
        self.items: list[Any] = []
        self.max_bytes = max_bytes
        self._size = 2  # the brackets

    def add(self, item: Any) -> None:
        """Append ``item``; past the bound raise -32005, telling to read a stream instead."""
        # Measured as JSON; default=repr only sizes what the transport may still refuse.
        self._size += len(orjson.dumps(item, default=repr)) + 1  # and its comma
        if self._size > self.max_bytes:
            detail = (
                f"the result passed the limit of {self.max_bytes} bytes after "
                f"{len(self.items)} chunks; read it as a stream (the client's stream(), "
                "or Accept: text/event-stream at the gateway)"
            )
            raise JsonRpcError(ErrorCode.TOO_LARGE, "Response too large", detail)
        self.items.append(item)


_END = object()


class InboundStream:
    """A caller -> agent stream: the loop puts items, the actor thread iterates.

    Bounded: ``put`` waits (on the loop) while ``limit`` items are unread; the
    reader gives up after ``idle_timeout`` seconds without a chunk. A reader in
    a :class:`~a2a_bus.runtime.fiber.Fiber` parks while there is nothing to read (its
    actor handles other messages meanwhile) and is woken by the next put, the
    end, a failure or the idle timer. Each ``iter()`` reads on from where the
    last reader stopped: items read are not kept, so a handler that crashed
    after reading cannot be given them again.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, limit: int = 1024, idle_timeout: float = 60.0
    ) -> None:
        self.receiver = SeqReceiver()
        self.idle_timeout = idle_timeout
        self._loop = loop
        self._limit = limit
        self._items: deque[Any] = deque()
        self._ready = threading.Condition()
        self._space = asyncio.Event()
        self._space.set()
        self._error: JsonRpcError | None = None
        #: True once a reader took an item (or the end) out of the stream.
        self.consumed = False
        self._abandoned = False
        self._idle = False
        self._parked: Fiber | None = None
        self._idle_timer: asyncio.TimerHandle | None = None

    def unreplayable(self) -> str | None:
        """Why a new reader would not see the stream from its start, or None."""
        if self.consumed:
            return "its input stream was partly read, and read chunks are not kept for a replay"
        return None

    def abandon(self) -> None:
        """No reader will come (the handler finished): drop what is held and what comes."""
        self._abandoned = True
        with self._ready:
            self._items.clear()
        self._space.set()  # wakes a put waiting for room

    async def put(self, seq: Any, item: Any) -> None:
        try:
            ready = self.receiver.accept(seq, item)
        except JsonRpcError as exc:
            self.fail(exc)
            return
        if ready and not self._abandoned:
            await self._space.wait()
            if self._abandoned:
                return
            with self._ready:
                self._items.extend(ready)
                self._idle = False  # the idle timer fired while the reader waited for its turn
                if len(self._items) >= self._limit:
                    self._space.clear()
                self._wake_reader()

    def close(self, count: Any) -> None:
        try:
            self.receiver.finish(count)
        except JsonRpcError as exc:
            self.fail(exc)
            return
        with self._ready:
            self._items.append(_END)
            self._wake_reader()

    def fail(self, error: JsonRpcError) -> None:
        with self._ready:
            if self._error is not None:
                return  # the first failure is the reader's: later ones (a gap) follow from it
            self._error = error
            self._items.append(_END)
            self._wake_reader()

    def _wake_reader(self) -> None:
        """With the lock held, on the loop: there is something for the reader."""
        self._ready.notify()
        fiber, self._parked = self._parked, None
        if fiber is not None:
            if self._idle_timer is not None:
                self._idle_timer.cancel()
                self._idle_timer = None
            fiber.wake()

    def _arm_idle_timer(self, fiber: Fiber) -> None:  # on the loop
        with self._ready:
            if self._parked is not fiber:
                return  # woken already
            if self._idle_timer is not None:
                self._idle_timer.cancel()
            self._idle_timer = self._loop.call_later(self.idle_timeout, self._on_idle, fiber)

    def _on_idle(self, fiber: Fiber) -> None:  # on the loop
        with self._ready:
            if self._parked is fiber:
                self._idle = True
                self._idle_timer = None
                self._wake_reader()

    def _take(self) -> Any:
        """The next item or ``_END``, waiting while there is none."""
        while True:
            with self._ready:
                if self._items:
                    item = self._items.popleft()
                    self.consumed = True
                    if len(self._items) < self._limit // 2:
                        self._loop.call_soon_threadsafe(self._space.set)
                    return item
                if self._idle:
                    detail = f"no chunk for {self.idle_timeout}s"
                    raise JsonRpcError(ErrorCode.STREAM_BROKEN, "Stream broken", detail)
                fiber = Fiber.current()
                if fiber is None:
                    self._idle = not self._ready.wait(self.idle_timeout)
                    continue
                self._parked = fiber
            self._loop.call_soon_threadsafe(self._arm_idle_timer, fiber)
            try:
                fiber.park()
            except FiberAborted:
                with self._ready:
                    if self._parked is fiber:
                        self._parked = None
                raise

    def __iter__(self) -> Iterator[Any]:
        while (item := self._take()) is not _END:
            yield item
        if self._error is not None:
            raise self._error
