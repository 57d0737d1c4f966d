"""``POST /rpc``: JSON-RPC 2.0, single and batch, exactly per the specification.

Conversion and validation are the adaptor's (each batch element on its own);
answering is the bus's :class:`~a2a_bus.core.service.JsonRpcService`, as for
every other front door. This module shapes the HTTP answer: a batch gets an
array, notifications get nothing (204 when nothing at all is to be answered),
JSON-RPC errors travel with HTTP 200, and a streaming method asked for with
``Accept: text/event-stream`` answers with Server-Sent Events.
"""

from __future__ import annotations

import asyncio
from typing import Any

from cloudevents.core.v1.event import CloudEvent
from starlette.requests import Request
from starlette.responses import Response

from a2a_bus.core.routing import RoutingError
from a2a_bus.core.service import Authorize, Reply, checked
from a2a_bus.gateway.auth import Access
from a2a_bus.gateway.context import CHALLENGE, GatewayContext, access_of, context
from a2a_bus.gateway.disconnect import ClientGone, DisconnectWatch
from a2a_bus.gateway.limits import BodyRefused, BodyTooLarge, read_body
from a2a_bus.gateway.prom import DENIED, NOTIFICATIONS_REFUSED, RPC_ERRORS, code_label
from a2a_bus.gateway.responses import JSONResponse, rpc_error
from a2a_bus.gateway.sse import sse_response, wants_sse
from a2a_bus.gateway.tracing import adopt, serving_http
from a2a_bus.protocol import (
    Converted,
    ErrorCode,
    Failure,
    JsonRpcError,
    Kind,
    ProtocolError,
    event_kind,
    jsonrpc_of,
    parse_json,
)

#: The status recorded for a request whose client left before its answer (nginx's 499).
CLIENT_GONE = 499


def parse(ctx: GatewayContext, body: bytes) -> tuple[list[Converted], bool]:
    """The converted elements, and whether the answer must be an array.

    An empty array, an over-long batch and unparsable JSON are answered with a
    single error object, as the specification's examples show.
    """
    try:
        message = parse_json(body)
    except ProtocolError:
        return ctx.adaptor.from_bytes(body), False  # the adaptor words the parse error
    items = ctx.adaptor.from_json(message)
    return items, type(message) is list and len(items) == len(message)


def authorizer(access: Access) -> Authorize:
    """The service's access rule for this caller: a reason to refuse, or None."""

    def authorize(event: CloudEvent, agent: str | None) -> str | None:
        reason = access.denies(event, agent)
        if reason is not None:
            DENIED.labels("forbidden").inc()
        return reason

    return authorize


async def answer(
    ctx: GatewayContext, access: Access, item: Converted, watch: DisconnectWatch
) -> dict[str, Any] | None:
    """The response to one element, or None for a notification.

    A streaming method's chunks are collected while ``watch`` looks out for the
    client: when it leaves, the collection stops and :class:`ClientGone` is raised.
    """
    reply: Reply = await ctx.service.answer(
        item,
        timeout=ctx.settings.request_timeout,
        authorize=authorizer(access),
        jsonrpc_only=True,
        collect_limit=ctx.settings.max_body_bytes,
        guard=watch.run,
    )
    refused = reply.refused
    if reply.response is None and refused is not None:
        # JSON-RPC answers no notification: the refusal is counted (the service logged it).
        NOTIFICATIONS_REFUSED.labels(code_label(refused.code)).inc()
    return reply.response


async def rpc(request: Request) -> Response:
    ctx = context(request)
    access = access_of(request)
    if access is None:
        DENIED.labels("unauthorized").inc()
        detail = "a valid bearer token is required"
        return rpc_error(401, ErrorCode.UNAUTHORIZED, "Unauthorized", detail, CHALLENGE)
    try:
        body = await read_body(request, ctx.settings.max_body_bytes, ctx.settings.request_timeout)
    except BodyRefused as exc:
        code = ErrorCode.TOO_LARGE if isinstance(exc, BodyTooLarge) else ErrorCode.INVALID_REQUEST
        return rpc_error(exc.status, code, exc.reason, str(exc))
    items, batch = parse(ctx, body)
    with serving_http(ctx, request) as origin:
        for item in items:
            if isinstance(item, CloudEvent):
                adopt(origin, item)
        return await _answer_all(ctx, request, access, items, batch)


async def _answer_all(
    ctx: GatewayContext, request: Request, access: Access, items: list[Converted], batch: bool
) -> Response:
    if not batch and len(items) == 1 and wants_sse(request):
        streamed = _stream(ctx, access, items[0])
        if streamed is not None:
            return streamed
    watch = DisconnectWatch(request.receive)
    try:
        if len(items) == 1:
            answers = [await answer(ctx, access, items[0], watch)]
        else:
            answers = await asyncio.gather(*(answer(ctx, access, item, watch) for item in items))
    except ClientGone:
        return Response(status_code=CLIENT_GONE)  # nobody reads it; the status is for metrics
    finally:
        watch.close()
    responses = [a for a in answers if a is not None]
    for response in responses:
        if "error" in response:
            RPC_ERRORS.labels(code_label(response["error"].get("code"))).inc()
    if not responses:
        return Response(status_code=204)
    return JSONResponse(responses if batch else responses[0])


def _stream(ctx: GatewayContext, access: Access, item: Converted) -> Response | None:
    """An SSE response when ``item`` is an allowed request of a streaming method
    that a transport carries (anything else is answered as plain JSON, with the
    error if any: the same refusals with or without SSE)."""
    if isinstance(item, Failure) or event_kind(item) is not Kind.REQUEST:
        return None
    message = jsonrpc_of(item.get_data())
    if message is None:
        return None
    try:
        plan = ctx.service.plan(item)
    except (RoutingError, JsonRpcError):
        return None
    if not plan.streams or access.denies(plan.event, plan.agent):
        return None
    try:
        checked(item, message)
    except JsonRpcError:
        return None
    return sse_response(ctx.service.stream(plan, ctx.settings.request_timeout), plan.id)
