"""The Kafka benchmark's request/response paths work on a real broker: each answers
every request of a concurrent burst, and the floor commits what it answered over
topics shaped as the bus's (its figures would mean nothing otherwise)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from a2a_bus.bench.kafka_floor import FloorRequests
from a2a_bus.bench.kafka_paths import BusRequests, TransportRequests
from a2a_bus.bench.kafka_raw import RawPingPong
from a2a_bus.bench.kafka_topics import delete_run_topics
from a2a_bus.bench.load import Path
from a2a_bus.transport.kafka.config import KafkaSettings

WAIT = 60.0  # seconds; a guard against hangs, never a performance limit
BURST = 40


async def committed(bootstrap: str, group: str, topic: str) -> int:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
        return sum(meta.offset for tp, meta in offsets.items() if tp.topic == topic)
    finally:
        await admin.close()


@pytest.mark.kafka
@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["raw", "bus", "transport", "floor"])
async def test_a_benchmark_path_answers_a_concurrent_burst(kafka_bootstrap: str, kind: str) -> None:
    run_id = uuid.uuid4().hex[:8]
    paths: dict[str, type] = {
        "raw": RawPingPong,
        "bus": BusRequests,
        "transport": TransportRequests,
        "floor": FloorRequests,
    }
    path: Path = paths[kind](kafka_bootstrap, run_id)
    await path.start()
    try:
        await asyncio.wait_for(asyncio.gather(*(path.call() for _ in range(BURST))), WAIT)
        if isinstance(path, FloorRequests):
            group = f"{path.requests}.server"
            for _ in range(100):  # the commit of the last answers follows the next fetch
                if await committed(kafka_bootstrap, group, path.requests) == BURST:
                    break
                await asyncio.sleep(0.2)
            assert await committed(kafka_bootstrap, group, path.requests) == BURST
            assert not path.waiting
    finally:
        await path.stop()
        await delete_run_topics(kafka_bootstrap, run_id)


async def committed_by_partition(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
        return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic}
    finally:
        await admin.close()


@pytest.mark.kafka
@pytest.mark.timeout(180)
async def test_the_floor_spreads_requests_over_an_inbox_s_partitions_and_replies_on_one(
    kafka_bootstrap: str,
) -> None:
    """The floor's topics are shaped as the bus's, so the ratio compares like with
    like: requests with their own ids over an agent inbox's partitions, answers on
    a one-partition reply topic."""
    run_id = uuid.uuid4().hex[:8]
    path = FloorRequests(kafka_bootstrap, run_id)
    await path.start()
    try:
        await asyncio.wait_for(asyncio.gather(*(path.call() for _ in range(BURST))), WAIT)
        assert len(await path.producer.partitions_for(path.replies)) == 1
        inbox = KafkaSettings().inbox_partitions
        assert len(await path.producer.partitions_for(path.requests)) == inbox
        group = f"{path.requests}.server"
        for _ in range(100):  # the commit of the last answers follows the next fetch
            counts = await committed_by_partition(kafka_bootstrap, group, path.requests)
            if sum(counts.values()) == BURST:
                break
            await asyncio.sleep(0.2)
        assert sum(counts.values()) == BURST
        assert sorted(counts) == list(range(inbox))
        assert all(count > 0 for count in counts.values())
    finally:
        await path.stop()
        await delete_run_topics(kafka_bootstrap, run_id)


@pytest.mark.kafka
@pytest.mark.timeout(180)
async def test_the_raw_baseline_makes_its_topics_whatever_the_broker_s_default(
    kafka_bootstrap: str,
) -> None:
    """Left to the broker, the raw path's topics took its ``num.partitions`` (and it
    warned that they did not exist yet); made up front, they have the path's own."""
    run_id = uuid.uuid4().hex[:8]
    path = RawPingPong(kafka_bootstrap, run_id)
    path.partitions = 2  # not this broker's default (3), nor aiokafka's (1)
    await path.start()
    try:
        await asyncio.wait_for(asyncio.gather(*(path.call() for _ in range(BURST))), WAIT)
        assert len(await path.producer.partitions_for(path.requests)) == 2
        assert len(await path.producer.partitions_for(path.replies)) == 2
    finally:
        await path.stop()
        await delete_run_topics(kafka_bootstrap, run_id)
