"""The Kafka ingress applies the rule of ``POST /events`` (``routing.outside_refusal``):
an event naming its own ``replyto`` is dead-lettered as ``forbidden: ...`` (a request
is answered -32600 on its reply topic first), so no producer aims an agent's answer at
a topic of its choosing; so is one with a control character in a string attribute.
A request without either is answered as before. On both
transports (Kafka: the real broker).
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from a2a_bus.bus import Bus
from a2a_bus.gateway.ingress import REPLY_TO_HEADER, Ingress
from a2a_bus.transport.base import Delivery
from a2a_bus.transport.dead_letters import DLQ_REASON

from .conftest import WAIT

pytestmark = pytest.mark.timeout(120)


class Inbox:
    """What a subscription delivers."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []

    async def deliver(self, delivery: Delivery) -> None:
        self.deliveries.append(delivery)

    async def until(self, count: int) -> list[Delivery]:
        async def wait() -> None:
            while len(self.deliveries) < count:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(wait(), WAIT)
        return self.deliveries


async def watch(bus: Bus, topic: str) -> Inbox:
    inbox = Inbox()
    await bus.transport.subscribe([topic], f"watch.{topic}", inbox.deliver, from_beginning=True)
    return inbox


def structured(bus: Bus, **attributes: Any) -> bytes:
    event = {
        "specversion": "1.0",
        "id": "outside-1",
        "source": "/outside",
        "type": f"{bus.adaptor.prefix}.subtract.req",
        "mcptype": "request",
        "a2amethod": "subtract",
        "targetagent": "spec",
        "datacontenttype": "application/json",
        "data": [5, 1],
        **attributes,
    }
    return orjson.dumps(event)


async def refused(bus: Bus, record: bytes) -> tuple[dict[str, Any], str]:
    """Produce ``record`` on the ingress: the answer on its reply topic, and the reason
    its dead letter gives."""
    letters = await watch(bus, bus.topics.dlq)
    async with Ingress(bus.service, timeout=WAIT) as ingress:
        replies = await watch(bus, ingress.reply_topic)
        await bus.transport.publish_raw(ingress.topic, record)
        [reply] = await replies.until(1)
        [letter] = await letters.until(1)
    answer = reply.event.get_data()
    assert isinstance(answer, dict)
    return answer, dict(letter.headers)[DLQ_REASON].decode()


async def test_a_request_naming_its_replyto_is_answered_with_an_error_and_dead_lettered(
    either_bus: Bus,
) -> None:
    bus = either_bus
    subject = await watch(bus, bus.topics.subject("news.x"))
    answer, reason = await refused(bus, structured(bus, replyto=bus.topics.subject("news.x")))
    assert answer["id"] == "outside-1"
    assert answer["error"]["code"] == -32600
    assert "replyto is set by the bus" in answer["error"]["data"]
    assert reason.startswith("forbidden: replyto is set by the bus"), reason
    assert subject.deliveries == []


async def test_a_notification_carrying_a_request_and_a_replyto_is_dead_lettered(
    either_bus: Bus,
) -> None:
    bus = either_bus
    subject = await watch(bus, bus.topics.subject("news.x"))
    letters = await watch(bus, bus.topics.dlq)
    message = {"jsonrpc": "2.0", "method": "subtract", "params": [5, 1], "id": 1}
    record = structured(
        bus, mcptype="notification", data=message, replyto=bus.topics.subject("news.x")
    )
    async with Ingress(bus.service, timeout=WAIT) as ingress:
        await bus.transport.publish_raw(ingress.topic, record)
        [letter] = await letters.until(1)
        # spec handles one message at a time: a later call answered means an answer
        # to the record above would have been written already
        client = bus.async_client()
        assert await asyncio.wait_for(client.request("spec", "subtract", [2, 1]), WAIT) == 1
    assert dict(letter.headers)[DLQ_REASON].decode().startswith("forbidden: replyto")
    assert subject.deliveries == []


async def test_a_request_without_replyto_is_still_answered_on_its_reply_to(
    either_bus: Bus,
) -> None:
    bus = either_bus
    topic = f"{bus.topics.prefix}-replies"  # outside the bus's own topics
    replies = await watch(bus, topic)
    async with Ingress(bus.service, timeout=WAIT) as ingress:
        headers = [(REPLY_TO_HEADER, topic.encode())]
        await bus.transport.publish_raw(ingress.topic, structured(bus), headers=headers)
        [reply] = await replies.until(1)
    assert reply.event.get_data() == {"jsonrpc": "2.0", "result": 4, "id": "outside-1"}


@pytest.mark.parametrize(
    "record",
    [
        lambda bus: structured(bus, source="/out\nside"),
        lambda bus: orjson.dumps(
            {"jsonrpc": "2.0", "method": "sub\x00tract", "params": [5, 1], "id": "outside-1"}
        ),
    ],
    ids=["structured-source", "raw-method"],
)
async def test_a_request_with_a_control_character_is_answered_with_an_error_and_dead_lettered(
    either_bus: Bus, record: Any
) -> None:
    answer, reason = await refused(either_bus, record(either_bus))
    assert answer["id"] == "outside-1"
    assert answer["error"]["code"] == -32600
    assert "control character" in answer["error"]["data"]
    assert reason.startswith("forbidden: attribute "), reason
