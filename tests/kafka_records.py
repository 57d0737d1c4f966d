"""Helpers for tests that produce and read raw records on a real Kafka broker."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import ConsumerRecord, RecordMetadata

#: Upper bound for any single broker round trip in these tests (never a pass criterion).
WAIT_SECONDS = 60

Headers = Sequence[tuple[str, bytes]]


async def produce(
    bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes, Headers]]
) -> list[RecordMetadata]:
    """Write records in order with an idempotent, acks=all producer; their metadata."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    await producer.start()
    try:
        pending = [
            await producer.send(topic, value, key=key, headers=list(headers))
            for key, value, headers in records
        ]
        return list(await asyncio.wait_for(asyncio.gather(*pending), WAIT_SECONDS))
    finally:
        await producer.stop()


async def read(consumer: AIOKafkaConsumer, count: int) -> list[ConsumerRecord]:
    """The next ``count`` records of a started consumer (TimeoutError if they never come)."""
    received: list[ConsumerRecord] = []
    async with asyncio.timeout(WAIT_SECONDS):
        while len(received) < count:
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                received.extend(batch)
    return received


def group_consumer(bootstrap: str, topic: str) -> AIOKafkaConsumer:
    """A consumer in its own group, from the earliest offset, committing by hand."""
    return AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"{topic}-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
