"""The gateway's view of a bus: send, stream, publish, read, discover.

Everything the HTTP endpoints and the Kafka ingress need from the bus core goes
through this one small class, so they never reach into bus internals.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any, cast

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.core.routing import Route
from a2a_bus.protocol import ext, new_id
from a2a_bus.transport.base import Handler, Subscription

if TYPE_CHECKING:
    from a2a_bus.bus import Bus
    from a2a_bus.client import EventPage


class Bridge:
    """Wraps a :class:`~a2a_bus.bus.Bus` and its async client."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.client = bus.async_client()

    @property
    def ready(self) -> bool:
        """True once the bus runs on a connected transport."""
        return self.bus.running and self.bus.transport.ready

    # -- sending --------------------------------------------------------------------

    async def send(self, event: CloudEvent, timeout: float | None = None) -> dict[str, Any] | None:
        """Route one message; a request's JSON-RPC response, else None.

        A native event without ``a2amethod`` calls the method its type names
        (PROTOCOL.md section 3): :meth:`Bus.send <a2a_bus.bus.Bus.send>` sees to it.
        """
        return await self.client.call_event(event, timeout=timeout)

    def stream(
        self, message: dict[str, Any], timeout: float | None = None
    ) -> AsyncGenerator[dict[str, Any], None]:
        """One JSON-RPC response per chunk of a streaming method; closing it cancels."""
        # call_stream is an async generator function (declared as an iterator).
        return cast(
            AsyncGenerator[dict[str, Any], None],
            self.client.call_stream(message, timeout=timeout),
        )

    def route(self, event: CloudEvent) -> Route:
        """Where a native event goes (:meth:`Bus.route <a2a_bus.bus.Bus.route>`); raises
        :class:`~a2a_bus.core.routing.RoutingError`, -32002 for an agent discovery does not know."""
        return self.bus.route(event)

    async def publish(self, event: CloudEvent, route: Route) -> None:
        """Put a native event on the bus without waiting for any answer."""
        await self.bus.transport.publish(route.topic, event, key=route.key)

    async def watch(self, subject: str, handler: Handler) -> Subscription:
        """A live view of ``subject`` (wildcards allowed) in a fresh consumer group."""
        topics = self.bus.topics
        target = topics.subscription(subject)
        group = f"{topics.prefix}.tail.{new_id()}"
        return await self.bus.transport.subscribe(
            [target] if isinstance(target, str) else target, group, handler, durable=False
        )

    async def read(
        self, subject: str, *, limit: int, cursor: str | None, newest: bool
    ) -> EventPage:
        """A page of the events ``subject`` retains (see :meth:`AsyncClient.read`)."""
        return await self.client.read(subject, limit=limit, cursor=cursor, newest=newest)

    # -- discovery ------------------------------------------------------------------

    def agent_for(self, event: CloudEvent) -> str | None:
        """The agent an event reaches: its ``targetagent``, else the method's owner."""
        target = event.get_extension(ext.TARGET_AGENT)
        if isinstance(target, str):
            return target
        if event.get_subject() is not None:
            return None
        method = event.get_extension(ext.METHOD)
        return self.bus.directory.method_owner(method) if isinstance(method, str) else None

    def streams(self, event: CloudEvent, agent: str | None) -> bool:
        """True when the method the event calls yields a response stream."""
        method = event.get_extension(ext.METHOD)
        card = self.bus.directory.card(agent) if agent is not None else None
        if card is None or not isinstance(method, str):
            return False
        return any(
            entry.get("name") == method and entry.get("streaming") == "response"
            for entry in card.get("methods", ())
        )

    def cards(self) -> list[dict[str, Any]]:
        return self.bus.directory.cards()

    def card(self, agent_id: str) -> dict[str, Any] | None:
        return self.bus.directory.card(agent_id)
