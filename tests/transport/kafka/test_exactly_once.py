"""exactly_once across ``kill -9``: a raw Kafka client sees one answer per request.

Two ``a2a-bus serve`` worker processes with ``A2A_DELIVERY=exactly_once``, each
with a replica of the agent and of the Kafka ingress; a plain aiokafka producer
writes raw JSON-RPC requests to the ingress topic, one worker is SIGKILLed part
way through, and a plain aiokafka consumer with ``isolation_level="read_committed"``
reads the reply topic. The handler appends a line per run to a file, so the test
also sees how often handlers ran (at least once: more after the kill).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from a2a_bus.core.routing import Topics
from tests.transport.kafka.test_broker_faults import ServeWorker

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(600)]

WAIT = 120.0  # upper bound on one wait; never a performance limit
TOTAL, KILL_AFTER = 2_000, 500
PARTITIONS = 3  # of the topics the workers create (the transport's default)
SETTINGS = {
    "A2A_DELIVERY": "exactly_once",
    # The broker's minimum: a killed worker's partitions move on soonest.
    "A2A_KAFKA_SESSION_TIMEOUT_MS": "6000",
    "A2A_KAFKA_HEARTBEAT_INTERVAL_MS": "500",
    # Longer than a killed worker's open transaction may hold read_committed readers.
    "A2A_REQUEST_TIMEOUT": "90",
}


@pytest.fixture
async def workers(kafka_bootstrap: str, tmp_path: Path) -> AsyncIterator[list[ServeWorker]]:
    prefix = f"eo{uuid.uuid4().hex[:10]}"
    log = tmp_path / "handled.jsonl"
    started = [
        ServeWorker(kafka_bootstrap, prefix, log, tmp_path / f"w{i}.err", SETTINGS)
        for i in range(2)
    ]
    try:
        for worker in started:
            await worker.start()
        yield started
    finally:
        for worker in started:
            await worker.stop()


async def produce_requests(bootstrap: str, topic: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for n in range(TOTAL):
            request = {"jsonrpc": "2.0", "method": "work", "params": {"n": n}, "id": n}
            await producer.send(topic, orjson.dumps(request), key=str(n).encode())
        await producer.flush()
    finally:
        await producer.stop()


async def committed_to_end(bootstrap: str, group: str, topic: str) -> None:
    """Wait until ``group`` committed the end of every partition of ``topic``."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        ends = await consumer.end_offsets(partitions)
        async with asyncio.timeout(WAIT):
            while [await consumer.committed(tp) for tp in partitions] != [
                ends[tp] for tp in partitions
            ]:
                await asyncio.sleep(0.5)
    finally:
        await consumer.stop()


async def test_kill_9_of_a_replica_leaves_one_committed_answer_per_raw_request(
    workers: list[ServeWorker], kafka_bootstrap: str
) -> None:
    topics = Topics(workers[0].prefix)
    reader = AIOKafkaConsumer(
        topics.ingress_reply,
        bootstrap_servers=kafka_bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        metadata_max_age_ms=1000,  # the reply topic appears with the first answer
    )
    await reader.start()
    answers: list[dict[str, Any]] = []
    try:
        await produce_requests(kafka_bootstrap, topics.ingress)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT
        killed = False
        while len({a.get("id") for a in answers}) < TOTAL and loop.time() < deadline:
            for records in (await reader.getmany(timeout_ms=500)).values():
                answers.extend(orjson.loads(r.value) for r in records if r.value is not None)
            if not killed and len(answers) >= KILL_AFTER:
                process = workers[0].process
                assert process is not None
                process.kill()  # SIGKILL: no drain, no commit, no abort
                killed = True
        assert killed
        # Every ingress record committed: no transaction may add an answer after this.
        await committed_to_end(kafka_bootstrap, topics.ingress, topics.ingress)
        ends = await reader.end_offsets(list(reader.assignment()))
        while [await reader.position(tp) for tp in ends] < [*ends.values()]:
            for records in (await reader.getmany(timeout_ms=500)).values():
                answers.extend(orjson.loads(r.value) for r in records if r.value is not None)
    finally:
        await reader.stop()

    by_id = Counter(a.get("id") for a in answers)
    assert sorted(by_id) == list(range(TOTAL))  # none missing
    assert [i for i, seen in by_id.items() if seen > 1] == []  # none twice
    assert all(a.get("result") == a.get("id") for a in answers)
    runs = workers[1].handled()
    assert set(runs) == set(range(TOTAL))
    # Handlers ran at least once each, some twice (their side effects are not undone).
    print(f"handler runs: {sum(runs.values())} for {TOTAL} requests")
    assert sum(runs.values()) >= TOTAL
