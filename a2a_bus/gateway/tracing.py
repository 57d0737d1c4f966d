"""The gateway's HTTP doors in their callers' traces.

A request to ``POST /rpc``, ``POST /events`` or ``POST /a2a/...`` continues the
W3C ``traceparent`` (and ``tracestate``) header it came with, or the bus starts
a trace; a malformed header, or two ``traceparent`` headers, are ignored. Each
event it brings in keeps its own valid ``traceparent`` and otherwise takes the
request's (:func:`~a2a_bus.protocol.adopt_trace`); what the door's client sends
for the request (an A2A task's stream) continues it too. With an OpenTelemetry SDK the
request is served in a SERVER span, and the request's trace is that span's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from cloudevents.core.v1.event import CloudEvent
from starlette.requests import Request

from a2a_bus.gateway.context import GatewayContext
from a2a_bus.protocol import adopt_trace, ext
from a2a_bus.runtime import tracing
from a2a_bus.runtime.tracing import Origin


@contextlib.contextmanager
def serving_http(ctx: GatewayContext, request: Request, route: str) -> Iterator[Origin | None]:
    """Serve ``request`` (on ``route``, a path template) in its caller's trace; the
    origin its events and calls continue (None: the bus starts a trace)."""
    traceparent, tracestate = _trace_headers(request)
    tracer = ctx.bus.tracing.tracer
    if tracer is None:
        origin = tracing.door_origin(traceparent, tracestate)
        with tracing.serving(origin):
            yield origin
        return
    incoming: dict[str, Any] = {}
    adopt_trace(incoming, traceparent, tracestate)  # only a valid one is kept
    span = tracer.start_span(
        f"{request.method} {route}",
        context=tracing.parent_of(incoming),
        kind=tracing.SpanKind.SERVER,
        attributes={"http.request.method": request.method, "url.path": request.url.path},
    )
    carrier: dict[str, str] = {}
    tracing.stamp(carrier, span)
    origin = Origin(carrier, tracer=tracer)
    # An endpoint runs in one task: the span may be current across its awaits.
    with tracing.use_span(span), tracing.serving(origin):
        yield origin


def _trace_headers(request: Request) -> tuple[str | None, str | None]:
    """The request's ``traceparent`` and ``tracestate``, read as W3C Trace Context
    says: two ``traceparent`` headers name no parent (none is taken: a new trace),
    and several ``tracestate`` headers are one list, in their order."""
    headers = request.headers
    traceparents = headers.getlist(ext.TRACEPARENT)
    traceparent = traceparents[0] if len(traceparents) == 1 else None
    tracestate = ",".join(headers.getlist(ext.TRACESTATE)) or None
    return traceparent, tracestate


def adopt(origin: Origin | None, event: CloudEvent) -> None:
    """Give an event the request brought in the trace it continues."""
    source = origin.attributes if origin is not None else {}
    adopt_trace(event.get_attributes(), source.get(ext.TRACEPARENT), source.get(ext.TRACESTATE))
