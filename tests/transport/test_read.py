"""Reading a subject's retained events (``AsyncClient.read`` / ``Transport.read``),
run on both transports: the in-memory one and a real Kafka broker."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from a2a_bus import Bus
from a2a_bus.core.routing import RoutingError
from a2a_bus.protocol import new_event
from a2a_bus.transport.base import Delivery
from a2a_bus.transport.memory.transport import MemoryTransport
from a2a_bus.transport.positions import encode_cursor, parse_cursor
from tests.buses import eventually

WAIT = 30.0  # upper bound on any single await; never a performance assertion
PARTITIONS = 3


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
async def bus(request: pytest.FixtureRequest) -> AsyncIterator[Bus]:
    """A started bus with 3 partitions per topic and a prefix of its own."""
    options: dict[str, Any] = {"prefix": f"r{uuid.uuid4().hex[:10]}", "heartbeat": 60.0}
    if request.param == "memory":
        running = Bus.memory(partitions=PARTITIONS, **options)
    else:
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        running = Bus.kafka(bootstrap, bus_options=options, partitions=PARTITIONS)
    await asyncio.wait_for(running.astart(), WAIT)
    yield running
    await asyncio.wait_for(running.astop(), WAIT)


async def publish(bus: Bus, subject: str, numbers: range) -> None:
    """Events ``{"n": i}``, keyed by ``i % 7`` so they spread over every partition."""
    client = bus.async_client()
    for i in numbers:
        await client.publish(subject, {"n": i}, partitionkey=f"k{i % 7}")


def numbers(events: list[Any]) -> list[int]:
    return [event.get_data()["n"] for event in events]


async def test_pages_oldest_first_without_gap_or_repeat(bus: Bus) -> None:
    client = bus.async_client()
    await publish(bus, "orders.created", range(30))
    pages: list[list[int]] = []
    cursor = None
    for _ in range(4):
        page = await asyncio.wait_for(client.read("orders.created", limit=11, cursor=cursor), WAIT)
        pages.append(numbers(page.events))
        cursor = page.cursor
    assert [len(p) for p in pages] == [11, 11, 8, 0]
    seen = [n for p in pages for n in p]
    assert sorted(seen) == list(range(30))
    for key in range(7):  # one key, one partition: its events keep their order
        mine = [n for n in seen if n % 7 == key]
        assert mine == sorted(mine)
    position = parse_cursor(bus.topics.subject("orders.created"), cursor)
    assert sorted(position) == list(range(PARTITIONS))
    assert sum(position.values()) == 30 and all(position.values())
    # The last cursor goes on with what is published later, and only that.
    await publish(bus, "orders.created", range(30, 32))
    later = await asyncio.wait_for(client.read("orders.created", cursor=cursor), WAIT)
    assert sorted(numbers(later.events)) == [30, 31]


async def test_newest_gives_the_last_events_and_a_cursor_after_them(bus: Bus) -> None:
    client = bus.async_client()
    await publish(bus, "news.sport", range(7))
    await asyncio.sleep(0.01)  # Kafka orders partitions by millisecond record time
    await publish(bus, "news.sport", range(7, 12))
    page = await asyncio.wait_for(client.read("news.sport", limit=5, newest=True), WAIT)
    assert sorted(numbers(page.events)) == [7, 8, 9, 10, 11]
    everything = await asyncio.wait_for(client.read("news.sport", limit=50, newest=True), WAIT)
    assert sorted(numbers(everything.events)) == list(range(12))
    after = await asyncio.wait_for(client.read("news.sport", cursor=page.cursor), WAIT)
    assert after.events == []
    await publish(bus, "news.sport", range(12, 13))
    after = await asyncio.wait_for(client.read("news.sport", cursor=page.cursor), WAIT)
    assert numbers(after.events) == [12]


async def test_bad_limits_cursors_and_subjects_are_refused(bus: Bus) -> None:
    client = bus.async_client()
    await publish(bus, "a.b", range(3))
    topic = bus.topics.subject("a.b")
    for limit in (0, 1001, -1):
        with pytest.raises(ValueError, match="limit must be an integer from 1 to 1000"):
            await client.read("a.b", limit=limit)
    with pytest.raises(ValueError, match="not a cursor returned by an earlier read"):
        await client.read("a.b", cursor="not a cursor!")
    other = (await client.read("c.d")).cursor
    with pytest.raises(ValueError, match="another topic"):
        await client.read("a.b", cursor=other)
    with pytest.raises(ValueError, match="has 3 partition\\(s\\), the cursor names partition 7"):
        await client.read("a.b", cursor=encode_cursor(topic, {0: 0, 7: 0}))
    with pytest.raises(ValueError, match="takes no cursor"):
        await client.read("a.b", newest=True, cursor=(await client.read("a.b")).cursor)
    with pytest.raises(RoutingError, match="wildcards select subjects to subscribe to"):
        await client.read("a.*")
    with pytest.raises(RoutingError, match="invalid subject"):
        await client.read("a b")


async def test_an_unknown_subject_is_an_empty_page_and_is_not_created(bus: Bus) -> None:
    client = bus.async_client()
    page = await asyncio.wait_for(client.read("never.published"), WAIT)
    assert (page.events, page.undecodable) == ([], 0)
    topic = bus.topics.subject("never.published")
    if isinstance(bus.transport, MemoryTransport):
        assert bus.transport.writes.get(topic) is None
    else:
        assert topic not in await bus.transport.list_topics()  # type: ignore[attr-defined]
    # Its cursor reads the topic from the start once it exists.
    await publish(bus, "never.published", range(2))
    page = await asyncio.wait_for(client.read("never.published", cursor=page.cursor), WAIT)
    assert sorted(numbers(page.events)) == [0, 1]


async def test_reading_leaves_a_subscribed_group_where_it_was(bus: Bus) -> None:
    client = bus.async_client()
    topic = bus.topics.subject("jobs")
    group = f"{bus.topics.prefix}.workers"
    got: list[int] = []

    async def on_event(delivery: Delivery) -> None:
        got.append(delivery.event.get_data()["n"])

    await publish(bus, "jobs", range(1))  # the topic exists before the group joins
    subscription = await asyncio.wait_for(bus.transport.subscribe([topic], group, on_event), WAIT)
    try:
        await publish(bus, "jobs", range(1, 6))
        await eventually(lambda: len(got) == 5)
        await eventually_committed(bus, group, topic, 6)
        for newest in (False, True):
            await asyncio.wait_for(client.read("jobs", limit=1000, newest=newest), WAIT)
        assert await committed(bus, group, topic) == 6
        await publish(bus, "jobs", range(6, 9))
        await eventually(lambda: len(got) == 8)
        assert sorted(got) == list(range(1, 9))  # the new ones, and nothing again
    finally:
        await asyncio.wait_for(subscription.stop(), WAIT)


async def committed(bus: Bus, group: str, topic: str) -> int:
    """The group's committed offsets on ``topic``, summed over its partitions."""
    transport = bus.transport
    if isinstance(transport, MemoryTransport):
        return transport.committed(group, topic)
    from aiokafka import TopicPartition

    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    offsets = await transport.committed_offsets(group, partitions)  # type: ignore[attr-defined]
    return sum(max(offset, 0) for offset, _ in offsets.values())


async def eventually_committed(bus: Bus, group: str, topic: str, count: int) -> None:
    deadline = time.monotonic() + WAIT
    while await committed(bus, group, topic) != count:
        if time.monotonic() > deadline:
            raise AssertionError(f"the group never committed {count} records")
        await asyncio.sleep(0.02)


async def test_undecodable_records_are_counted_and_skipped_without_a_dead_letter(
    bus: Bus,
) -> None:
    client = bus.async_client()
    topic = bus.topics.subject("mixed")
    await publish(bus, "mixed", range(2))
    await bus.transport.publish_raw(topic, b"\x00 not json", key=b"k0")
    await publish(bus, "mixed", range(2, 4))
    await bus.transport.publish_raw(topic, b"{}", key=b"k9")  # JSON, but no event: the last
    page = await asyncio.wait_for(client.read("mixed", limit=10), WAIT)
    assert sorted(numbers(page.events)) == [0, 1, 2, 3]
    assert page.undecodable == 2
    assert bus.transport.dead_lettered == 0
    if isinstance(bus.transport, MemoryTransport):
        assert bus.transport.writes.get(bus.topics.dlq) is None
    # The garbage was consumed by that page: the next one neither repeats nor counts it.
    after = await asyncio.wait_for(client.read("mixed", cursor=page.cursor), WAIT)
    assert (after.events, after.undecodable) == ([], 0)
    newest = await asyncio.wait_for(client.read("mixed", limit=10, newest=True), WAIT)
    assert (len(newest.events), newest.undecodable) == (4, 2)


async def test_undecodable_records_do_not_count_toward_the_limit() -> None:
    async with MemoryTransport(partitions=1) as transport:
        for _ in range(3):
            await transport.publish_raw("t", b"garbage")
        await transport.publish("t", new_event({"source": "s", "type": "x"}, {"n": 1}))
        batch = await transport.read("t", limit=1)
        assert (numbers(batch.events), batch.undecodable, batch.position) == ([1], 3, {0: 4})


async def test_a_compacted_topic_shows_the_latest_event_per_key() -> None:
    async with MemoryTransport(partitions=2, compacted=["registry"]) as transport:
        for n, key in enumerate([b"a", b"b", b"a", b"c", b"b"]):
            event = new_event({"source": "s", "type": "x"}, {"n": n, "key": key.decode()})
            await transport.publish("registry", event, key=key)
        batch = await transport.read("registry", limit=10)
        assert sorted((e.get_data()["key"], e.get_data()["n"]) for e in batch.events) == [
            ("a", 2),
            ("b", 4),
            ("c", 3),
        ]
        newest = await transport.read("registry", limit=10, newest=True)
        assert sorted(numbers(newest.events)) == [2, 3, 4]


async def test_trimmed_records_are_gone_and_a_stale_position_goes_on_from_the_oldest() -> None:
    async with MemoryTransport(partitions=1, retention=5) as transport:
        for n in range(2):
            await transport.publish("t", new_event({"source": "s", "type": "x"}, {"n": n}))
        first = await transport.read("t", limit=1)
        assert numbers(first.events) == [0]
        for n in range(2, 40):
            await transport.publish("t", new_event({"source": "s", "type": "x"}, {"n": n}))
        batch = await transport.read("t", limit=1000, position=first.position)
        retained = numbers(batch.events)
        assert retained == list(range(40 - len(retained), 40)) and 5 <= len(retained) < 40
        assert batch.position == {0: 40}


def test_the_sync_client_reads_too() -> None:
    with Bus.memory(partitions=PARTITIONS) as bus:
        client = bus.client()
        for n in range(3):
            client.publish("sync.read", {"n": n})
        page = client.read("sync.read", limit=2)
        rest = client.read("sync.read", cursor=page.cursor)
        assert sorted(numbers(page.events) + numbers(rest.events)) == [0, 1, 2]
        assert len(page.events) == 2
        with pytest.raises(ValueError, match="limit"):
            client.read("sync.read", limit=0)


@pytest.mark.kafka
async def test_a_kafka_read_is_bounded_by_the_request_timeout(kafka_bootstrap: str) -> None:
    from a2a_bus.transport.kafka.transport import KafkaTransport

    async with KafkaTransport(kafka_bootstrap) as transport:
        topic = f"read-{uuid.uuid4().hex[:10]}"
        await transport.publish(topic, new_event({"source": "s", "type": "x"}, {"n": 1}))
        assert len((await transport.read(topic, limit=5)).events) == 1
        # A deadline already passed when the read starts: it ends at its first wait.
        transport.settings = replace(transport.settings, request_timeout_ms=0)
        with pytest.raises(TimeoutError, match=f"reading topic '{topic}' took longer than"):
            await asyncio.wait_for(transport.read(topic, limit=5), WAIT)


async def test_end_offsets_say_where_each_partition_ends_and_nothing_for_an_unknown_topic(
    bus: Bus,
) -> None:
    """What a reader must have read to have seen everything written before the call:
    as many records as were written, over every partition, as a newest read ends."""
    topic = bus.topics.subject("offsets.seen")
    assert await asyncio.wait_for(bus.transport.end_offsets(topic), WAIT) == {}
    await publish(bus, "offsets.seen", range(20))
    ends = await asyncio.wait_for(bus.transport.end_offsets(topic), WAIT)
    assert sorted(ends) == list(range(PARTITIONS))
    assert sum(ends.values()) == 20
    newest = await asyncio.wait_for(bus.transport.read(topic, limit=1, newest=True), WAIT)
    assert ends == newest.position
    await publish(bus, "offsets.seen", range(20, 25))
    later = await asyncio.wait_for(bus.transport.end_offsets(topic), WAIT)
    assert sum(later.values()) == 25 and all(later[p] >= ends[p] for p in ends)
