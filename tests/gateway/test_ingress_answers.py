"""What the Kafka ingress answers, on both transports: bad input (records that are no
event reach it through the transport's ``on_undecodable`` after they are
dead-lettered, an integer outside -2**63 .. 2**64-1 is refused with id null and
dead-lettered), and a native CloudEvent by its type alone (PROTOCOL.md section 3:
without ``a2amethod`` the type names the method; without ``mcptype`` a type ending
in ``.req`` or ``.stream`` is a request, answered on the reply topic, and a type
without the suffix is a notification and gets no answer).

The Kafka variant runs on the real broker; kcat-driven tests are in test_ingress.py.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer

from a2a_bus.bus import Bus
from a2a_bus.gateway.ingress import Ingress
from a2a_bus.protocol import new_event
from a2a_bus.transport.base import Delivery, Transport, Undecodable
from a2a_bus.transport.dead_letters import DLQ_REASON

from .agents import Spec
from .conftest import HUGE, HUGE_ID_REQUEST, OUT_OF_RANGE, ingress_replies, refused_as_out_of_range

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
    # The invalid element's id is readable: it is answered with it (null only for
    # the record that is not JSON).
    assert answers == [("None", -32700), ("bad", -32600), ("good", 2)]
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


# -- a structured CloudEvent without a2amethod calls the method its type names -------------


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


# -- a native CloudEvent that is a request is answered by its type alone -------------------


async def _ask(bus: Bus, record: bytes, headers: list[tuple[str, bytes]]) -> list[Any]:
    """What the ingress answers to ``record`` (a marker request after it is answered
    too: once its answer is in, the first record had its chance)."""
    async with ingress_replies(bus) as (ingress, replies):
        marker = {"jsonrpc": "2.0", "method": "subtract", "params": [1, 1], "id": "marker"}
        await bus.transport.publish_raw(ingress.topic, record, key=b"k", headers=headers)
        await bus.transport.publish_raw(ingress.topic, orjson.dumps(marker), key=b"k")

        async def answered() -> None:
            while not any(isinstance(r, dict) and r.get("id") == "marker" for r in replies):
                await asyncio.sleep(0.01)

        await asyncio.wait_for(answered(), WAIT)
    return [r for r in replies if not (isinstance(r, dict) and r.get("id") == "marker")]


def _structured(bus: Bus, type_suffix: str, id: str) -> tuple[bytes, list[tuple[str, bytes]]]:
    event = {
        "specversion": "1.0",
        "id": id,
        "source": "/outside",
        "type": f"{bus.adaptor.prefix}.subtract{type_suffix}",  # no mcptype
        "datacontenttype": "application/json",
        "data": {"minuend": 42, "subtrahend": 23},
    }
    return orjson.dumps(event), [("content-type", b"application/cloudevents+json")]


async def test_a_structured_request_named_by_its_type_is_answered(either_bus: Bus) -> None:
    replies = await _ask(either_bus, *_structured(either_bus, ".req", "by-type-1"))
    assert replies == [{"jsonrpc": "2.0", "result": 19, "id": "by-type-1"}]


async def test_a_binary_request_named_by_its_type_is_answered(either_bus: Bus) -> None:
    headers = [
        ("ce_specversion", b"1.0"),
        ("ce_id", b"by-type-2"),
        ("ce_source", b"/outside"),
        ("ce_type", f"{either_bus.adaptor.prefix}.subtract.req".encode()),
        ("content-type", b"application/json"),
    ]
    replies = await _ask(either_bus, b"[42, 23]", headers)
    assert replies == [{"jsonrpc": "2.0", "result": 19, "id": "by-type-2"}]


async def test_an_event_whose_type_names_no_request_is_not_answered(either_bus: Bus) -> None:
    replies = await _ask(either_bus, *_structured(either_bus, "", "by-type-3"))
    assert replies == []


# -- integers outside -2**63 .. 2**64-1 are refused ----------------------------------------


async def test_the_ingress_answers_and_dead_letters_a_huge_integer(either_bus: Bus) -> None:
    bus = either_bus
    async with ingress_replies(bus) as (ingress, replies):
        await bus.transport.publish_raw(ingress.topic, HUGE_ID_REQUEST)

        async def answered() -> None:
            while not replies:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(answered(), WAIT)
    [answer] = replies
    assert refused_as_out_of_range(answer, HUGE), answer
    assert bus.transport.dead_lettered == 1  # before the answer (the reason: below)


@pytest.mark.kafka
async def test_an_outside_consumer_reads_the_refusal_with_id_null(kafka_bootstrap: str) -> None:
    """The answer's bytes as an outside Kafka consumer reads them (no bus decoding),
    and the dead letter's reason."""
    prefix = f"r{uuid.uuid4().hex[:10]}"
    bus = Bus.kafka(kafka_bootstrap, bus_options={"prefix": prefix}, metadata_max_age_ms=1000)
    async with bus:
        await bus.aspawn(Spec)
        async with Ingress(bus.service, timeout=WAIT) as ingress:
            await bus.transport.publish_raw(ingress.topic, HUGE_ID_REQUEST)
            consumer = AIOKafkaConsumer(
                ingress.reply_topic,
                bus.topics.dlq,
                bootstrap_servers=kafka_bootstrap,
                auto_offset_reset="earliest",
                group_id=None,
            )
            await asyncio.wait_for(consumer.start(), WAIT)
            records: dict[str, Any] = {}
            try:
                while len(records) < 2:
                    record = await asyncio.wait_for(consumer.getone(), WAIT)
                    records[record.topic] = record
            finally:
                await asyncio.wait_for(consumer.stop(), WAIT)
    answer = records[ingress.reply_topic]
    assert refused_as_out_of_range(json.loads(answer.value), HUGE), answer.value
    reason = dict(records[bus.topics.dlq].headers)[DLQ_REASON].decode()
    assert f"integer {HUGE} {OUT_OF_RANGE}" in reason, reason
