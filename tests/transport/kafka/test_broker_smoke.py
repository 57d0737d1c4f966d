"""The broker the suite runs on works with aiokafka's idempotent producer and groups.

If this fails, every other Kafka test is suspect: look at the broker first.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from aiokafka import TopicPartition
from aiokafka.structs import ConsumerRecord

from tests.kafka_records import group_consumer, produce, read

pytestmark = pytest.mark.kafka

RECORDS = 60
KEYS = 6

Record = tuple[bytes, bytes, list[tuple[str, bytes]]]


def make_records() -> list[Record]:
    return [
        (
            f"key-{i % KEYS}".encode(),
            f"value-{i}".encode(),
            [("seq", str(i).encode()), ("origin", b"smoke")],
        )
        for i in range(RECORDS)
    ]


async def test_records_round_trip_with_keys_headers_and_commits(
    kafka_bootstrap: str, unique_topic: str
) -> None:
    sent = make_records()
    written = await produce(kafka_bootstrap, unique_topic, sent)
    assert [meta.topic for meta in written] == [unique_topic] * RECORDS

    consumer = group_consumer(kafka_bootstrap, unique_topic)
    await consumer.start()
    try:
        received = await read(consumer, RECORDS)
        await consumer.commit()
        partitions = [TopicPartition(unique_topic, p) for p in {m.partition for m in written}]
        committed = {tp: await consumer.committed(tp) for tp in partitions}
        ends = await consumer.end_offsets(partitions)
    finally:
        await consumer.stop()

    # Every record once, with its key, value and headers intact.
    got = sorted(((r.key, r.value, list(r.headers)) for r in received), key=lambda r: r[1])
    assert got == sorted(((k, v, h) for k, v, h in sent), key=lambda r: r[1])
    assert len(received) == RECORDS

    # A key always lands in one partition, and keeps its order there.
    by_key: dict[bytes | None, list[ConsumerRecord]] = defaultdict(list)
    for record in received:
        by_key[record.key].append(record)
    for key, records in by_key.items():
        assert len({r.partition for r in records}) == 1, key
        sequence = [int(dict(r.headers)["seq"]) for r in records]
        assert sequence == sorted(sequence), key

    # Where the producer said each record went is where the consumer found it.
    placed = {(m.partition, m.offset) for m in written}
    assert {(r.partition, r.offset) for r in received} == placed

    # The manual commit covered everything that was read.
    assert committed == ends
