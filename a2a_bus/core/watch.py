"""Live views: every event on a subject from now on, for a reader that keeps nothing."""

from __future__ import annotations

from a2a_bus.core.context import BusContext
from a2a_bus.protocol import new_id
from a2a_bus.transport.base import Handler, Subscription


async def watch(context: BusContext, subject: str, handler: Handler) -> Subscription:
    """Hand every event published on ``subject`` (wildcards allowed) from now on to
    ``handler``, in a consumer group of its own that keeps no progress.

    RoutingError for an invalid subject.
    """
    topics = context.topics
    target = topics.subscription(subject)
    group = f"{topics.prefix}.tail.{new_id()}"
    return await context.transport.subscribe(
        [target] if isinstance(target, str) else target, group, handler, durable=False
    )
