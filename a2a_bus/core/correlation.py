"""The caller side of request/response: pending requests, deadlines, late replies.

Every request leaves with an event id unique within the bus and the caller's
reply topic in ``replyto``; the answer carries that id in ``collaborationid``.
A request is answered at most once: the first response resolves it and any
later one is dropped and counted (``duplicate_replies``); a response after the
deadline is dropped and counted (``late_replies``), never handed to anyone.

A stream's deadline is per chunk: it bounds the caller's wait for the next one,
and does not run while chunks wait for a reader that fell behind (at most 1,024
wait on this node, and the reply topic waits for them no more than the stream's
``grace``: see :mod:`~a2a_bus.core.reply_stream`). A stream that breaks (a gap, a
generator that started over) cancels its generator.

A caller that stops reading a stream cancels it: the request is forgotten and
``stream/cancel`` goes to the node running the generator (the ``streamcontrol``
of its chunks; if no chunk came yet, the cancel leaves with the first one).

A plain request (not a stream) answered by a stream — a generator handler
called with ``request`` — gets the items in one list, as the gateway answers it
without SSE: the chunks are put in ``seq`` order and gathered (at most
``collect_max_bytes`` of JSON, else -32005), the deadline is per chunk as for
streams, and a caller that gives up cancels the generator.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from typing import Any

from a2a_bus.core.deadlines import Deadlines
from a2a_bus.core.metrics import Metrics
from a2a_bus.core.reply_stream import ReplyStream
from a2a_bus.core.streams import (
    COLLECT_MAX_BYTES,
    STREAM_CONTROL,
    STREAM_END,
    Collected,
    SeqReceiver,
)
from a2a_bus.core.timeouts import deadline, timeout_response
from a2a_bus.protocol import ErrorCode, JsonRpcError, error_response, ext
from a2a_bus.transport.base import Delivery

log = logging.getLogger(__name__)

_EXPIRED = "expired"
_ANSWERED = "answered"
#: A cancelled stream whose generator's node is not known yet.
_CANCEL_UNSENT = "cancel-unsent"
#: Why requests still pending when the bus stops are answered -32002.
STOPPED = "the bus stopped"


class _Gathering:
    """The chunks answering a plain request, in ``seq`` order, into one list."""

    __slots__ = ("collected", "control", "receiver")

    def __init__(self, max_bytes: int, control: Any) -> None:
        self.collected = Collected(max_bytes)
        # A repeat of seq 0 is a generator run again (its node died mid-stream).
        self.receiver = SeqReceiver(restart_breaks=True)
        self.control = control


class _Pending:
    __slots__ = ("deadline", "future", "gathering", "stream", "timeout", "tracked")

    def __init__(
        self,
        future: asyncio.Future[dict[str, Any]] | None,
        stream: ReplyStream | None,
        timeout: float,
        deadline: float,
    ) -> None:
        self.future = future
        self.stream = stream
        self.timeout = timeout
        #: The loop time it expires at (inf while a stream's chunk waits for its reader).
        self.deadline = deadline
        #: When its entry in the heap of deadlines is due (inf: none; see core.deadlines).
        self.tracked = deadline
        #: Set when a stream answers a plain request (``future``).
        self.gathering: _Gathering | None = None

    @property
    def control(self) -> Any:
        """Where a cancel for the stream answering this request goes, if known."""
        if self.stream is not None:
            return self.stream.control
        return self.gathering.control if self.gathering is not None else None


class Correlator:
    """Matches responses to pending requests by ``collaborationid``.

    ``stop_upstream(request_id, control)`` is called (on the loop) when a stream
    the caller abandoned should be cancelled at the node reached by ``control``.
    """

    def __init__(
        self,
        metrics: Metrics,
        *,
        remember: int = 10_000,
        stop_upstream: Callable[[str, str], None] | None = None,
        collect_max_bytes: int = COLLECT_MAX_BYTES,
    ) -> None:
        self._metrics = metrics
        self.collect_max_bytes = collect_max_bytes
        self._pending: dict[str, _Pending] = {}
        # How settled requests ended, in two generations of plain dicts: the newer
        # fills up to ``remember`` and then replaces the older, so at least the
        # last ``remember`` are known (an ordered dict's upkeep costs more per request).
        self._finished: dict[str, str] = {}
        self._finished_before: dict[str, str] = {}
        self._remember = max(1, remember)
        self.stop_upstream = stop_upstream
        self._deadlines = Deadlines(self._tracked, self._due)
        #: Set by :meth:`drain`: the bus is stopping.
        self._draining = False
        #: The loop of the pending requests (the bus loop), until :meth:`close`.
        self._loop: asyncio.AbstractEventLoop | None = None

    def __len__(self) -> int:
        return len(self._pending)

    def expect(self, request_id: str, timeout: float) -> asyncio.Future[dict[str, Any]]:
        """A future resolved with the response message, or a timeout error response."""
        loop = self._loop or self._use_loop()
        future = loop.create_future()
        self._add(request_id, _Pending(future, None, timeout, deadline(loop, timeout)), loop)
        return future

    def expect_stream(self, request_id: str, timeout: float) -> ReplyStream:
        """A stream of items; ``timeout`` bounds the wait for each chunk."""
        loop = self._loop or self._use_loop()
        stream = ReplyStream()
        self._add(request_id, _Pending(None, stream, timeout, deadline(loop, timeout)), loop)
        return stream

    def _use_loop(self) -> asyncio.AbstractEventLoop:
        """The running loop, kept until :meth:`close` (asking asyncio for it each
        time costs a system call, getpid)."""
        self._loop = asyncio.get_running_loop()
        return self._loop

    def _add(self, request_id: str, pending: _Pending, loop: asyncio.AbstractEventLoop) -> None:
        """Track ``pending`` until its ``deadline`` (set by the caller)."""
        pendings = self._pending
        if request_id in pendings:
            raise ValueError(f"request id {request_id!r} is already pending")
        pendings[request_id] = pending
        self._metrics.in_flight += 1
        self._deadlines.track(request_id, pending.deadline, loop)

    def _set_deadline(
        self, request_id: str, pending: _Pending, loop: asyncio.AbstractEventLoop
    ) -> None:
        """Restart ``pending``'s deadline from now (a stream's chunk arrived); an entry
        due earlier stays, and the sweep follows the deadline then: not one per chunk."""
        when = pending.deadline = loop.time() + pending.timeout
        if pending.tracked > when:
            pending.tracked = when
            self._deadlines.track(request_id, when, loop)

    def _tracked(self, request_id: str) -> float | None:
        pending = self._pending.get(request_id)
        return None if pending is None else pending.tracked

    def _due(self, request_id: str, now: float) -> float:
        """Expire the request if its deadline passed; else when it is due now."""
        pending = self._pending[request_id]
        if pending.deadline <= now:
            self._expire(request_id)
            return math.inf
        pending.tracked = pending.deadline  # inf: none, until its next chunk
        return pending.deadline

    def cancel(self, request_id: str) -> None:
        """Forget a request whose caller gave up (a later reply counts as late);
        a stream is also cancelled upstream."""
        pending = self._pending.get(request_id)
        if pending is not None:
            self._settle(request_id, pending, _EXPIRED)
            if pending.stream is not None:
                pending.stream.abandon()
            # Also for a plain request: a stream may be answering it (or start to).
            self._cancel_upstream(request_id, pending.control)

    def _cancel_upstream(self, request_id: str, control: Any) -> None:
        if self.stop_upstream is None:
            return
        if isinstance(control, str):
            self.stop_upstream(request_id, control)
        else:  # no chunk yet: cancel when the first one says where from
            self._finished[request_id] = _CANCEL_UNSENT

    def _settle(self, request_id: str, pending: _Pending, how: str) -> None:
        del self._pending[request_id]
        self._metrics.in_flight -= 1
        finished = self._finished
        finished[request_id] = how
        if len(finished) >= self._remember:
            self._finished_before, self._finished = finished, {}

    def _how(self, request_id: str) -> str | None:
        """How a settled request ended, if it is still remembered."""
        how = self._finished.get(request_id)
        return how if how is not None else self._finished_before.get(request_id)

    def _expire(self, request_id: str) -> None:
        pending = self._pending.get(request_id)
        if pending is None:
            return
        self._settle(request_id, pending, _EXPIRED)
        self._metrics.errors += 1
        response = timeout_response(pending.timeout)
        if pending.future is not None and not pending.future.done():
            pending.future.set_result(response)
        if pending.stream is not None:
            pending.stream.fail(JsonRpcError.from_dict(response["error"]))
        self._cancel_upstream(request_id, pending.control)

    def unsent(self, request_id: str, sent: asyncio.Future[None]) -> None:
        """The write of request ``request_id`` ended (``sent``): if it failed while
        the request still waits, its caller gets the error now."""
        error = asyncio.CancelledError() if sent.cancelled() else sent.exception()
        if error is None:
            return
        pending = self._pending.get(request_id)
        if pending is not None and pending.future is not None and not pending.future.done():
            pending.future.set_exception(error)

    def answer(self, request_id: str, message: dict[str, Any]) -> None:
        """Resolve request ``request_id`` with a JSON-RPC response (its ``result`` or
        ``error``): what a reply does, for answers made in this process."""
        pending = self._pending.get(request_id)
        if pending is None:
            self._count_stray(request_id)
            return
        self._settle(request_id, pending, _ANSWERED)
        if "error" in message:
            self._metrics.errors += 1
        future = pending.future
        if future is not None:
            if not future.done():
                future.set_result(message)
        elif pending.stream is not None:  # answered without streaming
            pending.stream.end(None, message)

    async def on_reply(self, delivery: Delivery) -> None:
        """Handler of the caller's reply topic."""
        event = delivery.event
        attributes = event.get_attributes()
        request_id: Any = attributes.get(ext.COLLABORATION)
        pending = self._pending.get(request_id) if isinstance(request_id, str) else None
        if pending is None:
            self._count_stray(request_id, attributes.get(STREAM_CONTROL))
            return
        message = event.get_data()
        seq = attributes.get(ext.SEQ)
        stream = pending.stream
        if stream is None:
            if seq is None:
                self.answer(request_id, message if isinstance(message, dict) else {})
            else:  # a stream answers a plain request
                self._gather(request_id, pending, event, seq, message)
            return
        if stream.control is None:
            stream.control = attributes.get(STREAM_CONTROL)
        if seq is None or attributes.get(STREAM_END):
            self._settle(request_id, pending, _ANSWERED)
            stream.end(seq, message)
            return
        if self._draining and stream.behind:
            self._stop_behind(request_id, pending)  # waiting for its reader would hold up the stop
            return
        # For streams the deadline is per chunk: it bounds the caller's wait for one,
        # so it does not run while this chunk waits for the reader to make room.
        pending.deadline = math.inf
        result = message.get("result") if isinstance(message, dict) else message
        receiver = stream.receiver
        duplicates, early = receiver.duplicates, receiver.out_of_order
        try:
            await stream.put(seq, result)
        except JsonRpcError as exc:  # a gap, a generator that started over
            self._settle(request_id, pending, _ANSWERED)
            stream.fail(exc)
            # Nobody reads what it sends from now on: stop the generator that sent this
            # chunk (a run started over runs on another node); the rest counts as late.
            self._finished[request_id] = _EXPIRED
            control = attributes.get(STREAM_CONTROL)
            self._cancel_upstream(request_id, control if control is not None else stream.control)
        if self._pending.get(request_id) is pending:
            self._set_deadline(request_id, pending, self._loop or self._use_loop())
        if receiver.duplicates > duplicates:
            self._metrics.stream_duplicates += 1
        if receiver.out_of_order > early:
            self._metrics.stream_gaps += 1

    def _gather(
        self, request_id: str, pending: _Pending, event: Any, seq: Any, message: Any
    ) -> None:
        """One chunk (or the end) of a stream answering a plain request."""
        gathering = pending.gathering
        if gathering is None:
            control = event.get_extension(STREAM_CONTROL)
            gathering = pending.gathering = _Gathering(self.collect_max_bytes, control)
        end = bool(event.get_extension(STREAM_END))
        try:
            if end:
                if isinstance(message, dict) and "error" in message:
                    self.answer(request_id, message)
                    return
                gathering.receiver.finish(seq)
                self.answer(request_id, {"result": gathering.collected.items})
                return
            self._set_deadline(request_id, pending, self._loop or self._use_loop())
            item = message.get("result") if isinstance(message, dict) else message
            receiver = gathering.receiver
            duplicates, early = receiver.duplicates, receiver.out_of_order
            for ready in receiver.accept(seq, item):
                gathering.collected.add(ready)
            if receiver.duplicates > duplicates:
                self._metrics.stream_duplicates += 1
            if receiver.out_of_order > early:
                self._metrics.stream_gaps += 1
        except JsonRpcError as exc:  # a gap, or too much to gather
            self.answer(request_id, {"error": exc.to_dict()})
            if not end:  # stop the generator; what it sent meanwhile counts as late
                self._finished[request_id] = _EXPIRED
                control = event.get_extension(STREAM_CONTROL)
                self._cancel_upstream(
                    request_id, control if control is not None else gathering.control
                )

    def _count_stray(self, request_id: Any, control: Any = None) -> None:
        how = self._how(request_id) if isinstance(request_id, str) else None
        if how == _CANCEL_UNSENT and isinstance(control, str):
            self._finished[request_id] = _EXPIRED
            self._cancel_upstream(request_id, control)
        if how == _ANSWERED:
            self._metrics.duplicate_replies += 1
            log.debug("dropped a second reply to %s", request_id)
        else:
            self._metrics.late_replies += 1
            log.info("dropped a late or unknown reply to %s", request_id)

    def drain(self) -> None:
        """The reply topic is stopping, and waits for its handlers. A stream whose
        next chunk would wait for its reader (now, or when it comes) ends now, as
        at :meth:`close`; the other answers still arrive."""
        self._draining = True
        for request_id, pending in list(self._pending.items()):
            if pending.stream is not None and pending.stream.behind:
                self._stop_behind(request_id, pending)

    def _stop_behind(self, request_id: str, pending: _Pending) -> None:
        """End a stream whose reader is behind, as the bus stops; and its generator."""
        self._stopped(request_id, pending)
        self._cancel_upstream(request_id, pending.control)

    def close(self, reason: str = STOPPED) -> None:
        """Answer every pending request with an error (used at shutdown)."""
        self._deadlines.clear()
        self._draining = False  # a bus may be started again
        self._loop = None  # on another loop, maybe
        for request_id, pending in list(self._pending.items()):
            self._stopped(request_id, pending, reason)

    def _stopped(self, request_id: str, pending: _Pending, reason: str = STOPPED) -> None:
        """End a pending request with -32002 ``reason``."""
        self._settle(request_id, pending, _EXPIRED)
        response = error_response(ErrorCode.AGENT_UNAVAILABLE, reason)
        if pending.future is not None and not pending.future.done():
            pending.future.set_result(response)
        if pending.stream is not None:
            pending.stream.fail(JsonRpcError.from_dict(response["error"]))
