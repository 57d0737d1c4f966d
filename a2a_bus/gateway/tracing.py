"""The gateway's HTTP doors in their callers' traces.

A request to ``POST /rpc``, ``POST /events`` or ``POST /a2a/...`` continues the
W3C ``traceparent`` (and ``tracestate``) header it came with, or the bus starts
a trace; a malformed header, or two ``traceparent`` headers, are ignored. Each
event it brings in keeps its own valid ``traceparent`` and otherwise takes the
request's (:func:`~a2a_bus.protocol.adopt_trace`); what the door's client sends
for the request (an A2A task's stream) continues it too.

With an OpenTelemetry SDK every request the gateway answers, refusals and errors
included, is served in a SERVER span (:class:`TracingMiddleware`, following the
HTTP semantic conventions): named after its method and route template, never the
raw path, with the status code it was answered with, and an error for a 5xx only
(a 4xx is the client's). The request's trace is that span's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from cloudevents.core.v1.event import CloudEvent
from opentelemetry import trace
from opentelemetry.trace import Span
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from a2a_bus.gateway.context import GatewayContext
from a2a_bus.protocol import adopt_trace, ext
from a2a_bus.runtime import tracing
from a2a_bus.runtime.tracing import Origin, Status, StatusCode, Tracing

#: The methods of the HTTP semantic conventions; any other is ``_OTHER`` (a client
#: may send any token as a method: span names stay a bounded set).
_METHODS = frozenset(
    ("CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "QUERY", "TRACE")
)


class TracingMiddleware:
    """Serves each HTTP request in a SERVER span, current while the app answers it
    (a stream until it ends), when ``tracing`` has a tracer; see the module docstring."""

    def __init__(self, app: ASGIApp, tracing: Tracing) -> None:
        self.app = app
        self._tracing = tracing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        tracer = self._tracing.tracer
        if tracer is None or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming: dict[str, Any] = {}
        adopt_trace(incoming, *_trace_headers(Headers(scope=scope)))  # only a valid one is kept
        method: str = scope["method"]
        known = method in _METHODS
        attributes = {
            "http.request.method": method if known else "_OTHER",
            "url.path": scope["path"],
            "url.scheme": scope["scheme"],
        }
        if not known:
            attributes["http.request.method_original"] = method
        name = method if known else "HTTP"
        span = tracer.start_span(
            name,
            context=tracing.parent_of(incoming),
            kind=tracing.SpanKind.SERVER,
            attributes=attributes,
        )
        status: int | None = None
        error: str | None = None

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        # Made current in this task: the app answers the request in it (and in tasks
        # it starts, which copy it).
        token = tracing.attach(tracing.context_with(span))
        try:
            await self.app(scope, receive, send_status)
        except Exception as exc:
            tracing.record_exception(span, exc)
            error = type(exc).__qualname__
            # The app's last resort answers it with a 500, unless it had started answering.
            if status is None:
                status = 500
            raise
        finally:
            tracing.detach(token)
            _answered(span, name, scope.get("route"), status, error)


def _answered(span: Span, method: str, route: Any, status: int | None, error: str | None) -> None:
    """Name ``span`` (named ``method``) after the route the router matched (none: the
    method alone), give it the status answered and the ``error`` that escaped (an
    exception's type), and end it."""
    if isinstance(route, Route):
        span.set_attribute("http.route", route.path_format)
        span.update_name(f"{method} {route.path_format}")
    if status is not None:
        span.set_attribute("http.response.status_code", status)
    if error is not None:
        span.set_attribute("error.type", error)  # its status says so already
    elif status is not None and status >= 500:
        span.set_attribute("error.type", str(status))
        span.set_status(Status(StatusCode.ERROR))
    span.end()


@contextlib.contextmanager
def serving_http(ctx: GatewayContext, request: Request) -> Iterator[Origin | None]:
    """Serve ``request`` in its caller's trace, through its SERVER span when there is
    one; the origin its events and calls continue (None: the bus starts a trace)."""
    tracer = ctx.bus.tracing.tracer
    span = trace.get_current_span()  # the request's (TracingMiddleware's)
    origin: Origin | None
    if tracer is not None and span.get_span_context().is_valid:
        carrier: dict[str, str] = {}
        tracing.stamp(carrier, span)
        origin = Origin(carrier, tracer=tracer)
    else:
        origin = tracing.door_origin(*_trace_headers(request.headers))
    with tracing.serving(origin):
        yield origin


def _trace_headers(headers: Headers) -> tuple[str | None, str | None]:
    """A request's ``traceparent`` and ``tracestate``, read as W3C Trace Context
    says: two ``traceparent`` headers name no parent (none is taken: a new trace),
    and several ``tracestate`` headers are one list, in their order."""
    traceparents = headers.getlist(ext.TRACEPARENT)
    traceparent = traceparents[0] if len(traceparents) == 1 else None
    tracestate = ",".join(headers.getlist(ext.TRACESTATE)) or None
    return traceparent, tracestate


def adopt(origin: Origin | None, event: CloudEvent) -> None:
    """Give an event the request brought in the trace it continues."""
    source = origin.attributes if origin is not None else {}
    adopt_trace(event.get_attributes(), source.get(ext.TRACEPARENT), source.get(ext.TRACESTATE))
