"""The ingress answers bad input on both transports: records that are no event
reach it through the transport's ``on_undecodable`` after they are dead-lettered.

The Kafka variant runs on the real broker; kcat-driven tests are in test_ingress.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from a2a_bus.bus import Bus
from a2a_bus.gateway.ingress import Ingress
from a2a_bus.protocol import new_event
from a2a_bus.transport.base import Delivery, Transport, Undecodable
from a2a_bus.transport.dead_letters import DLQ_REASON

pytestmark = pytest.mark.timeout(120)

WAIT = 30.0  # a guard against hangs, never a performance limit


@pytest.fixture
def bus(either_bus: Bus) -> Bus:
    return either_bus  # on each transport (conftest)


class Inbox:
    """Collects what a subscription hands over."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self.undecodable: list[Undecodable] = []
        self.changed = asyncio.Event()

    async def deliver(self, delivery: Delivery) -> None:
        self.deliveries.append(delivery)
        self.changed.set()

    async def reject(self, record: Undecodable) -> None:
        self.undecodable.append(record)
        self.changed.set()

    async def until(self, done: Any) -> None:
        async with asyncio.timeout(WAIT):
            while not done():
                self.changed.clear()
                await self.changed.wait()


async def test_a_subscription_hands_undecodable_records_over_after_the_dead_letter(
    bus: Bus,
) -> None:
    transport: Transport = bus.transport
    topic = f"{bus.topics.prefix}.raw.in"
    inbox = Inbox()
    await transport.subscribe([topic], "g", inbox.deliver, on_undecodable=inbox.reject)
    await transport.publish_raw(topic, b"{not json", key=b"k", headers=[("x-mine", b"1")])
    batch = [{"jsonrpc": "2.0", "method": "a", "id": 1}, {"jsonrpc": "1.0", "id": 2}]
    await transport.publish_raw(topic, orjson.dumps(batch), key=b"k")
    await transport.publish(topic, new_event({"type": "t", "source": "s"}, {}), key=b"k")

    await inbox.until(lambda: len(inbox.undecodable) == 2 and len(inbox.deliveries) == 2)
    garbage, bad_element = inbox.undecodable
    assert (garbage.topic, garbage.key) == (topic, b"k")
    assert ("x-mine", b"1") in garbage.headers
    assert [f.code for f in garbage.failures] == [-32700]
    assert [f.code for f in bad_element.failures] == [-32600]
    assert bad_element.offset == garbage.offset + 1
    assert [d.event.get_type() for d in inbox.deliveries][1] == "t"
    assert transport.dead_lettered == 2  # before they were handed over


async def test_a_failing_on_undecodable_is_logged_and_does_not_stop_the_subscription(
    bus: Bus, caplog: pytest.LogCaptureFixture
) -> None:
    transport: Transport = bus.transport
    topic = f"{bus.topics.prefix}.raw.failing"
    inbox = Inbox()

    async def explode(record: Undecodable) -> None:
        raise RuntimeError("the hook broke")

    await transport.subscribe([topic], "g", inbox.deliver, on_undecodable=explode)
    await transport.publish_raw(topic, b"garbage", key=b"k")
    await transport.publish_raw(topic, b'{"jsonrpc": "2.0", "method": "ok"}', key=b"k")
    await inbox.until(lambda: len(inbox.deliveries) == 1)
    assert "on_undecodable failed" in caplog.text
    assert transport.dead_lettered == 1


async def test_the_ingress_answers_bad_input_and_dead_letters_it(bus: Bus) -> None:
    replies = Inbox()
    async with Ingress(bus.service, timeout=WAIT) as ingress:
        await bus.transport.subscribe(
            [ingress.reply_topic], "replies", replies.deliver, from_beginning=True
        )
        await bus.transport.publish_raw(ingress.topic, b"{not json")
        batch = [
            {"jsonrpc": "2.0", "method": "subtract", "params": [5, 3], "id": "good"},
            {"jsonrpc": "2.0", "method": 7, "id": "bad"},
        ]
        await bus.transport.publish_raw(ingress.topic, orjson.dumps(batch))
        await replies.until(lambda: len(replies.deliveries) == 3)
    answers = sorted(
        (str(m.get("id")), m.get("result", m.get("error", {}).get("code")))
        for m in (d.event.get_data() for d in replies.deliveries)
        if isinstance(m, dict)
    )
    assert answers == [("None", -32700), ("None", -32600), ("good", 2)]
    assert bus.transport.dead_lettered == 2


async def test_a_notification_over_the_payload_bound_is_dead_lettered_as_too_large(
    bus: Bus,
) -> None:
    # Under Kafka's record limit as raw JSON-RPC, over the bus's payload bound as data.
    text = "x" * 1_010_000
    message = {"jsonrpc": "2.0", "method": "subtract", "params": {"text": text}}
    letters = Inbox()
    await bus.transport.subscribe([bus.topics.dlq], "letters", letters.deliver, from_beginning=True)
    async with Ingress(bus.service, timeout=WAIT) as ingress:
        await bus.transport.publish_raw(ingress.topic, orjson.dumps(message))
        await letters.until(lambda: len(letters.deliveries) == 1)
    [letter] = letters.deliveries
    reason = dict(letter.headers)[DLQ_REASON].decode()
    assert reason.startswith("too-large: Request too large: params is "), reason
