"""Raw JSON-RPC over Kafka in exactly_once mode: answers in transactions, read by a
plain aiokafka consumer with ``isolation_level="read_committed"``."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from a2a_bus.bus import Bus
from a2a_bus.gateway.ingress import Ingress

from .agents import Spec

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

WAIT = 60.0  # seconds; a guard against hangs, never a performance limit


@pytest.fixture
async def ingress(kafka_bootstrap: str) -> AsyncIterator[Ingress]:
    prefix = f"t{uuid.uuid4().hex[:10]}"
    bus = Bus.kafka(
        kafka_bootstrap,
        bus_options={"prefix": prefix},
        metadata_max_age_ms=1000,
        delivery="exactly_once",
    )
    async with bus:
        await bus.aspawn(Spec)
        async with Ingress(bus.service, timeout=WAIT) as running:
            yield running


async def read_committed(
    bootstrap: str, topic: str, count: int
) -> tuple[list[dict[str, object]], int]:
    """The first ``count`` committed records of ``topic`` (fewer if they do not come),
    and the sum of the offsets the partitions read end at."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    found: list[dict[str, object]] = []
    ends = 0
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT
        while len(found) < count and loop.time() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for records in batches.values():
                found.extend(orjson.loads(r.value) for r in records if r.value is not None)
        ends = sum((await consumer.end_offsets(list(consumer.assignment()))).values())
    finally:
        await consumer.stop()
    return found, ends


async def test_raw_requests_get_one_committed_answer_each(
    kafka_bootstrap: str, ingress: Ingress
) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        for i in range(50):
            request = {"jsonrpc": "2.0", "method": "subtract", "params": [i, 1], "id": i}
            await producer.send_and_wait(ingress.topic, orjson.dumps(request))
        await producer.send_and_wait(ingress.topic, b"{not json")
    finally:
        await producer.stop()
    answers, ends = await read_committed(kafka_bootstrap, ingress.reply_topic, 51)
    results = sorted((a["id"], a["result"]) for a in answers if "result" in a)  # type: ignore[index]
    assert results == [(i, i - 1) for i in range(50)]
    errors = [a for a in answers if "error" in a]
    assert [e["error"]["code"] for e in errors] == [-32700]  # type: ignore[index]
    # Written in transactions: each commit's marker takes an offset too.
    assert ends > len(answers)
