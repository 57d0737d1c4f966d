"""Live views: every event on a subject from now on, for a reader that keeps nothing.

A view creates no topic: subscribing to a topic by name would create it, so a
reader (a token allowed to read, say) could make topics. A view of a subject
never published on subscribes by a pattern matching only its topic's name, which
creates nothing, and reads the topic from its first record once it appears.
"""

from __future__ import annotations

from a2a_bus.core.context import BusContext
from a2a_bus.core.routing import subject_regex
from a2a_bus.protocol import new_id
from a2a_bus.transport.base import Handler, Subscription, TopicPattern


async def watch(context: BusContext, subject: str, handler: Handler) -> Subscription:
    """Hand every event published on ``subject`` (wildcards allowed) from now on to
    ``handler``, in a consumer group of its own that keeps no progress.

    RoutingError for an invalid subject.
    """
    topics = context.topics
    target = topics.subscription(subject)
    group = f"{topics.prefix}.tail.{new_id()}"
    transport = context.transport
    if isinstance(target, TopicPattern):
        return await transport.subscribe(target, group, handler, durable=False)
    if not await transport.end_offsets(target):  # no topic yet: wait for it, make none
        pattern = TopicPattern(subject_regex(target))
        return await transport.subscribe(pattern, group, handler, durable=False)
    return await transport.subscribe([target], group, handler, durable=False)
