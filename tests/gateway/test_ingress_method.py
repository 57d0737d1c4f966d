"""The Kafka ingress: a structured CloudEvent without ``a2amethod`` calls the method its
type names (PROTOCOL.md section 3), on both transports (Kafka: the real broker)."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from a2a_bus.bus import Bus
from a2a_bus.ingress import Ingress
from a2a_bus.transport.base import Delivery

pytestmark = pytest.mark.timeout(120)

WAIT = 30.0  # a guard against hangs, never a performance limit


@pytest.fixture
def bus(either_bus: Bus) -> Bus:
    return either_bus  # on each transport (conftest)


async def test_a_request_event_without_a2amethod_is_answered(bus: Bus) -> None:
    replies: list[Any] = []

    async def deliver(delivery: Delivery) -> None:
        replies.append(delivery.event.get_data())

    async with Ingress(bus, timeout=WAIT) as ingress:
        await bus.transport.subscribe(
            [ingress.reply_topic], "replies", deliver, from_beginning=True
        )
        event = {
            "specversion": "1.0",
            "id": "native-1",
            "source": "/kcat",
            "type": f"{bus.adaptor.prefix}.subtract.req",
            "mcptype": "request",
            "datacontenttype": "application/json",
            "data": [42, 23],
        }
        await bus.transport.publish_raw(ingress.topic, orjson.dumps(event))

        async def answered() -> None:
            while not replies:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(answered(), WAIT)
    assert replies == [{"jsonrpc": "2.0", "result": 19, "id": "native-1"}]
