"""The caller -> agent streams open on one agent host, by session.

The first chunk of a session starts the handler (a job that parks while it
waits for chunks, see :mod:`a2a_bus.runtime.fiber`), or refuses the stream: params
that do not bind, or a replica that already has ``max_open_streams`` open.
Later chunks feed the handler's :class:`~a2a_bus.core.streams.InboundStream`; the
end marker closes it and is answered with the handler's outcome; an abort
breaks it. A session whose handler ended is remembered until its end arrives,
or for :attr:`InboundStreams.linger` seconds. A stream is its session id and
method: two methods' streams under one session id are two streams. Once a
stream whose handler ran is over, its session id is remembered (the last
:attr:`InboundStreams.remember` or more): a part sent again (a retried chunk or
end) is refused rather than starting the handler on it anew.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, NamedTuple

from a2a_bus.core.streams import (
    ABORT_PARAM,
    CHUNK_PARAM,
    END_PARAM,
    STREAM_PARAMS,
    Collected,
    InboundStream,
)
from a2a_bus.hosting.actor import Job, Outcome
from a2a_bus.hosting.agent import Agent, MethodSpec
from a2a_bus.hosting.supervisor import Replica
from a2a_bus.protocol import ErrorCode, JsonRpcError, ext
from a2a_bus.transport.base import Delivery

log = logging.getLogger(__name__)

#: Answers the end marker (a request) with the handler's outcome.
Answer = Callable[[Delivery, dict[str, Any], Outcome], Awaitable[None]]
#: A stream's session id and method.
_Key = tuple[str, str]


class _Session(NamedTuple):
    """One caller -> agent stream on this host."""

    stream: InboundStream
    #: The handler's outcome (or the refusal's, already there).
    running: asyncio.Future[Outcome]
    #: The handler was started (not refused): its stream may not run again.
    started: bool


class InboundStreams:
    """Sessions of one agent class's caller -> agent streams."""

    #: Seconds a stream is remembered after its handler ended, for its end.
    linger: float = 600.0
    #: Streams that are over, remembered at least (two generations of this many).
    remember: int = 10_000

    def __init__(self, agent_cls: type[Agent], answer: Answer) -> None:
        self._agent_cls = agent_cls
        self._answer = answer
        self._sessions: dict[_Key, _Session] = {}
        #: When a session whose handler ended is forgotten, if its end never comes.
        self._forget: dict[_Key, asyncio.TimerHandle] = {}
        #: Streams whose handler has not ended, per replica.
        self._open: dict[Replica, int] = {}
        # Streams over, in two generations of plain sets, as the correlator keeps
        # settled requests: the newer fills up to ``remember``, then replaces the older.
        self._over: set[_Key] = set()
        self._over_before: set[_Key] = set()

    def __contains__(self, session: object) -> bool:
        """A stream of session id ``session`` is open or remembered for its end."""
        return any(key[0] == session for key in self._sessions)

    def fail_all(self, error: JsonRpcError) -> None:
        """Break every open stream (the agent stops: no more chunks come here)."""
        for entry in self._sessions.values():
            entry.stream.fail(error)

    async def on_chunk(
        self, replica: Replica, delivery: Delivery, spec: MethodSpec, message: dict[str, Any]
    ) -> None:
        """One chunk, the end marker, or an abort of a caller -> agent stream."""
        key = (session_of(delivery), spec.name)
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        entry = self._sessions.get(key)
        seq = delivery.event.get_extension(ext.SEQ)
        if params.get(ABORT_PARAM):
            if entry is not None:
                gone = f"the caller abandoned the stream after {seq} chunks"
                entry.stream.fail(JsonRpcError(ErrorCode.STREAM_BROKEN, "Stream broken", gone))
                outcome = await entry.running
                self._drop(key)
            else:  # it never started here: nothing to end
                nothing = JsonRpcError(ErrorCode.STREAM_BROKEN, "Stream broken", "no such stream")
                outcome = Outcome(error=nothing)
            if "id" in message:  # an abort sent as a request is answered all the same
                await self._answer(delivery, message, outcome)
            return
        if "id" in message and not params.get(END_PARAM):
            # Answered, not fed: the stream then breaks at its end with the gap.
            detail = "a chunk of a stream is a notification: send it without an id"
            refused = JsonRpcError(ErrorCode.INVALID_REQUEST, "Invalid Request", detail)
            await self._answer(delivery, message, Outcome(error=refused))
            return
        if entry is None:
            if key in self._over or key in self._over_before:
                await self._refuse_part(delivery, message, key, seq)
                return
            entry = self._sessions[key] = self._open_session(replica, spec, delivery, params)
            entry.running.add_done_callback(functools.partial(self._linger, key, entry))
        stream, running = entry.stream, entry.running
        if params.get(END_PARAM):
            stream.close(seq)
            outcome = await running
            self._drop(key)
            await self._answer(delivery, message, outcome)
        elif not running.done():
            item = params.get(CHUNK_PARAM)
            misfit = spec.binder.chunk_refusal(item, seq) if isinstance(seq, int) else None
            if misfit is not None:  # the handler reads what came before, then this error
                stream.fail(misfit)
                return
            await stream.put(seq, item)

    async def _refuse_part(
        self, delivery: Delivery, message: dict[str, Any], key: _Key, seq: Any
    ) -> None:
        """A chunk or end of a stream that is over: its handler is not run again."""
        session, method = key
        if "id" not in message:  # a chunk sent again: nobody to answer
            log.info("dropped part %s of stream %s of %s: the stream is over", seq, session, method)
            return
        detail = (
            f"the stream {session!r} of {method} is over (its end was answered, or its "
            "handler ended long ago): send each stream with a session id of its own"
        )
        refused = JsonRpcError(ErrorCode.INVALID_REQUEST, "Invalid Request", detail)
        await self._answer(delivery, message, Outcome(error=refused))

    def _linger(self, key: _Key, entry: _Session, _: object) -> None:
        if self._sessions.get(key) is entry:
            loop = asyncio.get_running_loop()
            self._forget[key] = loop.call_later(self.linger, self._drop, key)

    def _drop(self, key: _Key) -> None:
        """Forget stream ``key``: its end was answered, or never came."""
        entry = self._sessions.pop(key, None)
        timer = self._forget.pop(key, None)
        if timer is not None:
            timer.cancel()
        if entry is not None and entry.started:  # a refused stream may be sent again
            over = self._over
            over.add(key)
            if len(over) >= self.remember:
                self._over_before, self._over = over, set()

    def _open_session(
        self, replica: Replica, spec: MethodSpec, delivery: Delivery, params: dict[str, Any]
    ) -> _Session:
        """Start the handler of a new stream (or its refusal)."""
        loop = asyncio.get_running_loop()
        stream = InboundStream(loop)
        others = {k: v for k, v in params.items() if k not in STREAM_PARAMS}
        open_here = self._open.get(replica, 0)
        try:
            if open_here >= self._agent_cls.max_open_streams:
                # Held back, its chunks would wait for room behind streams that
                # wait for their own chunks: refused at once instead.
                detail = (
                    f"{replica.name} has {open_here} open streams (max_open_streams); "
                    "send the stream again later"
                )
                raise JsonRpcError(ErrorCode.BUSY, "Agent busy", detail)
            bound = spec.binder.bind(others, stream=stream)
        except JsonRpcError as exc:
            refused: asyncio.Future[Outcome] = loop.create_future()
            refused.set_result(Outcome(error=exc))
            return _Session(stream, refused, started=False)
        call = spec.binder.call(spec.attribute, bound)
        if spec.streams_out:  # a generator answers the end with its items, as a request does
            call = functools.partial(_collected, call)
        # Chunks are not kept once read (the stream is bounded), so a crash
        # after the handler read any is final rather than retried.
        job = Job(
            call,
            label=f"{spec.name} stream {session_of(delivery)}",
            event=delivery.event,
            redelivered=delivery.redelivered,
            unretryable=stream.unreplayable,
            parks=True,
        )
        self._open[replica] = open_here + 1
        task = asyncio.ensure_future(replica.submit(job))

        def ended(_: object) -> None:
            # A handler that finished (or died) takes no more chunks: nothing waits for room.
            stream.abandon()
            self._open[replica] -= 1

        task.add_done_callback(ended)
        return _Session(stream, task, started=True)


def _collected(call: Callable[[Agent], Iterator[Any]], agent: Agent) -> list[Any]:
    """The items of a generator handler, gathered (at most 1 MiB of JSON, else -32005)."""
    items = Collected()
    for item in call(agent):
        items.add(item)
    return items.items


def is_stream_part(message: dict[str, Any]) -> bool:
    """True for a chunk, end or abort of a caller -> agent stream (by its params)."""
    params = message.get("params")
    return isinstance(params, dict) and any(name in params for name in STREAM_PARAMS)


def session_of(delivery: Delivery) -> str:
    """The caller -> agent stream a delivered chunk belongs to."""
    return str(delivery.event.get_extension(ext.SESSION))


__all__ = ["InboundStreams", "is_stream_part"]
