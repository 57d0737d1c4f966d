"""The caller's end of an agent -> caller stream: its items in ``seq`` order.

Chunks arrive from the reply topic (:class:`~a2a_bus.core.correlation.Correlator`
puts them); the caller reads them with ``async for``. At most ``limit`` chunks
wait for a reader that fell behind: the next one waits for room, and so does
the reply topic behind it, which every answer to this node shares. So that one
reader cannot hold up the others, the wait is bounded: once the reply topic has
waited :attr:`ReplyStream.grace` seconds in all for a stream's reader, the stream
breaks (the reader gets the chunks it holds, then -32006) and its later chunks
are dropped. The end, an error, or a break (a gap in ``seq``, a generator that
started over) also closes the stream. The stream settles when it closes or its
reader leaves (:meth:`ReplyStream.on_settle`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from a2a_bus.core.streams import SeqReceiver
from a2a_bus.protocol import ErrorCode, JsonRpcError

_END = object()


class ReplyStream:
    """The items of an agent -> caller stream, in ``seq`` order (async iterator).

    Raises :class:`JsonRpcError` when the stream ends with an error, breaks
    (a gap in ``seq``, a generator that started over, a reader that kept ``limit``
    chunks unread for :attr:`grace` seconds in all) or goes quiet for longer than
    its timeout.
    """

    #: Seconds the reply topic waits, in all, for the reader to make room: a reader
    #: that keeps up loses little to a burst now and then; one that stays behind
    #: uses it up.
    grace: float = 5.0

    def __init__(self, limit: int = 1024) -> None:
        # A repeat of seq 0 is a generator run again (its node died mid-stream).
        self.receiver = SeqReceiver(restart_breaks=True)
        self._limit = limit
        #: What the reader has to read: up to ``limit`` chunks, then what closes the
        #: stream (a deque and one waiter: an ``asyncio.Queue`` costs more per chunk).
        self._items: deque[Any] = deque()
        #: Resolved when there is something to read (the reader waits for it).
        self._readable: asyncio.Future[None] | None = None
        self._error: JsonRpcError | None = None
        self._abandoned = False
        self._ended = False
        #: Resolved when the reader makes room for a chunk that waits (or the stream ends).
        self._room: asyncio.Future[None] | None = None
        #: Seconds the reply topic has waited for the reader to make room.
        self._waited = 0.0
        self.chunks = 0
        #: The bus-issued id of the request this stream answers.
        self.request_id: str | None = None
        #: Where a cancel goes: the reply topic of the node running the generator.
        self.control: str | None = None
        self._on_settle: Callable[[JsonRpcError | None], None] | None = None

    @property
    def behind(self) -> bool:
        """The reader has as many chunks as the stream holds: the next one waits for room."""
        return len(self._items) >= self._limit and not self._ended

    async def put(self, seq: Any, item: Any) -> None:
        for ready in self.receiver.accept(seq, item):
            if len(self._items) >= self._limit and not (self._abandoned or self._ended):
                await self._wait_for_room()
            if self._abandoned or self._ended:
                return  # nobody reads it: the reader left, the stream ended or broke
            self._items.append(ready)
            if self._readable is not None:
                self._wake_reader()

    def _wake_reader(self) -> None:
        readable, self._readable = self._readable, None
        if readable is not None and not readable.done():
            readable.set_result(None)

    async def _wait_for_room(self) -> None:
        """Wait while the queue is full, for :attr:`grace` seconds in all; then break."""
        loop = asyncio.get_running_loop()
        while len(self._items) >= self._limit and not (self._abandoned or self._ended):
            left = self.grace - self._waited
            if left <= 0:
                detail = (
                    f"the reader kept {self._limit} chunks unread for {self.grace}s in all; "
                    "waiting longer would hold up every answer to its node"
                )
                # Not raised: the request stays pending, so that closing the stream
                # (once the reader gets here) cancels the generator.
                self.fail(JsonRpcError(ErrorCode.STREAM_BROKEN, "Stream broken", detail))
                return
            started = loop.time()
            room = self._room = loop.create_future()
            timer = loop.call_later(left, self._make_room)
            try:
                await room
            finally:
                timer.cancel()
                self._waited += loop.time() - started

    def _make_room(self) -> None:
        """Wake the chunk that waits for room (there is room, or it is not needed)."""
        room, self._room = self._room, None
        if room is not None and not room.done():
            room.set_result(None)

    def on_settle(self, callback: Callable[[JsonRpcError | None], None]) -> None:
        """Call ``callback`` once, when the stream settles: it ends or fails (with
        its error, if any), or its reader leaves (None); at once if it already did."""
        if self._ended or self._abandoned:
            callback(self._error)
        else:
            self._on_settle = callback

    def _settle(self) -> None:
        # Cleared first: a stream that broke settles then, not again when its reader leaves.
        callback, self._on_settle = self._on_settle, None
        if callback is not None:
            callback(self._error)

    def abandon(self) -> None:
        """The reader left: drop what is queued and what still comes."""
        self._abandoned = True
        self._items.clear()
        self._make_room()
        self._settle()

    def end(self, count: Any, response: Any) -> None:
        """Close with the end marker (or a plain response: one item or an error)."""
        if self._ended or self._abandoned:
            return  # broken before its end came (the break is what the reader gets), or unread
        try:
            if isinstance(response, dict) and "error" in response:
                raise JsonRpcError.from_dict(response["error"])
            if count is None:  # answered without streaming: the result is the one item
                if isinstance(response, dict):
                    self._close(response.get("result"))
                    return
            else:
                self.receiver.finish(count)
        except JsonRpcError as exc:
            self._error = exc
        self._close()

    def fail(self, error: JsonRpcError) -> None:
        """End with ``error`` after the chunks already queued (the first failure wins)."""
        if self._ended or self._abandoned:
            return
        self._error = error
        self._close()

    def _close(self, *last: Any) -> None:
        # After the chunks the reader holds, whatever their number.
        self._items.extend((*last, _END))
        self._ended = True
        self._wake_reader()
        self._make_room()  # a chunk still waiting comes after the end: never read
        self._settle()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._read()

    async def _read(self) -> AsyncIterator[Any]:
        items = self._items
        while True:
            while not items:
                readable = self._readable = asyncio.get_running_loop().create_future()
                await readable
            item = items.popleft()
            if self._room is not None:
                self._make_room()
            if item is _END:
                if self._error is not None:
                    raise self._error
                return
            self.chunks += 1
            yield item
