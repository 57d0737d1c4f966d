"""Reading retained records of one Kafka topic without a consumer group.

A throwaway consumer with no group (nothing joined, nothing committed) is
assigned every partition of the topic; the beginning and end offsets are taken
once, so a busy topic still gives an answer: records written after that are
left for the next read. The whole read is bounded by the request timeout.

:class:`EndOffsets` answers where each partition of a topic ends, on one
group-less consumer kept for it (a consumer per call costs a connection).
"""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from a2a_bus.protocol import Adaptor
from a2a_bus.transport.base import ReadBatch
from a2a_bus.transport.kafka.config import KafkaSettings
from a2a_bus.transport.kafka.consumers import stop_consumer
from a2a_bus.transport.positions import Position, check_partitions
from a2a_bus.transport.reading import Retained, decoded, newest_last, oldest_first

Offsets = dict[TopicPartition, int]


async def read_topic(
    settings: KafkaSettings,
    admin: AIOKafkaAdminClient,
    adaptor: Adaptor,
    topic: str,
    limit: int,
    position: Position | None,
    newest: bool,
) -> ReadBatch:
    """A :meth:`Transport.read` batch of ``topic`` (arguments already checked)."""
    seconds = settings.request_timeout_ms / 1000
    try:
        async with asyncio.timeout(seconds):
            return await _read_within(settings, admin, adaptor, topic, limit, position, newest)
    except TimeoutError:
        raise TimeoutError(
            f"reading topic {topic!r} took longer than the request timeout ({seconds:g} s)"
        ) from None


async def _read_within(
    settings: KafkaSettings,
    admin: AIOKafkaAdminClient,
    adaptor: Adaptor,
    topic: str,
    limit: int,
    position: Position | None,
    newest: bool,
) -> ReadBatch:
    numbers = await _partition_numbers(admin, topic)
    check_partitions(position or {}, len(numbers), topic)
    if not numbers:  # an unknown topic
        return ReadBatch([], {}, 0)
    consumer = AIOKafkaConsumer(
        group_id=None,
        enable_auto_commit=False,
        # An offset trimmed by retention between the offsets lookup and the fetch
        # is gone: go on from the oldest one retained.
        auto_offset_reset="earliest",
        fetch_max_wait_ms=settings.fetch_max_wait_ms,
        max_poll_records=settings.max_poll_records,
        **settings.client_kwargs(),
    )
    try:
        await consumer.start()
        return await _read(consumer, adaptor, topic, numbers, limit, position, newest)
    finally:
        await stop_consumer(consumer)


async def _partition_numbers(admin: AIOKafkaAdminClient, topic: str) -> list[int]:
    """The partitions of ``topic``; none when it does not exist."""
    # Described with every other topic: a metadata request naming an unknown topic
    # creates it on brokers with auto.create.topics.enable, and a read writes nothing.
    for entry in await admin.describe_topics():
        if entry["topic"] == topic and entry["error_code"] == 0:
            return sorted(p["partition"] for p in entry["partitions"])
    return []


async def _read(
    consumer: AIOKafkaConsumer,
    adaptor: Adaptor,
    topic: str,
    numbers: list[int],
    limit: int,
    position: Position | None,
    newest: bool,
) -> ReadBatch:
    partitions = [TopicPartition(topic, number) for number in numbers]
    consumer.assign(partitions)
    begins: Offsets = await consumer.beginning_offsets(partitions)
    ends: Offsets = await consumer.end_offsets(partitions)
    if newest:
        starts = {tp: max(begins[tp], ends[tp] - limit) for tp in partitions}
        tails = await _fetch(consumer, adaptor, starts, ends, None)
        return newest_last(tails, {tp.partition: ends[tp] for tp in partitions}, limit)
    given = position or {}
    starts = {tp: max(given.get(tp.partition, 0), begins[tp]) for tp in partitions}
    heads = await _fetch(consumer, adaptor, starts, ends, limit)
    return oldest_first(heads, {tp.partition: starts[tp] for tp in partitions}, limit)


async def _fetch(
    consumer: AIOKafkaConsumer,
    adaptor: Adaptor,
    starts: Offsets,
    ends: Offsets,
    limit: int | None,
) -> list[list[Retained]]:
    """Per partition, the records from its start up to its end, or (with ``limit``)
    up to the one that brings its events to ``limit``."""
    found: dict[TopicPartition, list[Retained]] = {tp: [] for tp in starts}
    events = dict.fromkeys(starts, 0)
    pending: set[TopicPartition] = set()
    for tp, start in starts.items():
        if start < ends[tp]:
            consumer.seek(tp, start)
            pending.add(tp)
    consumer.pause(*(tp for tp in starts if tp not in pending))

    def finish(tp: TopicPartition) -> None:
        pending.discard(tp)
        consumer.pause(tp)  # no more prefetching of it

    while pending:
        fetched = await consumer.getmany(*pending, timeout_ms=500)
        for tp, records in fetched.items():
            for record in records:
                if tp not in pending or record.offset >= ends[tp]:
                    break
                item = decoded(
                    adaptor,
                    tp.topic,
                    tp.partition,
                    record.offset,
                    record.timestamp,
                    record.value,
                    record.headers,
                    record.key,
                )
                found[tp].append(item)
                events[tp] += len(item.events)
                if record.offset + 1 >= ends[tp] or (limit is not None and events[tp] >= limit):
                    finish(tp)
        for tp in list(pending):
            # Compaction and transaction markers leave offsets with no record.
            if await consumer.position(tp) >= ends[tp]:
                finish(tp)
    return [found[tp] for tp in sorted(starts, key=lambda tp: tp.partition)]


class EndOffsets:
    """The end offsets of topics' partitions, asked on one group-less consumer that
    starts on first use and lives until :meth:`close`. A topic's partitions are
    looked up once (the topics asked about, such as the task log, keep theirs)."""

    def __init__(self, settings: KafkaSettings) -> None:
        self._settings = settings
        self._consumer: AIOKafkaConsumer | None = None
        self._starting: asyncio.Lock | None = None
        self._partitions: dict[str, list[TopicPartition]] = {}

    async def of(self, admin: AIOKafkaAdminClient, topic: str) -> dict[int, int]:
        """Partition number -> the offset its next record gets; empty for an unknown topic."""
        seconds = self._settings.request_timeout_ms / 1000
        async with asyncio.timeout(seconds):
            partitions = self._partitions.get(topic)
            if partitions is None:
                numbers = await _partition_numbers(admin, topic)
                if not numbers:
                    return {}
                partitions = self._partitions[topic] = [TopicPartition(topic, n) for n in numbers]
            consumer = await self._started()
            ends: Offsets = await consumer.end_offsets(partitions)
        return {tp.partition: offset for tp, offset in ends.items()}

    async def _started(self) -> AIOKafkaConsumer:
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._consumer is None:
                consumer = AIOKafkaConsumer(
                    group_id=None, enable_auto_commit=False, **self._settings.client_kwargs()
                )
                await consumer.start()
                self._consumer = consumer
            return self._consumer

    async def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        self._partitions.clear()
        self._starting = None  # a restarted transport may run on another loop
        if consumer is not None:
            await stop_consumer(consumer)
