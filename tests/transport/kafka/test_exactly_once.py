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
import contextlib
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from a2a_bus.core.routing import Topics
from a2a_bus.protocol import from_kafka, new_event, to_kafka
from a2a_bus.transport import Delivery
from a2a_bus.transport.kafka import KafkaTransport
from a2a_bus.transport.kafka.answers import Answer, AnswerRoutes
from a2a_bus.transport.kafka.broker import KafkaMetrics
from a2a_bus.transport.kafka.commits import PartitionTracker
from a2a_bus.transport.kafka.config import KafkaSettings
from a2a_bus.transport.kafka.transactions import TransactionalCommitter
from tests.buses import eventually
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


async def test_an_answer_dropped_at_a_handover_is_given_when_the_record_comes_back(
    kafka_bootstrap: str,
) -> None:
    """The partition is handed over while its handler runs, so the answer is dropped
    (the record was not committed here). When the partition comes back to the same
    member, the record is handled and answered again, not skipped as a copy of the
    run whose answer was dropped: one committed answer, none lost."""
    uid = uuid.uuid4().hex[:10]
    topic, replies, group = f"eo.in.{uid}", f"eo.out.{uid}", f"eo.group.{uid}"
    tp = TopicPartition(topic, 0)
    transport = KafkaTransport(
        kafka_bootstrap,
        dlq_topic=f"eo.dlq.{uid}",
        delivery="exactly_once",
        drain_timeout=0.2,  # the handover does not wait for the handler
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    await transport.start()
    other = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=group,
        client_id="a",  # sorts before the transport's member: it takes the one partition
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    runs: list[int] = []
    let_go = asyncio.Event()

    async def handler(delivery: Delivery) -> None:
        runs.append(delivery.offset)
        if len(runs) == 1:
            await let_go.wait()
        answer = new_event({"type": "answer", "source": "tests"}, {"run": len(runs)})
        await transport.publish(replies, answer, answering=delivery)
        if len(runs) == 1:
            answered.set()

    answered = asyncio.Event()
    try:
        await transport.ensure_topics([topic, replies], partitions=1)
        subscription = await transport.subscribe([topic], group, handler)
        await transport.publish(topic, new_event({"type": "ask", "source": "tests"}, {}))
        await eventually(lambda: runs == [0], "the first run", timeout=WAIT)
        await asyncio.wait_for(other.start(), WAIT)
        await eventually(lambda: other.assignment() == {tp}, "the handover", timeout=WAIT)
        let_go.set()  # the first run answers after its partition was handed over
        await asyncio.wait_for(answered.wait(), WAIT)
        await asyncio.wait_for(other.stop(), WAIT)  # the partition comes back
        await eventually(lambda: subscription.assignment == {tp}, "the way back", timeout=WAIT)
        async with asyncio.timeout(WAIT):
            while (await transport.committed_offsets(group, [tp])).get(tp, (0, ""))[0] < 1:
                await asyncio.sleep(0.1)
        answers = await committed_answers(kafka_bootstrap, replies)
    finally:
        with contextlib.suppress(Exception):
            await other.stop()
        await transport.stop()
    assert runs == [0, 0]  # handled again where it came back
    assert answers == [{"run": 2}]


async def test_a_member_forgets_the_dropped_answers_its_partition_was_committed_past(
    kafka_bootstrap: str,
) -> None:
    """A record whose answer was dropped here at a handover, then answered and
    committed by the partition's next owner, never comes back here: when the
    partition is assigned here again from past it, its mark is forgotten."""
    uid = uuid.uuid4().hex[:10]
    topic, group = f"eo.in.{uid}", f"eo.group.{uid}"
    tp = TopicPartition(topic, 0)
    transport = KafkaTransport(kafka_bootstrap, dlq_topic=f"eo.dlq.{uid}", delivery="exactly_once")
    await transport.start()
    try:
        await transport.ensure_topics([topic], partitions=1)
        for n in range(3):
            await transport.publish(topic, new_event({"type": "ask", "source": "tests"}, {"n": n}))
        # Records 0 and 1 were handled here and their answers dropped at a handover,
        # record 2's too; the next owner answered 0 and 1 and committed past them.
        for offset in range(3):
            transport.answer_routes.dropped(topic, 0, offset)
        other = AIOKafkaConsumer(
            bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False
        )
        await other.start()
        try:
            other.assign([tp])
            await other.commit({tp: 2})
        finally:
            await other.stop()
        handled: list[int] = []

        async def handler(delivery: Delivery) -> None:
            handled.append(delivery.offset)

        await transport.subscribe([topic], group, handler)
        await eventually(lambda: handled == [2], "record 2 handled again", timeout=WAIT)
        assert not transport.answer_routes.was_dropped(topic, 0, 0)
        assert not transport.answer_routes.was_dropped(topic, 0, 1)
        # Record 2 came back and was handled: its mark went with its handling.
        assert transport.answer_routes.dropped_marks == 0
    finally:
        await transport.stop()


#: Commits cancelled, each at another point of its transaction.
CANCELS = 60


async def test_a_commit_cancelled_at_any_step_writes_each_answer_once(
    kafka_bootstrap: str,
) -> None:
    """A member stopping cancels its committer wherever it is. Cancelled before the
    commit, the transaction is aborted and its answers go into the next one;
    cancelled while it commits (which cannot be aborted any more), its end is
    waited for: either way every answer is committed once, and the committer
    commits again afterwards."""
    uid = uuid.uuid4().hex[:10]
    source, answers_topic, group = f"eo.src.{uid}", f"eo.ans.{uid}", f"eo.cancel.{uid}"
    tp = TopicPartition(source, 0)
    transport = KafkaTransport(kafka_bootstrap, dlq_topic=f"eo.dlq.{uid}")
    await transport.start()
    await transport.ensure_topics([source, answers_topic], partitions=1)
    await transport.stop()
    tracker = PartitionTracker(0)
    settings = KafkaSettings(bootstrap_servers=kafka_bootstrap, delivery="exactly_once")
    unstarted = AIOKafkaConsumer()  # the committer's writes do not use it
    committer = TransactionalCommitter(
        unstarted,
        group,
        {tp: tracker},
        settings=settings,
        routes=AnswerRoutes(),
        metrics=KafkaMetrics(),
    )
    await committer.open()
    committer.claim([tp])

    def answer_to(offset: int) -> None:
        tracker.add(offset)
        tracker.finish(offset)
        record = to_kafka(new_event({"type": "answer", "source": "tests"}, {"n": offset}))
        answer = Answer(offset, answers_topic, record.value, record.key, record.headers)
        committer.outbox.add(tp, answer)

    try:
        answer_to(0)
        started = time.perf_counter()
        assert await committer.commit([tp])
        lasted = time.perf_counter() - started  # how long one transaction takes here
        for offset in range(1, CANCELS + 1):
            answer_to(offset)
            commit = asyncio.create_task(committer.commit([tp]))
            # Cancelled at a different point of its transaction each time, the commit too.
            await asyncio.sleep(lasted * 1.5 * offset / CANCELS)
            commit.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await commit
        assert await committer.commit([tp])  # whatever the cancels left
    finally:
        await committer.close()
        await unstarted.stop()
    answers = await committed_answers(kafka_bootstrap, answers_topic)
    assert sorted(a["n"] for a in answers) == list(range(CANCELS + 1))


async def committed_answers(bootstrap: str, topic: str) -> list[Any]:
    """The data of every committed record of ``topic`` (one partition)."""
    reader = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
    )
    await reader.start()
    try:
        tp = TopicPartition(topic, 0)
        reader.assign([tp])
        await reader.seek_to_beginning(tp)
        end = (await reader.end_offsets([tp]))[tp]
        found: list[Any] = []
        async with asyncio.timeout(WAIT):
            while await reader.position(tp) < end:
                for records in (await reader.getmany(tp, timeout_ms=500)).values():
                    found.extend(from_kafka(r.value or b"", r.headers, r.key) for r in records)
        return [event.get_data() for event in found]
    finally:
        await reader.stop()
