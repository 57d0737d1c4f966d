"""Broker failover on a 3-node KRaft cluster of the test's own (replication factor 3,
min.insync.replicas 2): the leader of the agent's inbox partitions is killed, or
stopped for 15 s, in the middle of a load; the leader of a caller's reply topic is
killed in the middle of a stream.

For the load, the agent runs in an ``a2a-bus serve`` worker process configured by the
``A2A_KAFKA_*`` variables, the caller in the test process; the handler logs every run.
The stream's agent and caller are two buses in the test process
(:mod:`tests.transport.kafka.stream_faults`).
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from a2a_bus import Bus
from tests.transport.kafka.own_kafka import OwnKafka
from tests.transport.kafka.stream_faults import (
    Gate,
    assert_written_once_in_order,
    stream_buses,
    stream_through,
)
from tests.transport.kafka.test_broker_faults import WAIT, ServeWorker, run_load

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.slow,
    pytest.mark.cluster,
    pytest.mark.timeout(900),
]

SETTINGS = {"A2A_KAFKA_REPLICATION_FACTOR": "3", "A2A_KAFKA_MIN_INSYNC_REPLICAS": "2"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnKafka]:
    kafka = OwnKafka(tmp_path_factory.mktemp("cluster"), nodes=3)
    try:
        kafka.start()
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture
def whole(cluster: OwnKafka) -> OwnKafka:
    """The cluster with every node running: one an earlier test killed comes back."""
    cluster.start()
    return cluster


@pytest.fixture
async def worker(whole: OwnKafka, tmp_path: Path) -> AsyncIterator[ServeWorker]:
    prefix = f"cf{uuid.uuid4().hex[:10]}"
    served = ServeWorker(
        whole.bootstrap, prefix, tmp_path / "handled.jsonl", tmp_path / "w.err", SETTINGS
    )
    try:
        await served.start()
        yield served
    finally:
        await served.stop()


async def caller(cluster: OwnKafka, prefix: str, request_timeout: float) -> Bus:
    bus = Bus.kafka(
        cluster.bootstrap,
        bus_options={"prefix": prefix, "heartbeat": 60.0, "request_timeout": request_timeout},
        replication_factor=3,
        min_insync_replicas=2,
    )
    await asyncio.wait_for(bus.astart(), WAIT)
    return bus


async def leader_of(cluster: OwnKafka, topic: str) -> int:
    """The node leading most partitions of ``topic`` (checking they have 3 replicas
    and min.insync.replicas 2, as the settings asked)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    await admin.start()
    try:
        (described,) = await admin.describe_topics([topic])
        leaders = Counter(p["leader"] for p in described["partitions"])
        assert all(len(p["replicas"]) == 3 for p in described["partitions"])
    finally:
        await admin.close()
    return leaders.most_common(1)[0][0]


async def test_killing_the_inbox_leader_mid_load_loses_nothing_and_answers_once(
    cluster: OwnKafka, worker: ServeWorker
) -> None:
    total, in_flight, kill_after = 2_000, 64, 600
    bus = await caller(cluster, worker.prefix, WAIT)
    leader = await leader_of(cluster, bus.topics.agent("worker"))
    third = asyncio.Event()

    async def kill_leader() -> None:
        await third.wait()
        cluster.kill(leader)

    try:
        chaos = asyncio.create_task(kill_leader())
        load = await run_load(bus, total, in_flight, {kill_after: third})
        await chaos
    finally:
        await asyncio.wait_for(bus.astop(), WAIT)
    handled = worker.handled()

    assert load.errors == []  # 0 lost: nobody timed out
    assert load.wrong == []
    assert sorted(load.answers) == list(range(total))
    assert max(load.answers.values()) == 1  # 0 duplicate answers
    assert bus.metrics.duplicate_replies == 0
    assert sorted(handled) == list(range(total))
    print(f"\nhandled more than once: {sum(1 for t in handled.values() if t > 1)}")


async def test_a_stopped_broker_lets_deadlines_fire_and_answers_nothing_twice(
    cluster: OwnKafka, worker: ServeWorker
) -> None:
    total, in_flight, stop_after, deadline = 2_000, 64, 600, 10.0
    bus = await caller(cluster, worker.prefix, deadline)
    leader = await leader_of(cluster, bus.topics.agent("worker"))
    third = asyncio.Event()

    async def pause_leader() -> None:
        await third.wait()
        cluster.signal(leader, signal.SIGSTOP)
        try:
            await asyncio.sleep(15)
        finally:
            cluster.signal(leader, signal.SIGCONT)

    try:
        chaos = asyncio.create_task(pause_leader())
        load = await run_load(bus, total, in_flight, {stop_after: third})
        await chaos
        # After the broker is back, work goes on without a restart.
        after = await run_load(bus, 200, in_flight, {})
    finally:
        await asyncio.wait_for(bus.astop(), WAIT)

    timed_out = {n for n, error in load.errors if "-32001" in error or "timed out" in error}
    assert [e for e in load.errors if e[0] not in timed_out] == []  # only deadlines
    assert load.wrong == []
    assert set(load.answers) | timed_out == set(range(total))  # each: an answer or -32001
    assert not set(load.answers) & timed_out
    assert max(load.answers.values()) == 1  # nothing answered twice
    assert bus.metrics.duplicate_replies == 0
    assert after.errors == [] and sorted(after.answers) == list(range(200))
    print(f"\ndeadlines fired: {len(timed_out)}; late answers dropped: {bus.metrics.late_replies}")


async def test_killing_the_reply_topic_leader_mid_stream_loses_no_chunk_and_repeats_none(
    whole: OwnKafka,
) -> None:
    """5,000 chunks to a caller on another node; the leader of the caller's reply
    topic (one partition) is killed with chunks in flight: every chunk arrives
    once, in order, from one run of the generator, and the stream ends."""
    total, request_timeout = 5_000, 60.0
    async with stream_buses(
        whole.bootstrap, request_timeout, replication_factor=3, min_insync_replicas=2
    ) as caller:
        leader = await leader_of(whole, caller.reply_topic)

        async def kill_leader(gate: Gate) -> None:
            whole.kill(leader)
            gate.go_on.set()

        read = await stream_through(caller, total, kill_leader)
    print(f"\n{read.summary(total, caller)}")
    assert read.error is None
    assert read.items == list(range(total))
    assert read.runs == 1
    assert_written_once_in_order(caller)
    assert caller.metrics.duplicate_replies == 0
