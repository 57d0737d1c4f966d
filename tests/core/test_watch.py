"""Live views (``watch``): what is published from now on, and no topic made by reading.

Kafka runs on the real broker; whether a topic exists is asked of the transport."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from a2a_bus.bus import Bus
from a2a_bus.core.watch import watch
from a2a_bus.transport.base import Delivery
from tests.buses import WAIT, eventually, make_bus

__all__ = ["make_bus"]  # the fixture

pytestmark = pytest.mark.timeout(120)


async def test_a_view_of_an_unused_subject_creates_no_topic_and_sees_its_first_event(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    bus = await make_bus()
    seen: list[object] = []

    async def on_event(delivery: Delivery) -> None:
        seen.append(delivery.event.get_data())

    subscription = await watch(bus.context, "never.used", on_event)
    try:
        assert await bus.transport.end_offsets(bus.topics.subject("never.used")) == {}
        await bus.async_client().publish("never.used", {"n": 1})
        await eventually(lambda: seen, "the view to see the first event")
        assert seen == [{"n": 1}]
    finally:
        await asyncio.wait_for(subscription.stop(), WAIT)


async def test_a_view_of_a_used_subject_sees_only_what_comes_after_it_opened(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    bus = await make_bus()
    client = bus.async_client()
    await client.publish("news.sport", {"n": 0})
    seen: list[object] = []

    async def on_event(delivery: Delivery) -> None:
        seen.append(delivery.event.get_data())

    subscription = await watch(bus.context, "news.sport", on_event)
    try:
        await client.publish("news.sport", {"n": 1})
        await eventually(lambda: seen, "the view to see the later event")
        assert seen == [{"n": 1}]
    finally:
        await asyncio.wait_for(subscription.stop(), WAIT)
