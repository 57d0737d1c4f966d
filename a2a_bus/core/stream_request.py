"""The request of a streaming method: sent, and its answer awaited on a stream.

:meth:`Dispatcher.open_stream <a2a_bus.core.dispatch.Dispatcher.open_stream>`
routes the request and gives it its bus-wide id; this sends it. With an
OpenTelemetry SDK its CLIENT span lasts until the stream settles: the stream
ends, fails (an error answer, a timeout, a break: recorded on the span), or its
reader leaves (no error: the caller chose to).
"""

from __future__ import annotations

from functools import partial

from cloudevents.core.v1.event import CloudEvent
from opentelemetry.trace import Span

from a2a_bus.core.context import BusContext
from a2a_bus.core.correlation import Correlator
from a2a_bus.core.errors import transport_refusal
from a2a_bus.core.reply_stream import ReplyStream
from a2a_bus.core.routing import Route
from a2a_bus.runtime import tracing
from a2a_bus.transport.errors import TransportError


async def send_stream_request(
    context: BusContext,
    correlator: Correlator,
    request_id: str,
    outgoing: CloudEvent,
    route: Route,
    timeout: float | None,
) -> ReplyStream:
    """Send ``outgoing`` (a request with the bus-wide id ``request_id`` and this
    node's reply topic) on ``route``; its chunks arrive on the returned stream,
    each awaited ``timeout`` seconds at most (None: the bus's request timeout)."""
    if timeout is None:
        timeout = context.request_timeout
    stream = correlator.expect_stream(request_id, timeout)
    context.metrics.requests += 1
    tracer = context.tracing.tracer
    span = None
    if tracer is not None:  # the chunks continue the span's trace
        span = tracing.start_send(
            tracer, outgoing.get_attributes(), route.topic, context.messaging_system, request=True
        )
    try:
        await context.transport.publish(route.topic, outgoing, key=route.key)
    except BaseException as exc:
        raise unsent(correlator, request_id, span, exc) from None
    if span is not None:
        stream.on_settle(partial(tracing.end_request, span))
    stream.request_id = request_id
    return stream


def unsent(
    correlator: Correlator, request_id: str, span: Span | None, exc: BaseException
) -> BaseException:
    """A request (or a stream's) whose send or wait failed with ``exc``: forgotten by
    ``correlator``, its span ended with the exception; what its caller gets raised
    (a transport's refusal as its JSON-RPC error, else ``exc``)."""
    correlator.cancel(request_id)
    if span is not None:
        tracing.record_exception(span, exc)
        span.end()
    return transport_refusal(exc) if isinstance(exc, TransportError) else exc
