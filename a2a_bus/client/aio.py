"""The async client: what Python callers and the doors' JSON-RPC use on the bus loop.

``request``/``notify``/``publish``/``stream``/``stream_to``/``batch`` for
Python callers, ``read`` to page through a subject's retained events;
``call``/``call_event``/``call_stream`` for code that holds an already parsed
JSON-RPC message (or event) and wants JSON-RPC back: those go through the
bus's :class:`~a2a_bus.core.service.JsonRpcService`, as every front door does.

Every message a client sends while a handler runs (or a door serves a request)
continues it (:data:`~a2a_bus.runtime.tracing.ORIGIN`): its trace, and from a
handler one call deeper, the handler's agent added to ``callchain``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Iterable,
    Sequence,
)
from typing import Any

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.client.calls import Call, EventPage, check_calls
from a2a_bus.client.outgoing import OutgoingStream
from a2a_bus.core.dispatch import Dispatcher
from a2a_bus.core.payload import envelope_refusal, refusal
from a2a_bus.core.reply_stream import ReplyStream
from a2a_bus.core.routing import RoutingError, is_wildcard, validate_name, validate_subject
from a2a_bus.core.service import JsonRpcService, Reply
from a2a_bus.core.timeouts import check_timeout
from a2a_bus.protocol import (
    ErrorCode,
    Failure,
    JsonRpcError,
    classify_call,
    control_character,
    ext,
    extension_problem,
    new_event,
)
from a2a_bus.runtime.portal import BusStopped, Portal
from a2a_bus.runtime.tracing import ORIGIN, continue_origin, one_trace
from a2a_bus.transport.positions import encode_cursor, parse_cursor

#: Characters of method name and agent id below which the envelope of a message
#: made here needs no measuring: the rest of it is the bus's own (its source and
#: prefix, a counter id, fixed names), and even at 6 bytes of JSON per character,
#: written three times (``type``, ``a2amethod``, the message), this stays far
#: below MAX_ENVELOPE_BYTES. Measuring costs ~0.8 us, on every request.
_OWN_ENVELOPE_CHARS = 512


def _check_envelope(event: CloudEvent) -> None:
    """Refuse ``event`` unless every transport carries its attributes (see
    :mod:`a2a_bus.core.payload`): -32005 when they are too large; nothing is sent."""
    error = envelope_refusal(event)
    if error is not None:
        raise error


def _unwrap(response: dict[str, Any] | None) -> Any:
    if response is None:
        return None
    if "error" in response:
        raise JsonRpcError.from_dict(response["error"])
    return response.get("result")


class AsyncClient:
    """Async API of a bus; works from the bus loop or from any other loop."""

    def __init__(self, dispatcher: Dispatcher, service: JsonRpcService, portal: Portal) -> None:
        self._dispatcher = dispatcher
        self._service = service
        self._portal = portal
        self._context = dispatcher.context
        self._ids = itertools.count(1)

    def _event(self, agent: str | None, method: str, params: Any, *, request: bool) -> CloudEvent:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            # Checked here, once: the in-memory transport would carry anything, Kafka not.
            error = refusal(params, "params")
            if error is not None:
                raise error
            message["params"] = params
        if request:
            message["id"] = next(self._ids)
        # One call, made here (an object, "2.0", a counter id): only a call's own
        # checks apply, and it is mapped directly (no batch handling).
        kind = classify_call(message)
        if isinstance(kind, Failure):
            raise JsonRpcError(kind.code, kind.message, kind.data)
        item = self._context.adaptor.event_from_message(message, kind)
        if isinstance(item, Failure):
            raise JsonRpcError(item.code, item.message, item.data)
        if agent is not None:
            if type(agent) is not str:  # a string's own checks come with its route
                try:
                    validate_name(agent)
                except RoutingError as exc:
                    raise exc.json_rpc_error() from None
            item.get_attributes()[ext.TARGET_AGENT] = agent
        origin = ORIGIN.get()
        if origin is not None:  # sent by a handler (or for a door's request): continue it
            continue_origin(origin, item.get_attributes())
        if len(method) + (len(agent) if agent is not None else 0) > _OWN_ENVELOPE_CHARS:
            _check_envelope(item)
        return item

    async def request(
        self, agent: str | None, method: str, params: Any = None, *, timeout: float | None = None
    ) -> Any:
        """Call ``method`` (on ``agent``, or on whichever agent declares it); return the
        result or raise :class:`JsonRpcError`.

        A streaming (generator) method's result is the list of all its items (at
        most 1 MiB of JSON, else -32005): use :meth:`stream` to read them as they come.
        """
        event = self._event(agent, method, params, request=True)
        sent = self._dispatcher.send(event, timeout=timeout, fresh=True)
        return _unwrap(await self._portal.on_loop(sent))

    async def notify(self, agent: str | None, method: str, params: Any = None) -> None:
        """Send a notification (no response)."""
        await self._send(self._event(agent, method, params, request=False))

    async def publish(
        self, subject: str, data: Any = None, *, type: str | None = None, **extensions: Any
    ) -> str:
        """Publish an event on ``subject`` (one write, every subscriber gets it); its id.

        An invalid subject raises :class:`JsonRpcError` (-32600), data that is not
        JSON (nor bytes) -32602, more than a message may carry -32005; nothing is sent.
        """
        try:
            validate_subject(subject)
        except RoutingError as exc:
            raise exc.json_rpc_error() from None
        error = refusal(data, "data", binary=True)
        if error is not None:
            raise error
        if type is not None and (not isinstance(type, str) or not type):
            detail = f"type must be a non-empty string, not {type!r:.60}"
            raise JsonRpcError(ErrorCode.INVALID_REQUEST, "Invalid Request", detail)
        for name, value in extensions.items():
            problem = extension_problem(name, value)
            if problem is not None:
                raise JsonRpcError(ErrorCode.INVALID_REQUEST, "Invalid Request", problem)
        attributes: dict[str, Any] = {
            "source": self._context.source,
            "type": type or f"{self._context.adaptor.prefix}.{subject}",
            "subject": subject,
            "datacontenttype": "application/json",
            **extensions,
        }
        problem = control_character(attributes)  # the rule of every door from outside
        if problem is not None:
            raise JsonRpcError(ErrorCode.INVALID_REQUEST, "Invalid Request", problem)
        origin = ORIGIN.get()
        if origin is not None:
            continue_origin(origin, attributes)
        event = new_event(attributes, data)
        _check_envelope(event)
        await self._send(event)
        return event.get_id()

    async def read(
        self, subject: str, *, limit: int = 100, cursor: str | None = None, newest: bool = False
    ) -> EventPage:
        """Events retained on ``subject``, oldest first, at most ``limit`` (1..1000).

        Pass the page's ``cursor`` to go on after it (an empty page: nothing more
        yet); ``newest`` gives the last ``limit`` events instead, with a cursor for
        what comes after them. Reading joins no consumer group and changes no
        subscriber's progress. A wildcard or invalid subject raises
        :class:`~a2a_bus.core.routing.RoutingError`, a bad limit or cursor ValueError
        (RoutingError is one too).
        """
        if isinstance(subject, str) and is_wildcard(subject):
            raise RoutingError(
                ErrorCode.INVALID_REQUEST,
                f"cannot read {subject!r}: wildcards select subjects to subscribe to; "
                "read one subject at a time",
            )
        if not self._dispatcher.running:  # else the transport's own "not started"
            raise BusStopped()
        context = self._context
        topic = context.topics.subject(subject)
        position = None if cursor is None else parse_cursor(topic, cursor)
        batch = await self._portal.on_loop(
            context.transport.read(topic, limit=limit, position=position, newest=newest)
        )
        return EventPage(batch.events, encode_cursor(topic, batch.position), batch.undecodable)

    async def publish_event(self, event: CloudEvent) -> None:
        """Route a ready CloudEvent (its ``subject``/``targetagent`` decide where)."""
        await self.call_event(event)

    async def call_event(
        self, event: CloudEvent, *, timeout: float | None = None
    ) -> dict[str, Any] | None:
        """Route one event; a request's JSON-RPC response (caller's id), else None.

        Data that no transport carries (see :mod:`a2a_bus.core.payload`) is refused:
        a request is answered with the error, anything else raises it.
        """
        reply = await self._answer(event, timeout)
        if reply.response is None and reply.refused is not None:
            raise reply.refused
        return reply.response

    def _answer(self, item: CloudEvent | Failure, timeout: float | None) -> Awaitable[Reply]:
        if timeout is not None:
            # Checked here: the correlator's ValueError would be the service's -32603.
            check_timeout(timeout)
        origin = ORIGIN.get()
        if origin is not None and not isinstance(item, Failure):
            continue_origin(origin, item.get_attributes())
        return self._portal.on_loop(self._service.answer(item, timeout=timeout))

    async def _send(self, event: CloudEvent, timeout: float | None = None) -> dict[str, Any] | None:
        return await self._portal.on_loop(self._dispatcher.send(event, timeout=timeout))

    async def call(
        self, message: Any, *, timeout: float | None = None
    ) -> dict[str, Any] | list[dict[str, Any]] | None:
        """A parsed JSON-RPC message or batch in, the JSON-RPC response(s) out
        (None when nothing is to be answered, as for notifications)."""
        items = self._context.adaptor.from_json(message)
        batch = isinstance(message, list)
        replies = await asyncio.gather(*(self._answer(item, timeout) for item in items))
        if batch:
            # A refused notification has nobody to answer in a batch (the service
            # logged it), and the neighbours' answers must not be lost.
            responses = [r.response for r in replies if r.response is not None]
            return responses or None
        [reply] = replies
        if reply.response is None and reply.refused is not None:
            raise reply.refused
        return reply.response

    async def batch(self, calls: Sequence[Call], *, timeout: float | None = None) -> list[Any]:
        """Send several requests at once; each result, or the :class:`JsonRpcError`."""
        check_calls(calls)
        events = [self._event(c.agent, c.method, c.params, request=True) for c in calls]
        responses = await asyncio.gather(*(self._send(e, timeout) for e in events))
        results: list[Any] = []
        for response in responses:
            try:
                results.append(_unwrap(response))
            except JsonRpcError as exc:
                results.append(exc)
        return results

    async def stream(
        self, agent: str | None, method: str, params: Any = None, *, timeout: float | None = None
    ) -> AsyncGenerator[Any, None]:
        """The items a streaming handler yields, in order (timeout: per chunk)."""
        event = self._event(agent, method, params, request=True)
        items = await self._open_stream(event, timeout)
        try:
            async for item in items:
                yield item
        finally:  # closing this stream closes the request's, now: the cancel goes out
            items.close()

    async def call_stream(
        self, message: dict[str, Any], *, timeout: float | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """JSON-RPC form of :meth:`stream`: one JSON-RPC response per chunk; a failure
        ends the stream with an error response."""
        item = self._context.adaptor.from_json(message)[0]
        if isinstance(item, Failure):
            yield item.response()
            return
        origin = ORIGIN.get()
        if origin is not None:
            continue_origin(origin, item.get_attributes())
        id = message.get("id")
        chunks: StreamItems | None = None
        try:
            chunks = await self._open_stream(item, timeout)
            async for chunk in chunks:
                yield {"jsonrpc": "2.0", "result": chunk, "id": id}
        except JsonRpcError as exc:
            yield {"jsonrpc": "2.0", "error": exc.to_dict(), "id": id}
        finally:
            if chunks is not None:
                chunks.close()

    async def _open_stream(self, event: CloudEvent, timeout: float | None) -> StreamItems:
        """Send the request ``event`` to a streaming method; its items as they come."""
        portal, dispatcher = self._portal, self._dispatcher
        stream = await portal.on_loop(dispatcher.open_stream(event, timeout=timeout))
        return StreamItems(portal, dispatcher, stream)

    async def stream_to(
        self,
        agent: str | None,
        method: str,
        chunks: Iterable[Any] | AsyncIterable[Any],
        params: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> Any:
        """Send ``chunks`` in order to a handler taking an ``Iterator`` parameter; its
        result. Every part of the stream is in one trace."""
        stream = OutgoingStream(self, agent, method, chunks, params)
        seq = 0
        sending = False
        with one_trace():
            try:
                if isinstance(chunks, AsyncIterable):
                    async for chunk in chunks:
                        sending = True
                        await stream.send(seq, chunk)
                        seq += 1
                else:
                    for chunk in chunks:
                        sending = True
                        await stream.send(seq, chunk)
                        seq += 1
            except BaseException:
                if sending:
                    await stream.abort(seq)
                raise
            return await stream.end(seq, timeout)


class StreamItems:
    """The items of a stream opened on the bus loop, for a caller on any loop.

    On the bus loop each item is the stream's own next one (no coroutine around
    it: this runs once per chunk); from elsewhere it is fetched on the bus loop.
    """

    __slots__ = ("_dispatcher", "_items", "_portal", "_request_id")

    def __init__(self, portal: Portal, dispatcher: Dispatcher, stream: ReplyStream) -> None:
        self._portal = portal
        self._dispatcher = dispatcher
        self._items = stream.__aiter__()
        self._request_id = stream.request_id

    def __aiter__(self) -> StreamItems:
        return self

    def __anext__(self) -> Awaitable[Any]:
        portal = self._portal
        if portal.on_loop_thread():
            return self._items.__anext__()
        return portal.on_loop(next_item(self._items))

    def close(self) -> None:
        """The caller stopped reading: the request is forgotten, the generator cancelled."""
        request_id, portal = self._request_id, self._portal
        if request_id is None:
            return
        if portal.on_loop_thread():  # now: no wake-up of the loop through its pipe
            self._dispatcher.forget(request_id)
        else:
            portal.call_soon(self._dispatcher.forget, request_id)


async def next_item(items: AsyncIterator[Any]) -> Any:
    """The next item of ``items``, as a coroutine the portal can run on the loop."""
    return await items.__anext__()
