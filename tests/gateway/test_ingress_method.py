"""The Kafka ingress: a structured CloudEvent without ``a2amethod`` calls the method its
type names (PROTOCOL.md section 3), on both transports (Kafka: the real broker)."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from a2a_bus.bus import Bus

from .conftest import WAIT, ingress_replies

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def bus(either_bus: Bus) -> Bus:
    return either_bus  # on each transport (conftest)


async def test_a_request_event_without_a2amethod_is_answered(bus: Bus) -> None:
    async with ingress_replies(bus) as (ingress, replies):
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
