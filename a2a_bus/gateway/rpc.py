"""``POST /rpc``: JSON-RPC 2.0, single and batch, exactly per the specification.

Conversion and validation are the adaptor's (each batch element on its own);
this module routes the converted messages through the bus and shapes the HTTP
answer: a batch gets an array, notifications get nothing (204 when nothing at
all is to be answered), JSON-RPC errors travel with HTTP 200.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from a2a_bus.gateway.auth import Access
from a2a_bus.gateway.context import CHALLENGE, GatewayContext, access_of, context
from a2a_bus.gateway.disconnect import ClientGone, DisconnectWatch
from a2a_bus.gateway.limits import BodyTooLarge, read_body
from a2a_bus.gateway.prom import DENIED, NOTIFICATIONS_REFUSED, RPC_ERRORS
from a2a_bus.gateway.responses import JSONResponse, rpc_error
from a2a_bus.gateway.sse import collect, sse_response, wants_sse
from a2a_bus.protocol import (
    Converted,
    ErrorCode,
    Failure,
    JsonRpcError,
    Kind,
    ProtocolError,
    error_response,
    event_kind,
    jsonrpc_of,
    parse_json,
)

log = logging.getLogger(__name__)

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


async def answer(
    ctx: GatewayContext, access: Access, item: Converted, watch: DisconnectWatch
) -> dict[str, Any] | None:
    """The response to one element, or None for a notification.

    A streaming method's chunks are collected while ``watch`` looks out for the
    client: when it leaves, the collection stops and :class:`ClientGone` is raised.
    """
    if isinstance(item, Failure):
        return item.response()
    message = jsonrpc_of(item.get_data())
    kind = event_kind(item)
    if message is None or kind is Kind.RESPONSE:
        detail = "only JSON-RPC requests and notifications are accepted here"
        return error_response(ErrorCode.INVALID_REQUEST, "Invalid Request", None, detail)
    request = kind is Kind.REQUEST
    id = message.get("id")
    agent = ctx.bridge.agent_for(item)
    reason = access.denies(item, agent)
    if reason is not None:
        DENIED.labels("forbidden").inc()
        return error_response(ErrorCode.FORBIDDEN, "Forbidden", id, reason) if request else None
    timeout = ctx.settings.request_timeout
    try:
        if request and ctx.bridge.streams(item, agent):
            limit = ctx.settings.max_body_bytes
            return await watch.run(collect(ctx.bridge, message, timeout, limit))
        response = await ctx.bridge.send(item, timeout)
    except ClientGone:
        raise
    except JsonRpcError as exc:
        # Only a notification is refused by raising (an agent discovery does not know):
        # JSON-RPC answers no notification, so the refusal is counted and logged.
        if request:
            return error_response(exc.code, exc.message, id, exc.data)
        NOTIFICATIONS_REFUSED.labels(str(exc.code)).inc()
        method = message.get("method")
        log.warning("JSON-RPC notification %s refused: %s: %s", method, exc.message, exc.data)
        return None
    except Exception:
        # The log has the traceback; the caller learns only that it failed.
        log.exception("JSON-RPC %s failed in the gateway", message.get("method"))
        response = error_response(ErrorCode.INTERNAL_ERROR, "Internal error", id)
    return response if request else None


async def rpc(request: Request) -> Response:
    ctx = context(request)
    access = access_of(request)
    if access is None:
        DENIED.labels("unauthorized").inc()
        detail = "a valid bearer token is required"
        return rpc_error(401, ErrorCode.UNAUTHORIZED, "Unauthorized", detail, CHALLENGE)
    try:
        body = await read_body(request, ctx.settings.max_body_bytes)
    except BodyTooLarge as exc:
        return rpc_error(413, ErrorCode.TOO_LARGE, "Request too large", str(exc))
    items, batch = parse(ctx, body)
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
            RPC_ERRORS.labels(str(response["error"].get("code"))).inc()
    if not responses:
        return Response(status_code=204)
    return JSONResponse(responses if batch else responses[0])


def _stream(ctx: GatewayContext, access: Access, item: Converted) -> Response | None:
    """An SSE response when ``item`` is an allowed request of a streaming method."""
    if isinstance(item, Failure) or event_kind(item) is not Kind.REQUEST:
        return None
    message = jsonrpc_of(item.get_data())
    agent = ctx.bridge.agent_for(item)
    if message is None or not ctx.bridge.streams(item, agent) or access.denies(item, agent):
        return None  # answered as plain JSON, with the error if any
    return sse_response(ctx.bridge, message, ctx.settings.request_timeout)
