"""The agent inboxes of a process on one Kafka consumer, against a real broker.

``transport.inboxes(prefix)`` serves every inbox topic with one consumer in the
group of the set of topics. Every test uses topics and a group prefix of its
own; the multi-process tests run ``tests/transport/kafka/inbox_worker.py``.
The consumer's idle fetch wait (``idle_fetch_wait``) is checked without a broker.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from aiokafka.coordinator.protocol import ConsumerProtocol

from a2a_bus.protocol import new_event
from a2a_bus.transport import Delivery
from a2a_bus.transport.base import Inboxes
from a2a_bus.transport.kafka import InboxConflict, KafkaTransport
from a2a_bus.transport.kafka.config import KafkaSettings
from a2a_bus.transport.kafka.groups import composition_group
from a2a_bus.transport.kafka.inboxes import idle_fetch_wait
from tests.buses import eventually
from tests.transport.kafka.support import (
    Recorder,
    Worker,
    event,
    kill_all,
    wait_until_committed,
)
from tests.transport.kafka.support import start_worker as start_worker_process

# The broker tests get the kafka mark from the kafka_bootstrap fixture they ask for
# (directly or through transport and start_worker; tests/conftest.py): the test of
# idle_fetch_wait needs no broker and must not be marked.
pytestmark = pytest.mark.timeout(300)

WAIT = 60.0  # seconds; a guard against hangs, never a performance limit
#: Looks at a log (~10 ms apart) that must agree before a worker counts as settled.
SETTLED_LOOKS = 50
WORKER = Path(__file__).with_name("inbox_worker.py")


@pytest.fixture
def uid() -> str:
    return uuid.uuid4().hex[:10]


@pytest.fixture
def prefix(uid: str) -> str:
    return f"ti{uid}.inbox"


@pytest.fixture
async def transport(kafka_bootstrap: str, uid: str) -> AsyncIterator[KafkaTransport]:
    async with KafkaTransport(kafka_bootstrap, dlq_topic=f"test.dlq.{uid}") as kafka:
        assert isinstance(kafka, KafkaTransport)
        yield kafka


async def members_of(bootstrap: str, group: str) -> list[set[str]]:
    """The topics each member of ``group`` subscribes to, as the broker describes it."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        [response] = await admin.describe_consumer_groups([group])
        [description] = response.groups
        return [
            set(ConsumerProtocol.METADATA.decode(member[-2]).subscription)
            for member in description[5]
        ]
    finally:
        await admin.close()


async def groups_named(bootstrap: str, prefix: str) -> set[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return {str(g[0]) for g in await admin.list_consumer_groups() if g[0].startswith(prefix)}
    finally:
        await admin.close()


async def committed(kafka: KafkaTransport, group: str, tp: TopicPartition) -> int:
    return (await kafka.committed_offsets(group, [tp])).get(tp, (-1, ""))[0]


async def test_one_consumer_in_one_group_serves_every_inbox(
    transport: KafkaTransport, kafka_bootstrap: str, prefix: str, uid: str
) -> None:
    inboxes = transport.inboxes(prefix)
    topics = [f"test.inbox.{uid}.{i}" for i in range(5)]
    recorders = {topic: Recorder() for topic in topics}
    # Subscribed together, as a bus starting its agents does: one join serves all.
    await asyncio.gather(*(inboxes.subscribe(t, recorders[t]) for t in topics))

    group = composition_group(prefix, topics)
    assert inboxes.group == group
    assert await groups_named(kafka_bootstrap, prefix) == {group}
    # Inbox topics get inbox_partitions (3 by default: replicas share an inbox).
    assert len(await transport.partitions(topics)) == 5 * transport.settings.inbox_partitions == 15
    assert await members_of(kafka_bootstrap, group) == [set(topics)]  # one consumer
    for n, topic in enumerate(topics):
        await transport.publish(topic, event(n))
    await eventually(
        lambda: all(r.deliveries for r in recorders.values()), "one event each", timeout=WAIT
    )
    assert [recorders[t].numbers() for t in topics] == [[n] for n in range(5)]
    await eventually(lambda: transport.lag() == {group: 0}, "no lag", timeout=WAIT)


async def test_records_of_a_key_come_in_order_while_keys_and_inboxes_run_concurrently(
    transport: KafkaTransport, prefix: str, uid: str
) -> None:
    inboxes = transport.inboxes(prefix)
    seen: dict[tuple[str, str], list[int]] = {}
    running = 0
    most_running = 0

    async def handler(delivery: Delivery) -> None:
        nonlocal running, most_running
        running += 1
        most_running = max(most_running, running)
        data = delivery.event.get_data()
        assert isinstance(data, dict)
        # later events of a key finish faster: order must come from the transport
        await asyncio.sleep(0.002 * (20 - data["n"] % 20))
        seen.setdefault((delivery.topic, data["key"]), []).append(data["n"])
        running -= 1

    topics = [f"test.inbox.{uid}.a", f"test.inbox.{uid}.b"]
    await asyncio.gather(*(inboxes.subscribe(t, handler, max_in_flight=16) for t in topics))
    keys = [f"k{i}" for i in range(5)]
    for n in range(20):
        for topic in topics:
            for key in keys:
                attributes = {"type": "t", "source": "tests", "partitionkey": key}
                await transport.publish(topic, new_event(attributes, {"n": n, "key": key}))
    await eventually(lambda: sum(map(len, seen.values())) == 200, "200 deliveries", timeout=WAIT)

    assert all(numbers == list(range(20)) for numbers in seen.values()), seen
    assert len(seen) == 10
    assert most_running > 1


async def test_the_commit_never_passes_an_unfinished_record(
    kafka_bootstrap: str, prefix: str, uid: str
) -> None:
    async with KafkaTransport(
        kafka_bootstrap,
        partitions=1,
        inbox_partitions=1,
        dlq_topic=f"test.dlq.{uid}",
        commit_interval_ms=0,
    ) as kafka:
        assert isinstance(kafka, KafkaTransport)
        inboxes = kafka.inboxes(prefix)
        topic = f"test.inbox.{uid}"
        release = asyncio.Event()
        finished: list[int] = []

        async def handler(delivery: Delivery) -> None:
            data = delivery.event.get_data()
            assert isinstance(data, dict)
            if data["n"] == 1:
                await release.wait()
            finished.append(delivery.offset)

        await inboxes.subscribe(topic, handler)
        for n in range(5):  # distinct keys: offsets 2..4 finish while 1 waits
            await kafka.publish(topic, event(n, key=f"k{n}"))
        await eventually(lambda: len(finished) == 4, "4 of 5 handlers", timeout=WAIT)
        group = inboxes.group
        assert group is not None
        tp = TopicPartition(topic, 0)
        await asyncio.sleep(0.3)  # give any (wrong) further commit time to land
        assert await committed(kafka, group, tp) == 1  # offset 1 is unfinished

        release.set()
        await eventually(lambda: len(finished) == 5, "the last handler", timeout=WAIT)
        for _ in range(int(WAIT / 0.05)):
            if await committed(kafka, group, tp) == 5:
                break
            await asyncio.sleep(0.05)
        assert await committed(kafka, group, tp) == 5


async def test_a_reproduced_event_is_handled_once(
    transport: KafkaTransport, prefix: str, uid: str
) -> None:
    inboxes = transport.inboxes(prefix)
    recorder = Recorder()
    topic = f"test.inbox.{uid}"
    await inboxes.subscribe(topic, recorder)
    original = event(1, key="same")
    await transport.publish(topic, original)
    await transport.publish(topic, original)  # a producer-side retry of the same event
    await transport.publish(topic, event(2, key="same"))
    await eventually(lambda: 2 in recorder.numbers(), "the event after the copy", timeout=WAIT)
    assert recorder.numbers() == [1, 2]


async def test_a_paused_or_full_inbox_holds_only_its_own_records(
    transport: KafkaTransport, prefix: str, uid: str
) -> None:
    inboxes = transport.inboxes(prefix)
    paused, flowing = Recorder(), Recorder()
    release = asyncio.Event()
    started: list[int] = []

    async def slow(delivery: Delivery) -> None:
        started.append(delivery.offset)
        await release.wait()

    names = {name: f"test.inbox.{uid}.{name}" for name in ("paused", "slow", "flowing")}
    subscriptions = await asyncio.gather(
        inboxes.subscribe(names["paused"], paused),
        inboxes.subscribe(names["slow"], slow, max_in_flight=2),  # a full, bounded mailbox
        inboxes.subscribe(names["flowing"], flowing),
    )
    subscriptions[0].pause()
    for n in range(3):
        await transport.publish(names["paused"], event(n))
    for n in range(10):
        await transport.publish(names["slow"], event(n))
    await eventually(lambda: len(started) == 2, "the slow inbox full", timeout=WAIT)
    for n in range(10):
        await transport.publish(names["flowing"], event(n))

    await eventually(
        lambda: len(flowing.deliveries) == 10, "the other inbox's records", timeout=WAIT
    )
    await asyncio.sleep(0.5)  # several fetches
    assert paused.deliveries == []
    assert len(started) == 2  # never more than max_in_flight

    subscriptions[0].resume()
    await eventually(
        lambda: len(paused.deliveries) == 3, "the paused inbox's records", timeout=WAIT
    )
    release.set()
    await eventually(lambda: len(started) == 10, "the slow inbox's records", timeout=WAIT)
    assert sorted(paused.numbers()) == [0, 1, 2]


async def test_another_composition_consuming_an_inbox_is_refused(
    transport: KafkaTransport, kafka_bootstrap: str, prefix: str, uid: str
) -> None:
    shared, own, other = (f"test.inbox.{uid}.{name}" for name in ("shared", "own", "other"))
    first = transport.inboxes(prefix)
    await asyncio.gather(first.subscribe(shared, Recorder()), first.subscribe(own, Recorder()))

    async with KafkaTransport(
        kafka_bootstrap, dlq_topic=f"test.dlq.{uid}", join_timeout=2.0
    ) as elsewhere:
        second = elsewhere.inboxes(prefix)
        recorder = Recorder()
        # Subscribed together: the refused inbox does not take the other down.
        refused, served = await asyncio.gather(
            second.subscribe(shared, Recorder()),
            second.subscribe(other, recorder),
            return_exceptions=True,
        )
        assert isinstance(refused, InboxConflict)
        assert (refused.topic, refused.group, refused.other) == (
            shared,
            composition_group(prefix, [shared, other]),
            first.group,
        )
        assert shared in str(refused) and refused.group in str(refused)
        assert str(first.group) in str(refused)

        # An inbox no other composition consumes is served as usual.
        assert not isinstance(served, BaseException)
        assert second.group == composition_group(prefix, [other])
        await elsewhere.publish(other, event(7))
        await eventually(
            lambda: recorder.numbers() == [7], "the event of the other inbox", timeout=WAIT
        )


async def test_inboxes_subscribed_one_after_another_on_a_running_consumer_join_together(
    transport: KafkaTransport, kafka_bootstrap: str, prefix: str, uid: str
) -> None:
    """Once the consumer joined, a subscribe of a topic the transport does not know
    returns without waiting for a join, so agents spawned one after another cost a
    few rejoins, not one each; records sent before the join are handled."""
    first = f"test.inbox.{uid}.first"
    inboxes = transport.inboxes(prefix)
    await inboxes.subscribe(first, Recorder())  # the first join waits
    topics = [f"test.inbox.{uid}.later{i}" for i in range(10)]
    recorders = {topic: Recorder() for topic in topics}
    for topic in topics:
        await inboxes.subscribe(topic, recorders[topic])
    for n, topic in enumerate(topics):
        await transport.publish(topic, event(n))
    await eventually(
        lambda: all(r.deliveries for r in recorders.values()), "one event each", timeout=WAIT
    )
    assert [recorders[t].numbers() for t in topics] == [[n] for n in range(10)]
    # The first composition, then one with all ten.
    assert await groups_named(kafka_bootstrap, prefix) == {
        composition_group(prefix, [first]),
        composition_group(prefix, [first, *topics]),
    }


async def test_an_inbox_subscribed_without_waiting_that_another_composition_consumes_is_dropped(
    transport: KafkaTransport, kafka_bootstrap: str, prefix: str, uid: str
) -> None:
    """The join refuses it as it would have refused the subscribe; the process's
    other inboxes are served."""
    shared, own, more = (f"test.inbox.{uid}.{name}" for name in ("shared", "own", "more"))
    await transport.inboxes(prefix).subscribe(shared, Recorder())
    async with KafkaTransport(
        kafka_bootstrap, dlq_topic=f"test.dlq.{uid}", join_timeout=1.0
    ) as elsewhere:
        inboxes = elsewhere.inboxes(prefix)
        recorder = Recorder()
        await inboxes.subscribe(own, recorder)
        await inboxes.subscribe(shared, Recorder())  # unknown here: returns at once
        await inboxes.subscribe(more, recorder)
        await elsewhere.publish(own, event(1))
        await elsewhere.publish(more, event(2))
        await eventually(
            lambda: sorted(recorder.numbers()) == [1, 2], "the other inboxes", timeout=WAIT
        )
        assert inboxes.group == composition_group(prefix, [own, more])


async def test_a_composition_change_neither_loses_nor_repeats_a_record(
    kafka_bootstrap: str, prefix: str, uid: str
) -> None:
    """Inboxes come and go while records flow and handlers run: every record is
    handled once, none flagged. The last change returns to a composition seen
    before, whose group's commits are older than another group's."""
    # A window that holds the records in flight at a change, not a replay.
    async with KafkaTransport(
        kafka_bootstrap, dlq_topic=f"test.dlq.{uid}", dedup_window=100
    ) as transport:
        assert isinstance(transport, KafkaTransport)
        await change_compositions(transport, transport.inboxes(prefix), uid)


async def change_compositions(transport: KafkaTransport, inboxes: Inboxes, uid: str) -> None:
    a, b, c = (f"test.inbox.{uid}.{name}" for name in "abc")
    handled: dict[str, list[int]] = {a: [], b: [], c: []}
    flagged: list[tuple[str, int]] = []

    async def handler(delivery: Delivery) -> None:
        data = delivery.event.get_data()
        assert isinstance(data, dict)
        if delivery.redelivered:
            flagged.append((delivery.topic, data["n"]))
        await asyncio.sleep(random.random() * 0.01)  # records in flight at each change
        handled[delivery.topic].append(data["n"])

    published = 0
    publishing = True

    async def publish() -> None:
        nonlocal published
        while publishing:
            await asyncio.gather(
                *(transport.publish(t, event(published, key=f"k{published}")) for t in (a, b, c))
            )
            published += 1
            await asyncio.sleep(0.005)

    subscriptions = dict(
        zip(
            (a, b),
            await asyncio.gather(inboxes.subscribe(a, handler), inboxes.subscribe(b, handler)),
            strict=True,
        )
    )
    publisher = asyncio.create_task(publish())

    async def flowing(more: int) -> None:
        target = len(handled[a]) + more
        await eventually(lambda: len(handled[a]) >= target, f"{more} more records", timeout=WAIT)

    await flowing(100)
    subscriptions[c] = await inboxes.subscribe(c, handler)  # added
    await flowing(100)
    await subscriptions.pop(b).stop()  # removed
    await flowing(100)
    subscriptions[b] = await inboxes.subscribe(b, handler)  # back to {a, b, c}
    await flowing(100)
    publishing = False
    await publisher

    await eventually(
        lambda: all(len(numbers) >= published for numbers in handled.values()),
        "every record",
        timeout=WAIT,
    )
    await asyncio.sleep(0.5)  # a repeat would arrive right behind
    for topic, numbers in handled.items():
        assert sorted(numbers) == list(range(published)), topic
    assert flagged == []


async def test_a_process_with_another_set_of_agents_takes_over_where_the_last_stopped(
    kafka_bootstrap: str, prefix: str, uid: str
) -> None:
    """A redeploy with another composition starts each inbox at the previous
    group's commit, and that group's lease marks exactly what it handed out."""
    inbox, gone, new = (f"test.inbox.{uid}.{name}" for name in ("kept", "gone", "new"))
    first: list[int] = []

    async def stuck_on_three(delivery: Delivery) -> None:
        data = delivery.event.get_data()
        assert isinstance(data, dict)
        if data["n"] == 3:
            await asyncio.Event().wait()  # never finishes: cancelled at stop
        first.append(data["n"])

    options: dict[str, Any] = {
        "partitions": 1,
        "inbox_partitions": 1,
        "dlq_topic": f"test.dlq.{uid}",
    }
    async with KafkaTransport(kafka_bootstrap, drain_timeout=0.2, **options) as before:
        assert isinstance(before, KafkaTransport)
        inboxes = before.inboxes(prefix)
        await asyncio.gather(
            inboxes.subscribe(inbox, stuck_on_three), inboxes.subscribe(gone, Recorder())
        )
        for n in range(5):
            await before.publish(inbox, event(n, key=f"k{n}"))
        await eventually(lambda: sorted(first) == [0, 1, 2, 4], "4 handled before", timeout=WAIT)
    # stopped with record 3 unfinished: not committed, and 4 handed out after it

    async with KafkaTransport(kafka_bootstrap, **options) as after:
        assert isinstance(after, KafkaTransport)
        await after.publish(inbox, event(5, key="k5"))
        second = Recorder()
        inboxes = after.inboxes(prefix)
        await asyncio.gather(inboxes.subscribe(inbox, second), inboxes.subscribe(new, Recorder()))
        assert inboxes.group != composition_group(prefix, [inbox, gone])
        await eventually(
            lambda: 5 in second.numbers(), "the record after the handover", timeout=WAIT
        )
        await asyncio.sleep(0.3)  # a (wrong) replay would arrive right behind

        redelivered = after.redelivered  # what the gateway's metrics show
    flags = {d.event.get_data()["n"]: d.redelivered for d in second.deliveries}  # type: ignore[index]
    assert flags == {3: True, 4: True, 5: False}
    assert redelivered == 2


async def test_an_inbox_consumed_by_a_group_of_its_own_before_is_taken_over_at_its_commit(
    kafka_bootstrap: str, prefix: str, uid: str
) -> None:
    """Upgrading from one group per inbox (named after the topic) neither replays what
    that group handled nor skips what it had not."""
    inbox = f"test.inbox.{uid}.upgraded"
    options: dict[str, Any] = {
        "partitions": 1,
        "inbox_partitions": 1,
        "dlq_topic": f"test.dlq.{uid}",
    }
    async with KafkaTransport(kafka_bootstrap, **options) as before:
        assert isinstance(before, KafkaTransport)
        earlier = Recorder()
        subscription = await before.subscribe([inbox], inbox, earlier, from_beginning=True)
        for n in range(3):
            await before.publish(inbox, event(n))
        await eventually(
            lambda: earlier.numbers() == [0, 1, 2], "the old group's records", timeout=WAIT
        )
        await subscription.stop()  # commits what it handled
    async with KafkaTransport(kafka_bootstrap, **options) as after:
        assert isinstance(after, KafkaTransport)
        await after.publish(inbox, event(3))
        later = Recorder()
        await after.inboxes(prefix).subscribe(inbox, later)
        await eventually(lambda: 3 in later.numbers(), "the record after the upgrade", timeout=WAIT)
        await asyncio.sleep(0.3)  # a (wrong) replay would arrive right behind
    assert later.numbers() == [3]


async def test_a_group_of_its_own_still_consuming_an_inbox_is_a_conflict(
    kafka_bootstrap: str, transport: KafkaTransport, prefix: str, uid: str
) -> None:
    """A process of an earlier version (one group per inbox) still running beside a
    new one would handle that agent's requests twice: the new one refuses."""
    inbox = f"test.inbox.{uid}.shared"
    running = await transport.subscribe([inbox], inbox, Recorder(), from_beginning=True)
    try:
        async with KafkaTransport(kafka_bootstrap, join_timeout=2, dlq_topic=f"d.{uid}") as other:
            assert isinstance(other, KafkaTransport)
            with pytest.raises(InboxConflict) as refused:
                await other.inboxes(prefix).subscribe(inbox, Recorder())
        assert refused.value.other == inbox
    finally:
        await running.stop()


async def test_an_undecodable_record_goes_to_the_dlq_and_is_committed(
    transport: KafkaTransport, kafka_bootstrap: str, prefix: str, uid: str
) -> None:
    inboxes = transport.inboxes(prefix)
    topic = f"test.inbox.{uid}"
    recorder = Recorder()
    await inboxes.subscribe(topic, recorder)
    await transport.publish_raw(topic, b"\x00\xffnot json", key=b"k")
    await transport.publish_raw(topic, b'{"jsonrpc": "2.0", "method": "ok"}', key=b"k")
    await eventually(lambda: len(recorder.deliveries) == 1, "the good record", timeout=WAIT)

    reader = AIOKafkaConsumer(
        transport.settings.dlq_topic,
        bootstrap_servers=kafka_bootstrap,
        auto_offset_reset="earliest",
    )
    await reader.start()
    try:
        letters: list[Any] = []
        async with asyncio.timeout(WAIT):
            while not letters:
                for records in (await reader.getmany(timeout_ms=200)).values():
                    letters.extend(records)
    finally:
        await reader.stop()
    [letter] = letters
    headers = dict(letter.headers)
    assert letter.value == b"\x00\xffnot json"
    assert headers["a2a-dlq-reason"].startswith(b"undecodable: Parse error")
    assert headers["a2a-dlq-source-topic"] == topic.encode()
    group = inboxes.group
    assert group is not None
    tp = TopicPartition(topic, recorder.deliveries[0].partition)
    for _ in range(int(WAIT / 0.05)):  # past the garbage and the good one
        if await committed(transport, group, tp) == 2:
            break
        await asyncio.sleep(0.05)
    assert await committed(transport, group, tp) == 2


# -- processes -----------------------------------------------------------------------


StartWorker = Callable[[list[str], float], Awaitable[Worker]]


@pytest.fixture
async def start_worker(
    kafka_bootstrap: str, prefix: str, tmp_path: Path
) -> AsyncIterator[StartWorker]:
    """Starts worker processes on ``tmp_path/handled.jsonl`` (ready when returned)."""
    started: list[Worker] = []

    async def start(topics: list[str], delay: float) -> Worker:
        errors = tmp_path / f"worker-{len(started)}.err"
        worker = await start_worker_process(
            WORKER,
            [
                kafka_bootstrap,
                prefix,
                str(tmp_path / "handled.jsonl"),
                *topics,
                "--delay",
                str(delay),
            ],
            errors,
        )
        started.append(worker)
        return worker

    yield start
    await kill_all(started)


async def wait_until_committed_topics(kafka: KafkaTransport, group: str, topics: list[str]) -> None:
    """Wait until ``group`` committed the end of every partition of ``topics``."""
    await wait_until_committed(kafka, group, await kafka.partitions(topics))


def read_log(tmp_path: Path) -> list[dict[str, Any]]:
    """Handled records in the order they were handled (one shared append-only file)."""
    log = tmp_path / "handled.jsonl"
    if not log.exists():
        return []
    return [orjson.loads(line) for line in log.read_bytes().splitlines()]


async def test_two_processes_of_one_composition_share_the_records_and_handle_each_once(
    transport: KafkaTransport, start_worker: StartWorker, prefix: str, uid: str, tmp_path: Path
) -> None:
    topics = [f"test.inbox.{uid}.{i}" for i in range(3)]
    workers = [await start_worker(topics, 0.0) for _ in range(2)]
    for n in range(300):
        await transport.publish(topics[n % 3], event(n, key=f"k{n}"))
    await eventually(lambda: len(read_log(tmp_path)) >= 300, "300 records handled", timeout=WAIT)
    await wait_until_committed_topics(transport, composition_group(prefix, topics), topics)
    for worker in workers:
        assert await worker.terminate() == 0

    handled = read_log(tmp_path)
    assert sorted(entry["n"] for entry in handled) == list(range(300))  # each exactly once
    assert {entry["pid"] for entry in handled} == {w.pid for w in workers}  # both took a share
    assert not any(entry["redelivered"] for entry in handled)


async def test_a_killed_process_records_come_back_flagged_and_no_others(
    transport: KafkaTransport, start_worker: StartWorker, prefix: str, uid: str, tmp_path: Path
) -> None:
    topics = [f"test.inbox.{uid}.{i}" for i in range(3)]
    total = 900
    # The victim finishes no record before it is killed: whatever it took is still in
    # flight then, however late the kill comes (with a short wait it could finish its
    # share first on a loaded machine, and nothing would come back).
    victim = await start_worker(topics, 10 * WAIT)
    survivor = await start_worker(topics, 0.02)
    for n in range(total):
        await transport.publish(topics[n % 3], event(n, key=f"k{n}"))
    # Killed once it holds records and takes no more (its slots, 64 a topic, are
    # full or its partitions empty): a record it was about to hand out when killed
    # would come back flagged on a partition it never logged.
    taken: list[int] = []

    def settled() -> bool:
        taken.append(sum(e["pid"] == victim.pid for e in read_log(tmp_path)))
        return (
            len(taken) > SETTLED_LOOKS and taken[-1] >= 30 and len(set(taken[-SETTLED_LOOKS:])) == 1
        )

    await eventually(settled, "the victim at work, taking no more", timeout=WAIT)
    victim.kill()
    await victim.process.wait()

    await eventually(
        lambda: {e["n"] for e in read_log(tmp_path)} == set(range(total)),
        "every record",
        timeout=WAIT,
    )
    await wait_until_committed_topics(transport, composition_group(prefix, topics), topics)
    assert await survivor.terminate() == 0

    handled = read_log(tmp_path)
    victims_partitions = {(e["topic"], e["partition"]) for e in handled if e["pid"] == victim.pid}
    first_by: dict[int, int] = {}
    for entry in handled:
        if entry["n"] in first_by:
            # a repeat is a flagged redelivery of the killed process's work
            assert entry["redelivered"], entry
            assert first_by[entry["n"]] == victim.pid, entry
        else:
            first_by[entry["n"]] = entry["pid"]
        if entry["redelivered"]:
            # only records of partitions the killed process owned come back flagged
            assert entry["pid"] == survivor.pid, entry
            assert (entry["topic"], entry["partition"]) in victims_partitions, entry
    repeats = sum(Counter(e["n"] for e in handled).values()) - total
    assert repeats > 0  # the victim had records in flight when it was killed
    assert any(e["pid"] == survivor.pid and e["redelivered"] for e in handled)


async def test_an_inbox_topic_this_transport_created_is_read_from_its_first_retained_record(
    kafka_bootstrap: str, prefix: str, uid: str
) -> None:
    """A topic the transport created began empty, so its inbox starts at offset 0
    without asking the broker (whose new partitions answer late); records deleted
    below the log start meanwhile are skipped, none after it, none flagged."""
    inbox = f"test.inbox.{uid}.created"
    options: dict[str, Any] = {
        "partitions": 1,
        "inbox_partitions": 1,
        "dlq_topic": f"test.dlq.{uid}",
    }
    async with (
        KafkaTransport(kafka_bootstrap, **options) as creator,
        KafkaTransport(kafka_bootstrap, **options) as other,
    ):
        assert isinstance(creator, KafkaTransport) and isinstance(other, KafkaTransport)
        await creator.ensure_topics([inbox])
        await other.ensure_topics([inbox])
        assert creator.created(inbox)
        assert not other.created(inbox)  # it found the topic there
        for n in range(6):
            await other.publish(inbox, event(n))
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        await admin.start()
        try:
            await admin.delete_records({TopicPartition(inbox, 0): RecordsToDelete(2)})
        finally:
            await admin.close()
        recorder = Recorder()
        await creator.inboxes(prefix).subscribe(inbox, recorder)
        await eventually(
            lambda: len(recorder.deliveries) >= 4, "the retained records", timeout=WAIT
        )
        group = composition_group(prefix, [inbox])
        await wait_until_committed_topics(creator, group, [inbox])
    assert recorder.numbers() == [2, 3, 4, 5]
    assert not any(delivery.redelivered for delivery in recorder.deliveries)


def test_the_inbox_consumer_waits_longer_the_more_partitions_it_fetches() -> None:
    settings = KafkaSettings()
    waits = [idle_fetch_wait(settings, partitions) for partitions in (30, 300, 3_000, 30_000)]
    assert waits == [settings.fetch_max_wait_ms, 450, 4_500, settings.inbox_fetch_max_wait_ms]
    assert idle_fetch_wait(KafkaSettings(inbox_fetch_max_wait_ms=1_000), 3_000) == 1_000
