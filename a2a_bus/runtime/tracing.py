"""What a message carries across hops (its trace, its call depth), and OpenTelemetry spans.

**Origin.** :data:`ORIGIN` holds what the running code works for: the message a
handler handles (set by its actor around the call) or the request a door serves
(the caller's trace, set by the gateway and the Kafka ingress). Every message the
client builds continues it (:func:`continue_origin`): the same trace, and for a
handler one call deeper, its agent added to the chain. It is a context variable,
so it follows asyncio tasks; the :class:`~a2a_bus.runtime.portal.Portal` carries
the caller's context to the bus loop (a sync client's call from an actor thread).

**Spans.** The bus depends on ``opentelemetry-api`` only. A :class:`Tracing` has a
tracer once an SDK's tracer provider is installed (given, or the global one when
the bus starts); without one it has none and the bus makes no span, it only puts
a valid ``traceparent`` on every event. The span helpers here follow the
semantic conventions: messaging (``messaging.*``), JSON-RPC (``rpc.*``) and, for
the LLM runtime, GenAI (``gen_ai.*``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, MutableMapping
from contextvars import ContextVar
from typing import Any, NamedTuple

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import (
    NonRecordingSpan,
    NoOpTracerProvider,
    ProxyTracerProvider,
    Span,
    SpanContext,
    SpanKind,
    TraceFlags,
    Tracer,
    TraceState,
)
from opentelemetry.trace.status import Status, StatusCode

from a2a_bus.protocol import (
    ErrorCode,
    JsonRpcError,
    ext,
    format_traceparent,
    new_traceparent,
    next_call,
    parse_traceparent,
    propagated_traceparent,
    valid_tracestate,
)

log = logging.getLogger(__name__)

#: The instrumentation scope of the bus's spans.
SCOPE = "a2a_bus"
#: ``rpc.system`` of requests, and the name of their spans when the method is unknown.
RPC_SYSTEM = "jsonrpc"
#: ``rpc.method`` of a method its agent does not have (the semantic conventions' value).
OTHER_METHOD = "_OTHER"


class Origin(NamedTuple):
    """What the running code continues: see the module docstring."""

    #: Attributes holding the trace (and call chain) continued: a handled event's.
    attributes: Mapping[str, Any]
    #: The agent whose handler runs; None at a door (no call chain grows there).
    agent: str | None = None
    #: The tracer of the bus whose handler runs (None: it records no spans); the
    #: LLM runtime makes its spans with it (:func:`tracer_here`).
    tracer: Tracer | None = None


ORIGIN: ContextVar[Origin | None] = ContextVar("a2a_bus_origin", default=None)


def door_origin(traceparent: Any, tracestate: Any = None) -> Origin | None:
    """The origin of a request entering at a door with these transport headers
    (None when ``traceparent`` is not a valid one: the bus starts a trace)."""
    traceparent = propagated_traceparent(traceparent)
    if traceparent is None:
        return None
    attributes = {ext.TRACEPARENT: traceparent}
    if valid_tracestate(tracestate):
        attributes[ext.TRACESTATE] = tracestate
    return Origin(attributes)


def continue_origin(origin: Origin, attributes: MutableMapping[str, Any]) -> None:
    """Stamp the attributes of a message sent for ``origin``: its trace, and from a
    handler the next ``calldepth`` and ``callchain``."""
    source = origin.attributes
    traceparent: Any = source.get(ext.TRACEPARENT)
    if origin.tracer is not None and trace.get_current_span().get_span_context().is_valid:
        # Recording: the span current where the message is made (the handler's, or
        # one of its own) is the parent of the sending.
        stamp(attributes, trace.get_current_span())
    elif (passed := propagated_traceparent(traceparent)) is not None:
        # Checked: a handled event may come from a producer outside the bus's doors,
        # with a later version's traceparent or flags level 1 does not know, which go
        # on as version 00 with those flags zeroed.
        attributes[ext.TRACEPARENT] = passed
        tracestate = source.get(ext.TRACESTATE)
        if valid_tracestate(tracestate):
            attributes[ext.TRACESTATE] = tracestate
        else:
            attributes.pop(ext.TRACESTATE, None)
    if origin.agent is not None:
        attributes[ext.CALLDEPTH], attributes[ext.CALLCHAIN] = next_call(source, origin.agent)


@contextlib.contextmanager
def one_trace() -> Iterator[None]:
    """Messages sent in the block share one trace: the running code's, else a new one
    (the chunks of a stream a script sends)."""
    if ORIGIN.get() is not None:
        yield
        return
    with serving(Origin({ext.TRACEPARENT: new_traceparent()})):
        yield


@contextlib.contextmanager
def serving(origin: Origin | None) -> Iterator[None]:
    """Run the block for ``origin`` (a door's request)."""
    token = ORIGIN.set(origin)
    try:
        yield
    finally:
        ORIGIN.reset(token)


# -- spans --------------------------------------------------------------------------


def recording(provider: Any) -> bool:
    """True for a tracer provider that records spans (an SDK's), not the API's no-op."""
    return not isinstance(provider, ProxyTracerProvider | NoOpTracerProvider)


class Tracing:
    """The tracer of one bus: None until :meth:`start` finds an SDK provider."""

    def __init__(self, provider: Any = None) -> None:
        self._provider = provider
        self.tracer: Tracer | None = None

    def start(self) -> None:
        """Take the given provider, else the global one, if it records spans."""
        provider = self._provider if self._provider is not None else trace.get_tracer_provider()
        self.tracer = provider.get_tracer(SCOPE) if recording(provider) else None


def parent_of(attributes: Mapping[str, Any] | Origin) -> otel_context.Context:
    """The OpenTelemetry context an event's ``traceparent`` names (empty if none), or
    an origin's: a handler's spans are children of the span handling its event."""
    if isinstance(attributes, Origin):
        attributes = attributes.attributes
    parsed = parse_traceparent(attributes.get(ext.TRACEPARENT))
    if parsed is None:
        return otel_context.Context()
    tracestate = attributes.get(ext.TRACESTATE)
    remote = SpanContext(
        int(parsed.trace_id, 16),
        int(parsed.parent_id, 16),
        is_remote=True,
        trace_flags=TraceFlags(parsed.flags),
        trace_state=TraceState.from_header([tracestate]) if tracestate else None,
    )
    return trace.set_span_in_context(NonRecordingSpan(remote), otel_context.Context())


def stamp(attributes: MutableMapping[str, Any], span: Span) -> None:
    """Put ``span``'s context on an event as its ``traceparent``/``tracestate``."""
    context = span.get_span_context()
    if not context.is_valid:
        return
    attributes[ext.TRACEPARENT] = format_traceparent(
        context.trace_id, context.span_id, context.trace_flags
    )
    tracestate = context.trace_state.to_header() if context.trace_state else ""
    if tracestate:
        attributes[ext.TRACESTATE] = tracestate
    else:
        attributes.pop(ext.TRACESTATE, None)


def _messaging(
    system: str, topic: str, operation: str, attributes: Mapping[str, Any]
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "messaging.system": system,
        "messaging.destination.name": topic,
        "messaging.operation.type": operation,
        "messaging.operation.name": operation,
        "messaging.message.id": str(attributes.get("id")),
    }
    method = attributes.get(ext.METHOD)
    if isinstance(method, str):
        out["rpc.system"] = RPC_SYSTEM
        out["rpc.method"] = method
    depth = attributes.get(ext.CALLDEPTH)
    if type(depth) is int:
        out["a2a.call.depth"] = depth
    return out


def start_send(
    tracer: Tracer,
    attributes: MutableMapping[str, Any],
    topic: str,
    system: str,
    *,
    request: bool,
    caller_id: Any = None,
) -> Span:
    """The span of a message being sent (its context stamped on the event): CLIENT
    for a request, PRODUCER otherwise; a child of the trace the event continues
    (its ``traceparent``), else of the current span, else a new trace's root.

    The event's own comes first: delivery handlers run step by step in copies of
    their producer's context, so what is current on the bus loop may be another
    message's span.
    """
    parent = parent_of(attributes) if ext.TRACEPARENT in attributes else None
    method = attributes.get(ext.METHOD)
    values = _messaging(system, topic, "send", attributes)
    if request:
        name = method if isinstance(method, str) else f"send {topic}"
        kind = SpanKind.CLIENT
        if caller_id is not None:
            values["rpc.jsonrpc.request_id"] = str(caller_id)
    else:
        name, kind = f"send {topic}", SpanKind.PRODUCER
    span = tracer.start_span(name, context=parent, kind=kind, attributes=values)
    stamp(attributes, span)
    return span


def start_process(
    tracer: Tracer,
    attributes: Mapping[str, Any],
    topic: str,
    group: str | None,
    system: str,
    *,
    request: bool,
    redelivered: bool,
    agent: str | None = None,
) -> Span:
    """The span of handling a delivered event, a child of its ``traceparent``:
    SERVER for a request, CONSUMER otherwise."""
    values = _messaging(system, topic, "process", attributes)
    if agent is not None:
        values["a2a.agent.id"] = agent
    if group is not None:
        values["messaging.consumer.group.name"] = group
    if redelivered:
        values["a2a.redelivered"] = True
    method = attributes.get(ext.METHOD)
    if request:
        name = method if isinstance(method, str) else f"process {topic}"
        kind = SpanKind.SERVER
    else:
        name, kind = f"process {topic}", SpanKind.CONSUMER
    return tracer.start_span(name, context=parent_of(attributes), kind=kind, attributes=values)


def record_response(
    span: Span, response: Mapping[str, Any] | None, *, method_named: bool = True
) -> None:
    """Mark ``span`` with a JSON-RPC response's error, if it is one (``method_named``:
    the span is named after the method called, and renamed if it has none)."""
    error = response.get("error") if response is not None else None
    if isinstance(error, Mapping):
        code = error.get("code")
        if isinstance(code, int):
            span.set_attribute("rpc.jsonrpc.error_code", code)
            if code == ErrorCode.METHOD_NOT_FOUND and method_named:
                _unknown_method(span, error.get("data"))
        span.set_attribute("rpc.jsonrpc.error_message", str(error.get("message")))
        span.set_status(Status(StatusCode.ERROR, str(error.get("message"))))


def end_request(span: Span, error: JsonRpcError | None) -> None:
    """End the span of a request once its answer settled (a stream's: it ended,
    failed, or its reader left), marked with ``error`` if it ended with one."""
    if error is not None:
        record_response(span, {"error": error.to_dict()})
    span.end()


def _unknown_method(span: Span, method: Any) -> None:
    """A request for a method its agent lacks: any caller may make names up, so its
    span is named after the RPC system (span names stay a bounded set); the
    bus's "Method not found" names the method in its ``data``."""
    span.update_name(RPC_SYSTEM)
    span.set_attribute("rpc.method", OTHER_METHOD)
    if isinstance(method, str):
        span.set_attribute("rpc.method_original", method)


def record_dead_letter(span: Span, reason: str, attempts: int) -> None:
    """A dead letter written while ``span`` ran (after ``attempts`` tries): an event
    on it, and an error."""
    span.add_event("a2a.dead_letter", {"a2a.dead_letter.reason": reason})
    span.set_attribute("a2a.attempts", attempts)
    if attempts > 1:  # tried again after a crash: handled more than once
        span.set_attribute("a2a.redelivered", True)
    span.set_status(Status(StatusCode.ERROR, reason))


def record_exception(span: Span, exc: BaseException) -> None:
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))


def attach(context: otel_context.Context) -> object:
    """Make ``context`` current in this thread; pass the token to :func:`detach`."""
    return otel_context.attach(context)


def detach(token: object) -> None:
    otel_context.detach(token)  # type: ignore[arg-type]


def context_with(span: Span) -> otel_context.Context:
    """A context in which ``span`` is the current span."""
    return trace.set_span_in_context(span)


def use_span(span: Span) -> contextlib.AbstractContextManager[Span]:
    """Make ``span`` current for the block, end it after, record an escaping error.

    Only around code that stays in one context: not around an await in a delivery
    handler, which the transports drive step by step (each step in a copy).
    """
    return trace.use_span(
        span, end_on_exit=True, record_exception=True, set_status_on_exception=True
    )


@contextlib.contextmanager
def ending(span: Span) -> Iterator[Span]:
    """End ``span`` after the block (not making it current); record an escaping error."""
    try:
        yield span
    except GeneratorExit:  # a reader that stopped early: no failure
        raise
    except BaseException as exc:
        record_exception(span, exc)
        raise
    finally:
        span.end()


def tracer_here() -> Tracer:
    """The tracer for spans made by code a handler runs (the LLM runtime): its bus's,
    else the global provider's (a no-op one without an SDK)."""
    origin = ORIGIN.get()
    if origin is not None and origin.tracer is not None:
        return origin.tracer
    return trace.get_tracer(SCOPE)


__all__ = [
    "ORIGIN",
    "Origin",
    "SpanKind",
    "Status",
    "StatusCode",
    "Tracing",
    "continue_origin",
    "door_origin",
    "serving",
]
