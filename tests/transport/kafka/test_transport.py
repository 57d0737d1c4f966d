"""The Kafka transport against a real broker (fixture ``kafka_bootstrap``).

Every test uses its own topics and groups, so tests never see each other's records.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError, MessageSizeTooLargeError
from aiokafka.partitioner import DefaultPartitioner

from a2a_bus.core.errors import transport_refusal
from a2a_bus.protocol import new_event
from a2a_bus.transport import Delivery, TopicPattern
from a2a_bus.transport.dead_letters import delivered_letter
from a2a_bus.transport.errors import NotDelivered
from a2a_bus.transport.kafka.subscription import KafkaSubscription
from a2a_bus.transport.kafka.transport import KafkaTransport
from tests.buses import eventually
from tests.transport.kafka.own_kafka import OwnKafka
from tests.transport.kafka.support import Recorder, event

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]

WAIT = 30.0  # seconds; a guard against hangs, never a performance limit


@pytest.fixture
def uid() -> str:
    return uuid.uuid4().hex[:10]


@pytest.fixture
async def transport(kafka_bootstrap: str, uid: str) -> AsyncIterator[KafkaTransport]:
    async with KafkaTransport(
        kafka_bootstrap, dlq_topic=f"test.dlq.{uid}", metadata_max_age_ms=1000
    ) as kafka:
        assert isinstance(kafka, KafkaTransport)
        yield kafka


async def committed(kafka: KafkaTransport, group: str, tp: TopicPartition) -> int:
    found = await kafka.committed_offsets(group, [tp])
    return found.get(tp, (-1, ""))[0]


async def test_the_metrics_count_fetches_that_returned_records_and_the_records_they_held(
    transport: KafkaTransport, uid: str
) -> None:
    """Records already waiting when a subscription starts come several to a fetch."""
    topic = f"test.fetches.{uid}"
    for i in range(10):
        await transport.publish(topic, event(i), key=b"one-key")
    fetches, fetched = transport.metrics.fetches, transport.metrics.fetched
    recorder = Recorder()
    await transport.subscribe([topic], f"g-{uid}", recorder, from_beginning=True)
    await eventually(lambda: len(recorder.deliveries) == 10, "ten deliveries")

    fetches = transport.metrics.fetches - fetches
    fetched = transport.metrics.fetched - fetched
    assert fetches >= 1
    assert fetched >= 10  # a partition fetched before its start was learned is fetched again
    assert fetched / fetches >= 2


async def test_a_subscription_that_keeps_no_progress_waits_longer_on_an_idle_fetch(
    transport: KafkaTransport, uid: str
) -> None:
    """Its records still come: a record that arrives ends the broker's wait."""
    topic = f"test.idle-wait.{uid}"
    durable, live = Recorder(), Recorder()
    subscriptions = [
        await transport.subscribe([topic], f"g-{uid}", durable),
        await transport.subscribe([topic], f"live-{uid}", live, durable=False),
    ]
    assert [s.fetch_max_wait_ms for s in subscriptions if isinstance(s, KafkaSubscription)] == [
        transport.settings.fetch_max_wait_ms,
        transport.settings.nondurable_fetch_max_wait_ms,
    ]
    await transport.publish(topic, event(7))
    await eventually(lambda: durable.numbers() == live.numbers() == [7], "the record twice")


async def test_one_publish_fans_out_to_three_groups(
    transport: KafkaTransport, kafka_bootstrap: str, uid: str
) -> None:
    topic = f"test.fanout.{uid}"
    recorders = [Recorder() for _ in range(3)]
    for i, recorder in enumerate(recorders):
        await transport.subscribe([topic], f"g{i}-{uid}", recorder)
    produced_before = transport.metrics.produced

    await transport.publish(topic, event(1))
    await eventually(lambda: all(r.deliveries for r in recorders), "three deliveries")

    assert transport.metrics.produced - produced_before == 1
    # The broker holds exactly one record, whatever the number of groups.
    reader = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap)
    await reader.start()
    try:
        partitions = [TopicPartition(topic, p) for p in reader.partitions_for_topic(topic) or ()]
        if not partitions:
            partitions = [TopicPartition(topic, p) for p in range(transport.settings.partitions)]
        ends = await reader.end_offsets(partitions)
    finally:
        await reader.stop()
    assert sum(ends.values()) == 1
    await asyncio.sleep(0.3)  # a second copy would arrive right behind the first
    assert [len(r.deliveries) for r in recorders] == [1, 1, 1]
    ids = {r.deliveries[0].event.get_id() for r in recorders}
    assert len(ids) == 1


async def test_same_key_in_order_while_keys_run_concurrently(
    transport: KafkaTransport, uid: str
) -> None:
    topic = f"test.order.{uid}"
    seen: dict[str, list[int]] = {}
    running = 0
    most_running = 0

    async def handler(delivery: Delivery) -> None:
        nonlocal running, most_running
        running += 1
        most_running = max(most_running, running)
        data = delivery.event.get_data()
        assert isinstance(data, dict)
        # later events of a key finish faster: order must come from the transport
        await asyncio.sleep(0.002 * (30 - data["n"] % 30))
        seen.setdefault(data["key"], []).append(data["n"])
        running -= 1

    await transport.subscribe([topic], f"g-{uid}", handler, max_in_flight=16)
    keys = [f"k{i}" for i in range(6)]
    for n in range(30):
        for key in keys:
            ev = new_event(
                {"type": "t", "source": "tests", "partitionkey": key}, {"n": n, "key": key}
            )
            await transport.publish(topic, ev)
    await eventually(lambda: sum(map(len, seen.values())) == 180, "180 deliveries")

    assert all(seen[key] == list(range(30)) for key in keys), seen
    assert most_running > 1  # different keys really ran side by side


async def test_concurrent_publishes_keep_key_order_and_partitions(
    kafka_bootstrap: str, uid: str
) -> None:
    """Publishes of one loop iteration share record batches (small ones here, so
    a partition needs several); every key keeps its order and lands on the
    partition aiokafka's own partitioner picks, and a record too large for a
    request fails alone."""
    topic = f"test.batches.{uid}"
    recorder = Recorder()
    async with KafkaTransport(
        kafka_bootstrap, dlq_topic=f"test.dlq.{uid}", max_batch_size=1024
    ) as kafka:
        assert isinstance(kafka, KafkaTransport)
        await kafka.subscribe([topic], f"g-{uid}", recorder, max_in_flight=512)
        keys = [f"key-{i}-{uid}" for i in range(8)]
        events = [event(n, key) for n in range(40) for key in keys]
        too_large = new_event({"type": "t", "source": "tests"}, {"blob": "x" * 2_000_000})
        results = await asyncio.gather(
            *(kafka.publish(topic, ev) for ev in events),
            kafka.publish(topic, too_large),
            return_exceptions=True,
        )
        assert results[:-1] == [None] * len(events)
        assert isinstance(results[-1], MessageSizeTooLargeError)
        await eventually(lambda: len(recorder.deliveries) == len(events), "every event")
        every = list(range(kafka.settings.partitions))  # the topic was created with these
    for key in keys:
        mine = [d for d in recorder.deliveries if d.key == key.encode()]
        assert [d.event.get_data()["n"] for d in mine] == list(range(40))  # type: ignore[index]
        assert {d.partition for d in mine} == {DefaultPartitioner()(key.encode(), every, every)}


async def test_commit_never_passes_an_unfinished_offset(kafka_bootstrap: str, uid: str) -> None:
    async with KafkaTransport(
        kafka_bootstrap, partitions=1, dlq_topic=f"test.dlq.{uid}", commit_interval_ms=0
    ) as kafka:
        assert isinstance(kafka, KafkaTransport)
        topic = f"test.commit.{uid}"
        group = f"g-{uid}"
        release = asyncio.Event()
        finished: list[int] = []

        async def handler(delivery: Delivery) -> None:
            data = delivery.event.get_data()
            assert isinstance(data, dict)
            if data["n"] == 1:
                await release.wait()
            finished.append(delivery.offset)

        await kafka.subscribe([topic], group, handler)
        for n in range(5):  # distinct keys: offsets 2..4 finish while 1 waits
            await kafka.publish(topic, event(n, key=f"k{n}"))
        await eventually(lambda: len(finished) == 4, "4 of 5 handlers")
        tp = TopicPartition(topic, 0)
        await eventually(lambda: kafka.metrics.commits > 0, "a commit")
        await asyncio.sleep(0.2)  # give any (wrong) further commit time to land
        assert await committed(kafka, group, tp) == 1  # offset 1 is unfinished

        release.set()
        await eventually(lambda: len(finished) == 5, "the last handler")
        deadline = asyncio.get_running_loop().time() + WAIT
        while await committed(kafka, group, tp) != 5:
            assert asyncio.get_running_loop().time() < deadline, "commit did not reach 5"
            await asyncio.sleep(0.05)


# durable=False: records whose handler finishes at once skip the usual handling.
@pytest.mark.parametrize("durable", [True, False], ids=["durable", "non-durable"])
async def test_reproduced_identical_event_is_handled_once(
    transport: KafkaTransport, uid: str, durable: bool
) -> None:
    topic = f"test.dedup.{uid}"
    recorder = Recorder()
    await transport.subscribe([topic], f"g-{uid}", recorder, durable=durable)
    original = event(1, key="same")
    await transport.publish(topic, original)
    await transport.publish(topic, original)  # a producer-side retry of the same event
    await transport.publish(topic, event(2, key="same"))  # same partition, behind the copy
    await eventually(lambda: 2 in recorder.numbers(), "the event after the copy")

    assert recorder.numbers() == [1, 2]
    assert transport.metrics.duplicates == 1


async def test_a_subscription_without_dedup_gets_every_copy(
    transport: KafkaTransport, uid: str
) -> None:
    topic = f"test.nodedup.{uid}"
    recorder = Recorder()
    await transport.subscribe([topic], f"g-{uid}", recorder, dedup=False)
    original = event(1, key="same")
    await transport.publish(topic, original)
    await transport.publish(topic, original)
    await transport.publish(topic, event(2, key="same"))
    await eventually(lambda: 2 in recorder.numbers(), "the event after the copy")

    assert recorder.numbers() == [1, 1, 2]
    assert transport.metrics.duplicates == 0


async def test_records_of_a_stopped_owner_come_back_flagged(kafka_bootstrap: str, uid: str) -> None:
    async with KafkaTransport(kafka_bootstrap, partitions=1, dlq_topic=f"test.dlq.{uid}") as kafka:
        assert isinstance(kafka, KafkaTransport)
        topic = f"test.redeliver.{uid}"
        group = f"g-{uid}"
        first: list[int] = []

        async def stuck_on_three(delivery: Delivery) -> None:
            data = delivery.event.get_data()
            assert isinstance(data, dict)
            if data["n"] == 3:
                await asyncio.Event().wait()  # never finishes: cancelled at stop
            first.append(data["n"])

        owner = await kafka.subscribe([topic], group, stuck_on_three)
        for n in range(5):
            await kafka.publish(topic, event(n, key=f"k{n}"))
        await eventually(lambda: sorted(first) == [0, 1, 2, 4], "4 handled by the first owner")
        await owner.stop(drain_timeout=0.1)  # record 3 never finished: not committed

        second = Recorder()
        await kafka.subscribe([topic], group, second)
        await eventually(lambda: len(second.deliveries) >= 2, "records 3 and 4 again")
        await kafka.publish(topic, event(5, key="k5"))
        await eventually(lambda: 5 in second.numbers(), "a fresh record")

        flags = {d.event.get_data()["n"]: d.redelivered for d in second.deliveries}  # type: ignore[index]
        assert flags == {3: True, 4: True, 5: False}


async def test_records_fetched_together_are_each_handed_out_under_an_acknowledged_lease(
    kafka_bootstrap: str, uid: str
) -> None:
    """A fetched batch runs past a lease of 4 records: each record is handed out only
    once a commit carrying a lease past it was acknowledged, so the k-th lease (at most
    4 records past the last) comes before offset 4k is handed out."""
    lease = 4
    async with KafkaTransport(
        kafka_bootstrap, partitions=1, dlq_topic=f"test.dlq.{uid}", redelivery_lease=lease
    ) as kafka:
        assert isinstance(kafka, KafkaTransport)
        topic = f"test.lease.{uid}"
        for n in range(40):  # distinct keys: the whole batch is handed out at once
            await kafka.publish(topic, event(n, key=f"k{n}"))
        commits_seen: dict[int, int] = {}

        async def handler(delivery: Delivery) -> None:
            # The handler's first step runs as its record is handed out.
            commits_seen.setdefault(delivery.offset, kafka.metrics.commits)

        await kafka.subscribe([topic], f"g-{uid}", handler, from_beginning=True)
        await eventually(lambda: len(commits_seen) == 40, "40 records handed out")
        short = {o: k for o, k in commits_seen.items() if k < o // lease + 1}
        assert short == {}, "handed out before a lease covered them"
        assert kafka.metrics.fetched < 2 * 40  # they came many to a fetch


async def test_clean_handover_flags_nothing(kafka_bootstrap: str, uid: str) -> None:
    async with KafkaTransport(kafka_bootstrap, partitions=1, dlq_topic=f"test.dlq.{uid}") as kafka:
        assert isinstance(kafka, KafkaTransport)
        topic = f"test.handover.{uid}"
        group = f"g-{uid}"
        first = Recorder()
        owner = await kafka.subscribe([topic], group, first)
        for n in range(3):
            await kafka.publish(topic, event(n))
        await eventually(lambda: len(first.deliveries) == 3, "3 deliveries")
        await owner.stop()

        for n in range(3, 6):  # produced while nobody owns the partition
            await kafka.publish(topic, event(n))
        second = Recorder()
        await kafka.subscribe([topic], group, second)
        await eventually(lambda: len(second.deliveries) == 3, "3 more deliveries")
        assert second.numbers() == [3, 4, 5]
        assert not any(d.redelivered for d in second.deliveries)


async def test_a_new_group_commits_its_start_so_the_next_owner_skips_nothing(
    kafka_bootstrap: str, uid: str
) -> None:
    async with KafkaTransport(kafka_bootstrap, partitions=2, dlq_topic=f"test.dlq.{uid}") as kafka:
        assert isinstance(kafka, KafkaTransport)
        topic = f"test.start.{uid}"
        group = f"g-{uid}"
        first = Recorder()
        owner = await kafka.subscribe([topic], group, first)  # a new group, "latest"
        partitions = [TopicPartition(topic, p) for p in range(2)]
        starts = await kafka.committed_offsets(group, partitions)
        assert {tp: offset for tp, (offset, _) in starts.items()} == {tp: 0 for tp in partitions}

        owner.pause()  # the first owner hands out nothing, so it commits nothing itself
        for n in range(6):
            await kafka.publish(topic, event(n, key=f"k{n}"))
        await owner.stop()

        second = Recorder()
        await kafka.subscribe([topic], group, second)  # "latest" would start at the end
        await eventually(lambda: len(second.deliveries) == 6, "the records the first skipped")
        assert sorted(second.numbers()) == list(range(6))
        assert first.deliveries == []
        assert not any(d.redelivered for d in second.deliveries)


async def test_lag_counts_records_not_handled_yet(transport: KafkaTransport, uid: str) -> None:
    topic = f"test.lag.{uid}"
    group = f"g-{uid}"
    release = asyncio.Event()
    handled: list[int] = []

    async def handler(delivery: Delivery) -> None:
        await release.wait()
        handled.append(delivery.offset)

    await transport.subscribe([topic], group, handler)
    assert transport.lag() == {group: 0}
    for n in range(5):
        await transport.publish(topic, event(n, key="one"))  # one partition, in order
    await eventually(lambda: transport.lag().get(group) == 5, "a lag of 5")

    release.set()
    await eventually(lambda: len(handled) == 5, "5 handled")
    await eventually(lambda: transport.lag().get(group) == 0, "no lag")
    assert transport.lag() == {group: 0}


async def read_all(bootstrap: str, topic: str, count: int) -> list[Any]:
    reader = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await reader.start()
    records: list[Any] = []
    try:
        async with asyncio.timeout(WAIT):
            while len(records) < count:
                batch = await reader.getmany(timeout_ms=200)
                for items in batch.values():
                    records.extend(items)
    finally:
        await reader.stop()
    return records


async def test_garbage_goes_to_the_dlq_with_reason_and_is_committed(
    transport: KafkaTransport, kafka_bootstrap: str, uid: str
) -> None:
    topic = f"test.garbage.{uid}"
    group = f"g-{uid}"
    recorder = Recorder()
    await transport.subscribe([topic], group, recorder)
    await transport.publish_raw(topic, b"\x00\xffnot json", key=b"k")
    await transport.publish_raw(topic, b'{"jsonrpc": "2.0", "method": "ok"}', key=b"k")
    await eventually(lambda: len(recorder.deliveries) == 1, "the good record")

    [letter] = await read_all(kafka_bootstrap, transport.settings.dlq_topic, 1)
    headers = dict(letter.headers)
    assert letter.value == b"\x00\xffnot json"
    assert headers["a2a-dlq-reason"].startswith(b"undecodable: Parse error")
    assert headers["a2a-dlq-source-topic"] == topic.encode()
    partition = recorder.deliveries[0].partition
    assert headers["a2a-dlq-source-partition"] == str(partition).encode()
    assert headers["a2a-dlq-source-offset"] == b"0"
    assert orjson.loads(headers["a2a-dlq-error"])[0]["error"]["code"] == -32700
    tp = TopicPartition(topic, partition)
    await eventually(lambda: transport.metrics.commits > 0, "a commit")
    deadline = asyncio.get_running_loop().time() + WAIT
    while await committed(transport, group, tp) != 2:  # past the garbage and the good one
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("durable", [True, False], ids=["durable", "non-durable"])
async def test_handler_error_goes_to_the_dlq(
    transport: KafkaTransport, kafka_bootstrap: str, uid: str, durable: bool
) -> None:
    topic = f"test.raising.{uid}"
    calls: list[int] = []

    async def handler(delivery: Delivery) -> None:
        data = delivery.event.get_data()
        assert isinstance(data, dict)
        calls.append(data["n"])
        if data["n"] == 1:
            raise ValueError("bad number")  # in the handler's first step

    await transport.subscribe([topic], f"g-{uid}", handler, durable=durable)
    for n in range(3):
        await transport.publish(topic, event(n, key="k"))
    await eventually(lambda: len(calls) == 3, "three calls")
    [letter] = await read_all(kafka_bootstrap, transport.settings.dlq_topic, 1)
    headers = dict(letter.headers)
    assert headers["a2a-dlq-reason"] == b"handler-error: ValueError: bad number"
    # the original record, unchanged (structured content mode by default)
    assert headers["content-type"].startswith(b"application/cloudevents+json")
    assert orjson.loads(letter.value)["id"].encode() == headers["a2a-dlq-event-id"]
    assert calls == [0, 1, 2]  # the poison record did not stop its partition
    assert transport.dead_lettered == transport.metrics.dead_lettered == 1


@pytest.mark.parametrize("mode", ["structured", "binary"])
async def test_content_mode_setting_picks_how_events_are_written(
    kafka_bootstrap: str, uid: str, mode: str
) -> None:
    topic = f"test.mode.{uid}"
    received = Recorder()
    async with KafkaTransport(
        kafka_bootstrap, dlq_topic=f"test.dlq.{uid}", content_mode=mode
    ) as kafka:
        await kafka.subscribe([topic], f"g-{uid}", received)
        sent = event(7, key="k", seq=3)
        await kafka.publish(topic, sent)
        await eventually(lambda: len(received.deliveries) == 1, "the event")
    [record] = await read_all(kafka_bootstrap, topic, 1)
    names = {name for name, _ in record.headers}
    if mode == "binary":
        assert {"ce_id", "ce_source", "ce_type", "ce_seq", "ce_partitionkey"} <= names
        assert orjson.loads(record.value) == {"n": 7}
    else:
        assert names == {"content-type"}
        assert orjson.loads(record.value)["id"] == sent.get_id()
    [delivery] = received.deliveries
    assert delivery.event.get_attributes() == sent.get_attributes()
    assert delivery.event.get_data() == {"n": 7}
    assert record.key == b"k"


async def test_raw_jsonrpc_records_are_decoded(transport: KafkaTransport, uid: str) -> None:
    topic = f"test.raw.{uid}"
    recorder = Recorder()
    await transport.subscribe([topic], f"g-{uid}", recorder)
    request = {"jsonrpc": "2.0", "method": "calc/add", "params": [1, 2], "id": 7}
    note = {"jsonrpc": "2.0", "method": "ping", "params": {}}
    batch = [
        {"jsonrpc": "2.0", "method": "a", "id": 1},
        {"jsonrpc": "1.0", "method": "bad", "id": 2},
        {"jsonrpc": "2.0", "method": "b", "id": 3},
    ]
    for message in (request, note, batch):
        await transport.publish_raw(topic, orjson.dumps(message), key=b"one")
    await eventually(lambda: len(recorder.deliveries) == 4, "4 deliveries")

    first, second, *from_batch = recorder.deliveries
    assert all(d.raw for d in recorder.deliveries)
    assert first.event.get_extension("a2amethod") == "calc/add"
    assert first.event.get_data() == request
    assert second.event.get_extension("mcptype") == "notification"
    assert second.event.get_id() == f"{topic}/{second.partition}/{second.offset}"
    assert [d.event.get_extension("a2amethod") for d in from_batch] == ["a", "b"]
    assert {d.offset for d in from_batch} == {second.offset + 1}  # one record, one offset
    await eventually(lambda: transport.metrics.dead_lettered == 1, "the invalid element")


async def test_pause_holds_records_until_resume(transport: KafkaTransport, uid: str) -> None:
    topic = f"test.pause.{uid}"
    recorder = Recorder()
    subscription = await transport.subscribe([topic], f"g-{uid}", recorder)
    await transport.publish(topic, event(0))
    await eventually(lambda: len(recorder.deliveries) == 1, "the first delivery")

    subscription.pause()
    for n in range(1, 4):
        await transport.publish(topic, event(n))
    await asyncio.sleep(1.0)  # several fetch cycles
    assert recorder.numbers() == [0]

    subscription.resume()
    await eventually(lambda: len(recorder.deliveries) == 4, "the held records")
    assert sorted(recorder.numbers()) == [0, 1, 2, 3]


async def test_pattern_subscription_picks_up_new_topics(
    transport: KafkaTransport, uid: str
) -> None:
    recorder = Recorder()
    await transport.subscribe(TopicPattern(rf"test\.wild\.{uid}\..*"), f"g-{uid}", recorder)
    await transport.publish(f"test.wild.{uid}.a", event(1))  # created after subscribing
    await transport.publish(f"test.other.{uid}", event(2))  # not matched
    await eventually(lambda: len(recorder.deliveries) == 1, "the matching topic")
    assert recorder.deliveries[0].topic == f"test.wild.{uid}.a"
    await transport.publish(f"test.wild.{uid}.b", event(3))
    await eventually(lambda: len(recorder.deliveries) == 2, "the second new topic")
    assert recorder.numbers() == [1, 3]


async def test_from_beginning_replays_history(transport: KafkaTransport, uid: str) -> None:
    topic = f"test.replay.{uid}"
    await transport.ensure_topics([topic])
    for n in range(3):
        await transport.publish(topic, event(n, key="k"))
    late = Recorder()
    await transport.subscribe([topic], f"late-{uid}", late, from_beginning=True)
    current = Recorder()
    await transport.subscribe([topic], f"now-{uid}", current)
    await transport.publish(topic, event(3, key="k"))
    await eventually(lambda: len(late.deliveries) == 4, "history and the new event")
    await eventually(lambda: len(current.deliveries) == 1, "the new event")
    assert late.numbers() == [0, 1, 2, 3]
    assert current.numbers() == [3]


async def test_records_queued_behind_a_slow_key_are_left_to_the_next_owner(
    kafka_bootstrap: str, uid: str
) -> None:
    # A rebalance whose drain times out while a record runs: the records queued
    # behind it (same key) are released to the next owner, so the old member's
    # runner must not handle them too (nor count them out of its in-flight twice).
    async with KafkaTransport(
        kafka_bootstrap, partitions=1, dlq_topic=f"test.dlq.{uid}", drain_timeout=0.2
    ) as kafka:
        assert isinstance(kafka, KafkaTransport)
        topic = f"test.revoke.{uid}"
        group = f"g-{uid}"
        started, release = asyncio.Event(), asyncio.Event()
        handled: list[tuple[str, int]] = []

        def member(name: str) -> Callable[[Delivery], Any]:
            async def handler(delivery: Delivery) -> None:
                data = delivery.event.get_data()
                assert isinstance(data, dict)
                if data["n"] == 0 and name == "first":
                    started.set()
                    await release.wait()
                handled.append((name, data["n"]))

            return handler

        first = await kafka.subscribe([topic], group, member("first"))
        for n in range(3):
            await kafka.publish(topic, event(n, key="k"))
        await asyncio.wait_for(started.wait(), WAIT)
        await eventually(lambda: first.in_flight == 3, "records 1 and 2 queued behind 0")
        second = await kafka.subscribe([topic], group, member("second"))  # a rebalance
        release.set()
        await eventually(lambda: {1, 2} <= {n for _, n in handled}, "records 1 and 2")
        await eventually(lambda: first.in_flight <= 0 and second.in_flight <= 0, "idle members")
        await asyncio.sleep(0.2)  # give a (wrong) late run of the old queue time to show
        assert (first.in_flight, second.in_flight) == (0, 0)
        late = [n for name, n in handled if name == "first" and n > 0]
        owner_now = "first" if first.assignment else "second"
        if owner_now == "second":
            assert late == []  # the old member handled nothing after its partition left


async def test_handlers_start_eagerly_and_may_publish_to_new_topics(
    transport: KafkaTransport, uid: str
) -> None:
    # Handlers start without a task of their own; a handler whose first publish
    # creates a topic still works (the admin request runs in a task), and a long
    # run of one key whose handlers finish at once neither recurses without bound
    # nor loses its order.
    topic, replies = f"test.eager.{uid}", f"test.eager.replies.{uid}"
    tasks: list[asyncio.Task[Any] | None] = []
    seen: list[int] = []

    async def handler(delivery: Delivery) -> None:
        tasks.append(asyncio.current_task())
        data = delivery.event.get_data()
        assert isinstance(data, dict)
        seen.append(data["n"])
        if data["n"] == 0:
            await transport.publish(replies, event(0))

    answers = Recorder()
    await transport.subscribe([topic], f"g-{uid}", handler, max_in_flight=500)
    await asyncio.gather(*(transport.publish(topic, event(n, key="one")) for n in range(300)))
    await eventually(lambda: len(seen) == 300, "every record")
    await transport.subscribe([replies], f"r-{uid}", answers, from_beginning=True)
    await eventually(lambda: len(answers.deliveries) == 1, "the reply on the new topic")
    assert seen == list(range(300))
    assert all(task is None or not task.get_name().startswith("Task-") for task in tasks)


async def cleanup_policy(bootstrap: str, topic: str) -> str:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        resource = ConfigResource(ConfigResourceType.TOPIC, topic, {"cleanup.policy": None})
        for _ in range(100):  # a just-created topic's config may not be described yet
            [response] = await admin.describe_configs([resource])
            # resources: (error_code, error_message, type, name, [(key, value, ...), ...])
            [(error, message, _, _, entries)] = response.resources
            policies = [str(entry[1]) for entry in entries if entry[0] == "cleanup.policy"]
            if policies:
                return policies[0]
            await asyncio.sleep(0.1)
        pytest.fail(f"no cleanup.policy described for {topic}: error {error} {message}")
    finally:
        await admin.close()


async def test_declared_compacted_topics_are_created_compacted(
    transport: KafkaTransport, kafka_bootstrap: str, uid: str
) -> None:
    cards, events = f"test.cards.{uid}", f"test.events.{uid}"
    transport.declare_compacted(cards)
    await transport.ensure_topics([cards, events])
    assert await cleanup_policy(kafka_bootstrap, cards) == "compact"
    assert await cleanup_policy(kafka_bootstrap, events) == "delete"


async def described_partitions(transport: KafkaTransport, topic: str) -> list[int]:
    """The partitions of ``topic``, once the cluster describes it the same twice in a
    row (a topic created a moment ago may be missing from the metadata, or show only
    some of its partitions)."""
    before: list[int] = []
    for _ in range(100):
        found = sorted(tp.partition for tp in await transport.partitions([topic]))
        if found and found == before:
            return found
        before = found
        await asyncio.sleep(0.1)
    pytest.fail(f"{topic} is not described")


async def test_declared_private_topics_are_created_with_one_partition(
    transport: KafkaTransport, uid: str
) -> None:
    replies, events = f"test.replies.{uid}", f"test.shared.{uid}"
    transport.declare_private(replies)
    await transport.ensure_topics([replies, events], partitions=3)
    assert await described_partitions(transport, replies) == [0]
    assert await described_partitions(transport, events) == [0, 1, 2]


async def test_topics_asked_for_at_once_are_created_in_one_request(
    transport: KafkaTransport, uid: str
) -> None:
    """Concurrent callers (a bus starting many agents) share one CreateTopics
    request; a topic that cannot be created fails its own caller only."""
    topics = [f"test.batch.{uid}.{n}" for n in range(20)]
    requests, created = transport.metrics.create_requests, transport.metrics.topics_created
    await asyncio.gather(*(transport.ensure_topics([topic]) for topic in topics))
    assert transport.metrics.create_requests == requests + 1
    assert transport.metrics.topics_created == created + 20
    assert all(transport.created(topic) for topic in topics)
    # CreateTopics answers once the controller holds the topics; the broker's metadata
    # cache learns of them a moment later (longer while it deletes others).
    expected = 20 * transport.settings.partitions
    for _ in range(100):
        if len(await transport.partitions(topics)) == expected:
            break
        await asyncio.sleep(0.05)
    assert len(await transport.partitions(topics)) == expected

    # A name that collides with an existing one once '.' and '_' are alike.
    fine, invalid = f"test.batch.{uid}.fine", f"test_batch_{uid}_0"
    results = await asyncio.gather(
        transport.ensure_topics([fine]), transport.ensure_topics([invalid]), return_exceptions=True
    )
    assert results[0] is None
    assert isinstance(results[1], KafkaError) and invalid in str(results[1])
    assert transport.known(fine) and not transport.known(invalid)


async def test_the_bus_registry_is_a_compacted_topic(kafka_bootstrap: str, uid: str) -> None:
    from a2a_bus.bus import Bus

    bus = Bus.kafka(kafka_bootstrap, bus_options={"prefix": f"t{uid}", "heartbeat": 60.0})
    async with bus:
        assert await cleanup_policy(kafka_bootstrap, bus.topics.registry) == "compact"


async def test_the_bus_reply_topic_has_one_partition(kafka_bootstrap: str, uid: str) -> None:
    from a2a_bus.bus import Bus

    bus = Bus.kafka(kafka_bootstrap, bus_options={"prefix": f"t{uid}", "heartbeat": 60.0})
    async with bus:
        transport = bus.transport
        assert isinstance(transport, KafkaTransport)
        assert await described_partitions(transport, bus.context.reply_topic) == [0]
        assert len(await described_partitions(transport, bus.topics.registry)) > 1


async def test_a_non_durable_subscription_commits_nothing(
    transport: KafkaTransport, uid: str
) -> None:
    topic, kept, passing = f"test.live.{uid}", f"kept-{uid}", f"passing-{uid}"
    durable, live = Recorder(), Recorder()
    subscriptions = [
        await transport.subscribe([topic], kept, durable),
        await transport.subscribe([topic], passing, live, durable=False),
    ]
    for n in range(5):
        await transport.publish(topic, event(n))
    await eventually(lambda: len(durable.deliveries) == len(live.deliveries) == 5, "both")
    for subscription in subscriptions:
        await subscription.stop()
    partitions = [TopicPartition(topic, p) for p in range(transport.settings.partitions)]
    committed = await transport.committed_offsets(kept, partitions)
    assert sum(max(0, offset) for offset, _ in committed.values()) == 5
    assert all(o < 0 for o, _ in (await transport.committed_offsets(passing, partitions)).values())


async def test_a_non_durable_subscription_keeps_a_key_in_order_behind_a_waiting_handler(
    transport: KafkaTransport, uid: str
) -> None:
    # Records whose handler finishes at once are handled without the usual
    # bookkeeping, but never ahead of an earlier record of their key still running.
    topic = f"test.atonce.{uid}"
    gate = asyncio.Event()
    started: list[tuple[str, int]] = []
    finished: list[tuple[str, int]] = []

    async def handler(delivery: Delivery) -> None:
        data = delivery.event.get_data()
        assert isinstance(data, dict)
        step = (str(delivery.event.get_extension("partitionkey")), data["n"])
        started.append(step)
        if step == ("slow", 0):
            await gate.wait()
        finished.append(step)

    subscription = await transport.subscribe(
        [topic], f"g-{uid}", handler, durable=False, from_beginning=True
    )
    for n in range(5):
        await transport.publish(topic, event(n, key="slow"))
        await transport.publish(topic, event(n, key="quick"))
    await eventually(lambda: len(finished) == 5, "the quick key's records")
    assert finished == [("quick", n) for n in range(5)]
    assert started.count(("slow", 0)) == 1 and ("slow", 1) not in started
    # The waiting record and the four queued behind it; none of the finished ones.
    assert subscription.in_flight == 5
    gate.set()
    await eventually(lambda: len(finished) == 10, "every record")
    assert [n for key, n in finished if key == "slow"] == list(range(5))
    assert subscription.in_flight == 0
    assert transport.metrics.delivered == 10


async def member_ids(admin: AIOKafkaAdminClient, group: str) -> set[str]:
    """The ids of the group's members, as its coordinator knows them now."""
    described = await admin.describe_consumer_groups([group])
    return {str(member[0]) for response in described for g in response.groups for member in g[5]}


async def test_a_non_durable_subscription_that_rejoins_skips_nothing_written_meanwhile(
    kafka_bootstrap: str, uid: str
) -> None:
    # A reply topic's group commits nothing (durable=False). When its member is
    # expelled (a broker restart, a pause past the session timeout) and joins again,
    # it must go on from where it got to: starting at the end would skip the
    # answers written while it was away, and their callers would wait in vain.
    topic, group = f"test.rejoin.{uid}", f"rejoin-{uid}"
    kafka = KafkaTransport(
        kafka_bootstrap,
        dlq_topic=f"test.dlq.{uid}",
        session_timeout_ms=6_000,  # the broker's minimum
        heartbeat_interval_ms=500,
    )
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    async with kafka:
        recorder = Recorder()
        subscription = await kafka.subscribe([topic], group, recorder, durable=False)
        await kafka.publish(topic, event(0))
        await eventually(lambda: recorder.numbers() == [0], "the first record")
        before = await member_ids(admin, group)
        assert len(before) == 1
        subscription.pause()
        for n in range(1, 11):  # written while the member hands out nothing
            await kafka.publish(topic, event(n))
        # The loop stalls past the session timeout: the coordinator expels the member.
        time.sleep(8)
        try:
            async with asyncio.timeout(WAIT):
                while (now := await member_ids(admin, group)) == before or not now:
                    await asyncio.sleep(0.1)
        finally:
            await admin.close()
        subscription.resume()
        await kafka.publish(topic, event(11))
        await eventually(lambda: 11 in recorder.numbers(), "the record written after the rejoin")
        await eventually(lambda: len(recorder.numbers()) >= 12, "every record")
        assert sorted(recorder.numbers()) == list(range(12))  # none skipped, none twice
        await subscription.stop()


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_a_write_waits_out_a_broker_outage_or_fails_with_its_delivery_timeout(
    tmp_path: Path, uid: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A publish waits for the broker until its delivery timeout, then fails with a
    clear error. A dead letter is not given up after ``max_retries`` timeouts: it
    waits the outage out (its record would be lost otherwise)."""
    topic, dlq = f"test.outage.{uid}", f"test.dlq.{uid}"
    broker = OwnKafka(tmp_path / "kafka")
    try:
        broker.start()
        patient = KafkaTransport(broker.bootstrap, dlq_topic=dlq)
        hasty = KafkaTransport(
            broker.bootstrap, dlq_topic=dlq, delivery_timeout_ms=2000, max_retries=1
        )
        async with patient, hasty:
            await patient.publish(topic, event(0))
            await hasty.publish(topic, event(1))
            await hasty.ensure_topics([dlq])
            broker.kill()
            caplog.set_level(logging.WARNING, logger="a2a_bus.transport.kafka.transport")
            waiting = asyncio.ensure_future(patient.publish(topic, event(2)))
            dead = Delivery(event(4), topic, 0, 4, None)
            lettering = asyncio.ensure_future(hasty.dead_letter(delivered_letter(dead, "boom")))
            with pytest.raises(NotDelivered) as refused:
                await hasty.publish(topic, event(3))
            # A clear error, not a silent drop: the bus answers it -32001.
            assert transport_refusal(refused.value).code == -32001
            assert not waiting.done()  # still retried
            async with asyncio.timeout(WAIT):  # the letter's first write timed out too
                while not any("dead letter write failed" in r.getMessage() for r in caplog.records):
                    await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # past its back-off: max_retries (1) is spent
            still_trying = not lettering.done()
            await asyncio.to_thread(broker.start)  # (asserted after: no stop on a dead broker)
            assert still_trying
            await asyncio.wait_for(waiting, WAIT)
            await asyncio.wait_for(lettering, WAIT)
            batch = await patient.read(topic, limit=100)
            numbers = Counter(e.get_data()["n"] for e in batch.events)  # type: ignore[index]
            letters = (await patient.read(dlq, limit=100)).events
        assert numbers[0] == numbers[1] == numbers[2] == 1  # written once each
        assert [e.get_data() for e in letters] == [{"n": 4}]  # the letter, once
        assert not [r for r in caplog.records if "LOST" in r.getMessage()]
    finally:
        broker.stop()
