"""Reading the agent registry: a record on it that is no card is dead-lettered once, not at
every bus start that reads the registry again; tombstones are no junk.

Both transports; the Kafka variants run on the real broker. The junk comes from
an outside producer: a transport of its own (in memory, the shared transport).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from a2a_bus import Bus
from a2a_bus.core.routing import Topics
from a2a_bus.transport.base import Delivery, Transport
from a2a_bus.transport.dead_letters import DLQ_REASON, DLQ_SOURCE_TOPIC
from a2a_bus.transport.memory.transport import MemoryTransport
from tests.agents import Calc

pytestmark = pytest.mark.timeout(180)

WAIT = 30.0  # upper bound on any single await; never a performance assertion
JUNK = b"{not a card"


class Registry:
    """Buses on one prefix, and an outside producer writing to their registry."""

    def __init__(self, kind: str, bootstrap: str | None) -> None:
        self.kind = kind
        self.bootstrap = bootstrap
        self.topics = Topics(f"t{uuid.uuid4().hex[:10]}")
        self.outsider: Transport
        if kind == "memory":
            self.outsider = MemoryTransport(dlq_topic=self.topics.dlq)
        else:
            from a2a_bus.transport.kafka.transport import KafkaTransport

            self.outsider = KafkaTransport(
                bootstrap, dlq_topic=self.topics.dlq, metadata_max_age_ms=1000
            )
        self.outsider.declare_compacted(self.topics.registry)
        self.buses: list[Bus] = []

    async def start_bus(self, *agents: Any, **options: Any) -> Bus:
        options = {"prefix": self.topics.prefix, "heartbeat": 60.0, **options}
        if self.kind == "memory":
            bus = Bus(self.outsider, **options)  # the same in-process topics
        else:
            bus = Bus.kafka(self.bootstrap, bus_options=options, metadata_max_age_ms=1000)
        for agent in agents:
            bus.spawn(agent)
        await asyncio.wait_for(bus.astart(), WAIT)
        self.buses.append(bus)
        return bus

    async def stop_bus(self, bus: Bus) -> None:
        self.buses.remove(bus)
        await asyncio.wait_for(bus.astop(), WAIT)
        if self.kind == "memory":
            await self.outsider.start()  # a bus stops the transport it shares

    async def write(self, value: bytes | None, key: bytes | None) -> None:
        await self.outsider.publish_raw(self.topics.registry, value, key=key)

    async def records(self, topic: str) -> int:
        """Records ever written to ``topic`` (the sum of its partitions' ends)."""
        ends = (await self.outsider.read(topic, limit=1, newest=True)).position
        return sum(ends.values())

    async def until_records(self, topic: str, count: int) -> None:
        async with asyncio.timeout(WAIT):
            while await self.records(topic) < count:
                await asyncio.sleep(0.05)

    async def dead_letters(self) -> list[Any]:
        """The records of the dead-letter topic (read through a group: they are raw)."""
        expected = await self.records(self.topics.dlq)
        letters: list[Delivery] = []
        undecodable: list[Any] = []
        arrived = asyncio.Event()

        async def on_letter(delivery: Delivery) -> None:
            letters.append(delivery)
            arrived.set()

        async def on_raw(record: Any) -> None:
            undecodable.append(record)
            arrived.set()

        subscription = await self.outsider.subscribe(
            [self.topics.dlq],
            f"{self.topics.dlq}.reader.{uuid.uuid4().hex[:6]}",
            on_letter,
            from_beginning=True,
            on_undecodable=on_raw,
            durable=False,
            dead_letter=False,
        )
        try:
            async with asyncio.timeout(WAIT):
                while len(letters) + len(undecodable) < expected:
                    arrived.clear()
                    await arrived.wait()
        finally:
            await subscription.stop()
        return [*letters, *undecodable]


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
async def registry(request: pytest.FixtureRequest) -> AsyncIterator[Registry]:
    bootstrap = request.getfixturevalue("kafka_bootstrap") if request.param == "kafka" else None
    registry = Registry(request.param, bootstrap)
    await registry.outsider.start()
    yield registry
    for bus in reversed(registry.buses):
        await asyncio.wait_for(bus.astop(), WAIT)
    await registry.outsider.stop()


def header(letter: Any, name: str) -> str:
    return dict(letter.headers)[name].decode()


async def test_junk_found_at_start_is_dead_lettered_once_over_two_starts(
    registry: Registry,
) -> None:
    await registry.write(JUNK, key=b"junk")  # while no bus runs
    first = await registry.start_bus()
    await registry.stop_bus(first)
    second = await registry.start_bus()
    assert await registry.records(registry.topics.dlq) == 1
    if registry.kind == "kafka":  # the in-memory DLQ hands no undecodable record to a reader
        [letter] = await registry.dead_letters()
        assert header(letter, DLQ_SOURCE_TOPIC) == registry.topics.registry
        assert header(letter, DLQ_REASON).startswith("undecodable: ")
        assert letter.key == b"junk"
    # The second start found the junk tombstoned and wrote nothing.
    assert await registry.records(registry.topics.registry) == 2  # the junk, its tombstone
    assert second.directory.cards() == []


async def test_junk_arriving_live_is_dead_lettered_once_and_not_again_at_starts(
    registry: Registry,
) -> None:
    first = await registry.start_bus()
    await registry.write(JUNK, key=b"junk")
    await registry.until_records(registry.topics.registry, 2)  # the junk, its tombstone
    await registry.start_bus()
    await registry.stop_bus(first)
    await registry.start_bus()
    assert await registry.records(registry.topics.dlq) == 1
    assert await registry.records(registry.topics.registry) == 2


async def test_an_agent_whose_id_is_the_junk_key_is_still_found(registry: Registry) -> None:
    await registry.start_bus(Calc)
    # The junk replaces calc's card in compaction; the tombstone deletes the key.
    await registry.write(JUNK, key=b"calc")
    # Its host answers the tombstone with its card at once (no heartbeat for 60 s).
    await registry.until_records(registry.topics.registry, 4)  # card, junk, tombstone, card
    fresh = await registry.start_bus()
    assert fresh.directory.card("calc") is not None
    assert await asyncio.wait_for(fresh.async_client().request(None, "subtract", [7, 2]), WAIT) == 5
    assert await registry.records(registry.topics.dlq) == 1


async def test_junk_with_the_key_of_an_agent_elsewhere_is_reported_by_its_host_alone(
    registry: Registry,
) -> None:
    host = await registry.start_bus(Calc)
    watcher = await registry.start_bus()  # reads the junk too, and leaves it to the host
    await registry.write(JUNK, key=b"calc")
    await registry.until_records(registry.topics.registry, 4)  # card, junk, tombstone, card
    fresh = await registry.start_bus()
    assert await registry.records(registry.topics.dlq) == 1
    assert await registry.records(registry.topics.registry) == 4
    for bus in (host, watcher, fresh):
        assert bus.directory.card("calc") is not None


async def test_tombstones_are_not_dead_lettered(registry: Registry) -> None:
    first = await registry.start_bus(Calc)
    await registry.write(None, key=b"ghost")  # an agent that is gone for good
    await registry.write(None, key=b"calc")  # a live agent: read as nothing
    await registry.until_records(registry.topics.registry, 3)
    fresh = await registry.start_bus()
    assert first.directory.card("calc") is not None  # the running view keeps it
    assert await registry.records(registry.topics.dlq) == 0
    assert fresh.transport.dead_lettered == first.transport.dead_lettered == 0


async def test_keyless_junk_is_dead_lettered_when_it_arrives_and_only_logged_at_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Kafka refuses a record without a key on a compacted topic: in memory only.
    registry = Registry("memory", None)
    await registry.outsider.start()
    try:
        await registry.start_bus()
        await registry.write(JUNK, key=None)
        await registry.until_records(registry.topics.dlq, 1)
        with caplog.at_level(logging.WARNING, logger="a2a_bus.discovery.directory"):
            await registry.start_bus()
        assert await registry.records(registry.topics.dlq) == 1
        assert "holds no card" in caplog.text
    finally:
        for bus in reversed(registry.buses):
            await asyncio.wait_for(bus.astop(), WAIT)


def card_record(registry: Registry, data: bytes) -> bytes:
    """A structured CloudEvent of a card, as another producer may write one."""
    return (
        b'{"specversion":"1.0","id":"%s","source":"outsider","type":"a2a.agent.card",'
        b'"datacontenttype":"application/json","data":%s}' % (uuid.uuid4().hex.encode(), data)
    )


STRUCTURED = [("content-type", b"application/cloudevents+json")]


async def test_cards_of_the_wrong_shape_are_dead_lettered_once_and_never_routed_to(
    registry: Registry,
) -> None:
    host = await registry.start_bus(Calc)
    now = repr(time.time()).encode()
    bad = {
        b"aaa": b'{"id":"aaa","methods":[{"name":"subtract","params":[1]}],"heartbeatAt":%s}',
        b"aab": b'{"id":"aab","methods":"subtract","heartbeatAt":%s}',
        b"a b": b'{"id":"a b","methods":[{"name":"subtract"}],"heartbeatAt":%s}',
        b"aac": b'{"id":"calc","methods":[{"name":"subtract"}],"heartbeatAt":%s}',
        b"aad": b'{"id":"aad","methods":[],"heartbeatAt":"soon %s"}',
        b"aae": b'{"id":"aae","methods":[],"heartbeatAt":%s,"x":' + b"[" * 300 + b"]" * 300 + b"}",
        b"aaf": b'[{"id":"aaf","heartbeatAt":%s}]',
        b"calc": b'{"id":"calc","methods":[{"name":7}],"heartbeatAt":%s}',  # a hosted agent's key
    }
    for key, data in bad.items():
        value = card_record(registry, data % now)
        await registry.outsider.publish_raw(
            registry.topics.registry, value, key=key, headers=STRUCTURED
        )
    # Each dead-lettered and tombstoned by the host; calc's card published again.
    await registry.until_records(registry.topics.dlq, len(bad))
    await registry.until_records(registry.topics.registry, 1 + 2 * len(bad) + 1)
    fresh = await registry.start_bus()
    for bus in (host, fresh):
        assert [card["id"] for card in bus.directory.cards()] == ["calc"]
        client = bus.async_client()
        listed = (await asyncio.wait_for(client.request(None, "methods/list"), WAIT))["methods"]
        assert {entry["agent"] for entry in listed} == {"calc"}
        assert await asyncio.wait_for(client.request(None, "subtract", [7, 2]), WAIT) == 5
    assert await registry.records(registry.topics.dlq) == len(bad)  # none again at the start
    if registry.kind == "kafka":  # the in-memory DLQ hands no undecodable record to a reader
        letters = await registry.dead_letters()
        assert {letter.key for letter in letters} == set(bad)
        assert all(header(letter, DLQ_REASON).startswith("invalid-card: ") for letter in letters)


@pytest.mark.kafka
async def test_a_start_is_ready_at_once_when_the_registry_ends_with_a_copy_of_a_card(
    kafka_bootstrap: str,
) -> None:
    """A producer's retry may write a card twice, as the registry's last records: the
    start reads the copy too, and is ready without waiting out ``registry_timeout``."""
    registry = Registry("kafka", kafka_bootstrap)
    await registry.outsider.start()
    try:
        data = b'{"id":"twin","methods":[{"name":"ping"}],"heartbeatAt":%s}'
        value = card_record(registry, data % repr(time.time()).encode())
        for _ in range(2):  # the same record twice: same source and id
            await registry.outsider.publish_raw(
                registry.topics.registry, value, key=b"twin", headers=STRUCTURED
            )
        timeout = 20.0
        began = time.monotonic()
        fresh = await registry.start_bus(registry_timeout=timeout)
        assert time.monotonic() - began < timeout / 2  # generous: a start takes about 1 s
        assert fresh.directory.card("twin") is not None
    finally:
        for bus in reversed(registry.buses):
            await asyncio.wait_for(bus.astop(), WAIT)
        await registry.outsider.stop()
