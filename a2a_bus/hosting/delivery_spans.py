"""One span per delivery an agent host handles (with an OpenTelemetry SDK).

Each delivery is handled in a span of its own, a child of its ``traceparent``;
the event the handler sees, and everything continuing it, carries that span's
context. Without an SDK (no tracer) handlers run as they are, and no span is
looked up.
"""

from __future__ import annotations

from typing import Any

from a2a_bus.core.context import BusContext
from a2a_bus.protocol import Kind, event_kind
from a2a_bus.protocol.events import adopt_event
from a2a_bus.runtime import tracing
from a2a_bus.transport.base import Delivery, Handler


class DeliverySpans:
    """The spans of the deliveries one agent's host is handling, by event."""

    def __init__(self, context: BusContext, agent_id: str) -> None:
        self._context = context
        self._agent_id = agent_id
        #: The bus's tracer is ``tracer`` (None without an OpenTelemetry SDK: no spans).
        self._tracing = context.tracing
        #: The span of each delivery being handled, by its event's id().
        self._spans: dict[int, Any] = {}

    @property
    def enabled(self) -> bool:
        """Whether deliveries get spans (an SDK is installed)."""
        return self._tracing.tracer is not None

    def traced(self, handle: Handler, group: str) -> Handler:
        """``handle`` itself, or with an SDK ``handle`` inside a span per delivery."""
        tracer = self._tracing.tracer
        if tracer is None:
            return handle
        system, agent, spans = self._context.messaging_system, self._agent_id, self._spans

        async def traced(delivery: Delivery) -> None:
            event = delivery.event
            attributes = event.get_attributes()
            span = tracing.start_process(
                tracer,
                attributes,
                delivery.topic,
                group,
                system,
                request=event_kind(event) is Kind.REQUEST,
                agent=agent,
                redelivered=delivery.redelivered,
            )
            # A copy: the transport may hand this very event to other subscribers.
            seen = adopt_event(dict(attributes), event.get_data())
            tracing.stamp(seen.get_attributes(), span)
            spans[id(seen)] = span
            try:
                with tracing.ending(span):  # not current: the handler runs step by step
                    await handle(delivery._replace(event=seen))
            finally:
                del spans[id(seen)]

        return traced

    def of(self, delivery: Delivery) -> Any:
        """The span handling ``delivery`` (with an SDK), else None."""
        if self._tracing.tracer is None:
            return None
        return self._spans.get(id(delivery.event))


__all__ = ["DeliverySpans"]
