"""The Kafka ingress takes no response: a response event, or a raw JSON-RPC response,
produced on ``<prefix>.ingress`` is dead-lettered as ``forbidden: ...`` and never
reaches a reply topic, so no producer answers another caller's pending request with a
result of its choosing (request ids are ``<process id>-<counter>``: easy to guess once
one is seen). ``POST /events`` refuses the same (test_events_reply_to.py); the rule
is ``routing.outside_refusal``. On both transports (Kafka: the real broker).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from a2a_bus.bus import Bus
from a2a_bus.gateway.ingress import Ingress
from a2a_bus.transport.base import Delivery
from a2a_bus.transport.dead_letters import DLQ_REASON

from .agents import RELEASE, Slow
from .conftest import WAIT

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def slow_bus(either_bus: Bus) -> AsyncIterator[Bus]:
    RELEASE.clear()
    await either_bus.aspawn(Slow)
    yield either_bus
    RELEASE.set()


async def pending_request(bus: Bus) -> str:
    """The id an attacker would guess; read here so the test is deterministic."""

    async def pending() -> list[str]:
        while not bus.dispatcher.correlator._pending:
            await asyncio.sleep(0.01)
        return list(bus.dispatcher.correlator._pending)

    (request_id,) = await asyncio.wait_for(pending(), WAIT)
    return request_id


def forged_event(bus: Bus, request_id: str) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": "forged-2",
        "source": "/outside",
        "type": f"{bus.adaptor.prefix}.common.response",
        "mcptype": "response",
        "collaborationid": request_id,
        "replyto": bus.reply_topic,
        "datacontenttype": "application/json",
        "data": {"jsonrpc": "2.0", "result": "forged", "id": 1},
    }


def forged_raw(bus: Bus, request_id: str) -> dict[str, Any]:
    # raw JSON-RPC: the response event made of it carries the id as collaborationid
    return {"jsonrpc": "2.0", "result": "forged", "id": request_id}


@pytest.mark.parametrize("forge", [forged_event, forged_raw], ids=["event", "raw"])
async def test_an_ingress_response_cannot_answer_another_callers_request(
    slow_bus: Bus, forge: Any
) -> None:
    bus = slow_bus
    letters: list[Delivery] = []

    async def letter(delivery: Delivery) -> None:
        letters.append(delivery)

    await bus.transport.subscribe([bus.topics.dlq], "letters", letter, from_beginning=True)
    client = bus.async_client()
    async with Ingress(bus.service, timeout=WAIT) as ingress:
        victim = asyncio.create_task(client.request("slow", "wait", [], timeout=WAIT))
        request_id = await pending_request(bus)
        await bus.transport.publish_raw(ingress.topic, orjson.dumps(forge(bus, request_id)))

        async def refused_or_answered() -> None:
            while not letters and not victim.done():
                await asyncio.sleep(0.01)

        await asyncio.wait_for(refused_or_answered(), WAIT)
        RELEASE.set()
        result = await asyncio.wait_for(victim, WAIT)
    assert result == "real"
    [dead] = letters
    reason = dict(dead.headers)[DLQ_REASON].decode()
    assert reason.startswith("forbidden: a response cannot enter the bus from outside"), reason
