"""``POST /events``: the CloudEvents HTTP binding (binary, structured, batch) onto the bus.

A request is all or nothing: every event is decoded, checked against the
payload bound, the rule of the bus's outside doors (``routing.outside_refusal``)
and the caller's allow-lists, and routed before any is published, so a 400, 403
or 413 means nothing was published. Accepted events are answered with 202:
nothing here answers a request (``POST /rpc`` does).
"""

from __future__ import annotations

from cloudevents.core.v1.event import CloudEvent
from starlette.requests import Request
from starlette.responses import Response

from a2a_bus.core.payload import envelope_refusal, refusal
from a2a_bus.core.routing import RoutingError, outside_refusal
from a2a_bus.gateway.auth import Access
from a2a_bus.gateway.context import GatewayContext, context, require_access
from a2a_bus.gateway.limits import BodyRefused, read_body
from a2a_bus.gateway.prom import DENIED, EVENTS_PUBLISHED
from a2a_bus.gateway.responses import JSONResponse, problem
from a2a_bus.gateway.tracing import adopt, serving_http
from a2a_bus.protocol import ErrorCode, ProtocolError, from_http

#: Routing errors that mean "no such thing here" rather than a malformed event.
_STATUS: dict[int, int] = {ErrorCode.METHOD_NOT_FOUND: 404, ErrorCode.AGENT_UNAVAILABLE: 404}


async def events(request: Request) -> Response:
    ctx = context(request)
    access = require_access(request)
    try:
        body = await read_body(request, ctx.settings.max_body_bytes, ctx.settings.request_timeout)
    except BodyRefused as exc:
        return problem(exc.status, str(exc))
    repeated = _repeated_header(request)
    if repeated is not None:  # one copy would win here, maybe another at a proxy
        return problem(400, f"malformed CloudEvent: header {repeated!r} is given twice")
    try:
        decoded = from_http(dict(request.headers), body)
    except ProtocolError as exc:
        return problem(400, f"malformed CloudEvent: {exc.failure.data or exc.failure.message}")
    if not decoded:
        return problem(400, "malformed CloudEvent: the batch is empty")
    with serving_http(ctx, request) as origin:
        for event in decoded:
            adopt(origin, event)
        return await _publish(ctx, access, decoded)


def _repeated_header(request: Request) -> str | None:
    """The first ``ce-*`` or ``content-type`` header the request gives twice."""
    seen: set[bytes] = set()
    for name, _ in request.headers.raw:
        if name.startswith(b"ce-") or name == b"content-type":
            if name in seen:
                return name.decode("latin-1")
            seen.add(name)
    return None


async def _publish(ctx: GatewayContext, access: Access, decoded: list[CloudEvent]) -> Response:
    """Check, route and publish every event (none unless all may go)."""
    if len(decoded) > ctx.settings.max_batch:
        limit = ctx.settings.max_batch
        return problem(400, f"the batch has {len(decoded)} events; the limit is {limit}")
    routes = []
    for event in decoded:
        # The bound every transport applies (a2a_bus.core.payload): 413, as for the body.
        too_large = refusal(event.get_data(), f"event {event.get_id()!r} data", binary=True)
        too_large = too_large or envelope_refusal(event)
        if too_large is not None:
            status = 413 if too_large.code == ErrorCode.TOO_LARGE else 400
            return problem(status, str(too_large.data))
        # The rule of both outside doors (the Kafka ingress dead-letters these).
        refused = outside_refusal(event)
        if refused is not None:
            return problem(400, f"event {event.get_id()!r} refused: {refused}")
        # Without a2amethod the method comes from the type (PROTOCOL.md section 3), for
        # routing and the methods allow-list alike; the event is published as sent.
        routable = ctx.adaptor.with_method(event)
        try:
            route = ctx.dispatcher.route(routable)
        except RoutingError as exc:
            status = _STATUS.get(exc.code, 400)
            detail = exc.message if exc.data is None else f"{exc.message}: {exc.data}"
            return problem(status, f"event {event.get_id()!r} cannot be routed: {detail}")
        reason = access.denies(routable, route.agent_id)
        if reason is not None:
            DENIED.labels("forbidden").inc()
            return problem(403, f"event {event.get_id()!r}: {reason}")
        routes.append(route)
    for event, route in zip(decoded, routes, strict=True):
        await ctx.dispatcher.publish(event, route)
        EVENTS_PUBLISHED.inc()
    accepted = [{"id": e.get_id(), "topic": r.topic} for e, r in zip(decoded, routes, strict=True)]
    return JSONResponse({"accepted": accepted}, 202)
