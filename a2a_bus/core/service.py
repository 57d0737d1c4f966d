"""The one JSON-RPC service behind every front door.

``POST /rpc``, the Kafka ingress, the A2A endpoint's method calls and
``Client.call`` hand it converted messages (one, or each element of a batch)
and get back what to answer. It decides a message's route once (the same
:class:`~a2a_bus.core.routing.Route` serves the caller's access check and the
send), checks what no transport would carry, and shapes every response,
refusal and internal error here, so the doors differ only in how they read
input and write answers.

A notification is never answered; when it cannot be delivered its
:class:`Reply` says why (``refused``), and the door decides who hears of it (a
counter and a log line over HTTP, a dead letter on Kafka).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, NamedTuple, TypeVar

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.core.dispatch import Dispatcher, is_builtin
from a2a_bus.core.payload import envelope_refusal, refusal
from a2a_bus.core.routing import Route, RoutingError
from a2a_bus.core.streams import COLLECT_MAX_BYTES, Collected
from a2a_bus.protocol import (
    ErrorCode,
    Failure,
    JsonRpcError,
    JsonRpcId,
    Kind,
    error_response,
    event_kind,
    ext,
    jsonrpc_of,
    result_response,
)
from a2a_bus.runtime.portal import BusStopped

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Why a caller may not send a message to an agent (a reason), or None: the door's
#: access rule, given the event and the agent it reaches (None: no agent).
Authorize = Callable[[CloudEvent, str | None], str | None]
#: Runs the gathering of a stream's chunks (a door that watches its client cancels it).
Guard = Callable[[Awaitable[dict[str, Any]]], Awaitable[dict[str, Any]]]

ONLY_JSONRPC = "only JSON-RPC requests and notifications are accepted here"


class Reply(NamedTuple):
    """What one message comes to."""

    #: The JSON-RPC response to send back; None for a notification.
    response: dict[str, Any] | None
    #: Why the message was not delivered: a refused notification, or a request the
    #: bus could not route (answered with ``response``); None when it went through.
    refused: JsonRpcError | None = None


class Plan(NamedTuple):
    """One message ready to send: decided once, then checked and sent."""

    event: CloudEvent
    #: The JSON-RPC message the event carries (None: a native CloudEvent).
    message: dict[str, Any] | None
    #: A request (answered), as opposed to a notification.
    request: bool
    #: The id the answer carries: the caller's JSON-RPC id, or the event id.
    id: JsonRpcId
    #: Where it goes; None when the bus answers it itself (``methods/list``...).
    route: Route | None
    #: The method answers with a stream of chunks.
    streams: bool

    @property
    def agent(self) -> str | None:
        return self.route.agent_id if self.route is not None else None


class JsonRpcService:
    """Answers converted JSON-RPC messages (and native CloudEvents) through a dispatcher."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.directory = dispatcher.directory
        self.adaptor = dispatcher.context.adaptor

    # -- planning -------------------------------------------------------------------

    def plan(self, event: CloudEvent) -> Plan:
        """Decide where ``event`` goes; RoutingError when it cannot go anywhere."""
        event = self.adaptor.with_method(event)
        data = event.get_data()
        message = jsonrpc_of(data)
        request = event_kind(event) is Kind.REQUEST
        id = message.get("id") if message is not None else event.get_id()
        if is_builtin(event):
            return Plan(event, message, request, id, None, False)
        method = event.get_extension(ext.METHOD)
        if request:
            route = self.dispatcher.route(event)
        else:
            route = self.dispatcher.route_notification(event, method)
        streams = request and route.agent_id is not None and self.streams(route.agent_id, method)
        return Plan(event, message, request, id, route, streams)

    def streams(self, agent: str, method: Any) -> bool:
        """True when ``agent``'s ``method`` answers with a stream (from its card)."""
        card = self.directory.card(agent)
        if card is None or not isinstance(method, str):
            return False
        return any(
            entry.get("name") == method and entry.get("streaming") == "response"
            for entry in card.get("methods", ())
        )

    # -- answering ------------------------------------------------------------------

    async def answer(
        self,
        item: CloudEvent | Failure,
        *,
        timeout: float | None = None,
        authorize: Authorize | None = None,
        jsonrpc_only: bool = False,
        collect_limit: int = COLLECT_MAX_BYTES,
        guard: Guard | None = None,
    ) -> Reply:
        """Send one converted message and shape what comes back.

        ``jsonrpc_only`` refuses native CloudEvents and responses (-32600);
        ``authorize`` may refuse a message (-32003 Forbidden); a streaming method
        is answered with all its chunks in one list (at most ``collect_limit`` bytes
        of JSON), gathered under ``guard``. BusStopped when the bus is not running.
        """
        if not self.dispatcher.running:  # else a route it no longer knows would answer
            raise BusStopped()
        if isinstance(item, Failure):
            return Reply(item.response())
        message = jsonrpc_of(item.get_data())
        if jsonrpc_only and (message is None or event_kind(item) is Kind.RESPONSE):
            invalid = (ErrorCode.INVALID_REQUEST, "Invalid Request", None, ONLY_JSONRPC)
            return Reply(error_response(*invalid))
        plan: Plan | None = None
        unroutable: JsonRpcError | None = None
        try:
            plan = self.plan(item)
        except RoutingError as exc:
            unroutable = exc.json_rpc_error()
        if authorize is not None:
            # Before any other refusal: a caller learns nothing of what it may not reach.
            if plan is not None:
                reason = authorize(plan.event, plan.agent)
            else:
                target = item.get_extension(ext.TARGET_AGENT)
                reason = authorize(item, target if isinstance(target, str) else None)
            if reason is not None:
                forbidden = JsonRpcError(ErrorCode.FORBIDDEN, "Forbidden", reason)
                return self._refused(item, message, forbidden, counted=False)
        if plan is None:
            assert unroutable is not None
            return self._refused(item, message, unroutable)
        try:
            checked(item, message)
        except JsonRpcError as exc:
            return self._refused(item, message, exc)
        try:
            if plan.streams:
                gathering = collect(self.stream(plan, timeout), plan.id, collect_limit)
                return Reply(await (guard(gathering) if guard is not None else gathering))
            response = await self.dispatcher.send(plan.event, route=plan.route, timeout=timeout)
        except JsonRpcError as exc:  # refused on the way (a record too large...)
            return self._refused(item, message, exc)
        except BusStopped:  # stopped meanwhile: the caller's error, not an internal one
            raise
        except Exception:
            # The log has the traceback; the caller learns only that it failed.
            log.exception("JSON-RPC %s failed", _method(item))
            response = error_response(ErrorCode.INTERNAL_ERROR, "Internal error", plan.id)
        return Reply(response if plan.request else None)

    def _refused(
        self,
        event: CloudEvent,
        message: dict[str, Any] | None,
        error: JsonRpcError,
        *,
        counted: bool = True,
    ) -> Reply:
        """The reply to a message that was not sent: the error for a request, only
        the reason for a notification (logged here, once for every door)."""
        if event_kind(event) is Kind.REQUEST:
            if counted:
                self.dispatcher.context.metrics.errors += 1
            id = message.get("id") if message is not None else event.get_id()
            return Reply(error_response(error.code, error.message, id, error.data), error)
        log.warning(
            "JSON-RPC notification %s refused: %s: %s", _method(event), error.message, error.data
        )
        return Reply(None, error)

    async def stream(
        self, plan: Plan, timeout: float | None = None
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The responses of a streaming method: one per chunk; a failure ends the
        stream with an error response. Closing it cancels the stream upstream."""
        dispatcher = self.dispatcher
        id = plan.id
        replies = await dispatcher.open_stream(plan.event, route=plan.route, timeout=timeout)
        try:
            async for chunk in replies:
                yield result_response(chunk, id)
        except JsonRpcError as exc:
            yield {"jsonrpc": "2.0", "error": exc.to_dict(), "id": id}
        finally:
            if replies.request_id is not None:
                dispatcher.forget(replies.request_id)


def checked(event: CloudEvent, message: dict[str, Any] | None) -> None:
    """Raise the JSON-RPC error (-32602, -32005) when no transport would carry
    ``event``: its params (or native data) or its envelope (see :mod:`~a2a_bus.core.payload`)."""
    if message is None:
        error = refusal(event.get_data(), "data", binary=True)
    else:  # bounded as the client bounds the params it sends
        error = refusal(message.get("params"), "params")
    error = error or envelope_refusal(event)
    if error is not None:
        raise error


async def collect(
    responses: AsyncGenerator[dict[str, Any], None],
    id: Any,
    max_bytes: int = COLLECT_MAX_BYTES,
) -> dict[str, Any]:
    """One JSON-RPC response for a whole stream: the result is the list of its items.

    An error response ends it with that error, and past ``max_bytes`` of JSON the
    answer is -32005 (read it as a stream instead). The stream is closed however
    this ends, also when the caller is cancelled, which cancels it upstream.
    """
    collected = Collected(max_bytes)
    try:
        async for response in responses:
            if "error" in response:
                return response
            collected.add(response.get("result"))
    except JsonRpcError as exc:
        return {"jsonrpc": "2.0", "error": exc.to_dict(), "id": id}
    finally:
        await responses.aclose()
    return {"jsonrpc": "2.0", "result": collected.items, "id": id}


def _method(event: CloudEvent) -> Any:
    return event.get_extension(ext.METHOD) or event.get_type()
