"""A batch the broker refuses for its size, against a real broker (fixture
``kafka_bootstrap``): topics whose ``max.message.bytes`` (2,000) is far below the
producer's batch size, so records that each fit share batches that do not.

The refusal applies to the whole batch and nothing of it was written: its
records go again one per batch, in their place, and only one too large alone is
refused as too large. Each test writes in several waves (loop iterations), so
that batches handed to the replaced producer after the refused one come back
too, and must not be overtaken.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol import new_event
from a2a_bus.transport import Delivery
from a2a_bus.transport.errors import RecordTooLarge
from a2a_bus.transport.kafka.batches import Batches
from a2a_bus.transport.kafka.transport import KafkaTransport
from tests.buses import eventually
from tests.transport.kafka.support import WAIT

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

#: The topics' max.message.bytes: a record of :data:`FITS` bytes fits, three do not.
LIMIT = 2000
FITS = 600
TOO_LARGE = 5000


@pytest.fixture
def uid() -> str:
    return uuid.uuid4().hex[:10]


@pytest.fixture
async def kafka(kafka_bootstrap: str, uid: str) -> AsyncIterator[KafkaTransport]:
    async with KafkaTransport(kafka_bootstrap, dlq_topic=f"test.dlq.{uid}") as transport:
        assert isinstance(transport, KafkaTransport)
        yield transport


async def small_topic(bootstrap: str, topic: str) -> None:
    """Create ``topic``: one partition, records of at most :data:`LIMIT` bytes."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await asyncio.wait_for(admin.start(), WAIT)
    try:
        limits = {"max.message.bytes": str(LIMIT)}
        await asyncio.wait_for(
            admin.create_topics([NewTopic(topic, 1, 1, topic_configs=limits)]), WAIT
        )
    finally:
        await admin.close()


def record(n: int, size: int) -> CloudEvent:
    return new_event({"type": "test.event", "source": "tests"}, {"n": n, "pad": "x" * size})


async def publish_in_waves(
    kafka: KafkaTransport, topic: str, sizes: list[int], per_wave: int
) -> list[BaseException | None]:
    """Publish a record of each size (numbered by position), ``per_wave`` to a loop
    iteration, then wait for every acknowledgement."""
    acks: list[Awaitable[None]] = []
    for n, size in enumerate(sizes):
        acks.append(kafka.publish(topic, record(n, size)))
        if n % per_wave == per_wave - 1:
            await asyncio.sleep(0)
    async with asyncio.timeout(WAIT):
        return await asyncio.gather(*acks, return_exceptions=True)


async def written(kafka: KafkaTransport, topic: str, count: int) -> list[int]:
    """The numbers of the records in ``topic``, in offset order (reading past ``count``)."""
    found = await asyncio.wait_for(kafka.read(topic, limit=count + 10), WAIT)
    return [event.get_data()["n"] for event in found.events]


async def test_records_that_fit_alone_but_not_together_are_all_written_in_order_once(
    kafka: KafkaTransport, kafka_bootstrap: str, uid: str
) -> None:
    topic = f"test.refused.{uid}"
    await small_topic(kafka_bootstrap, topic)
    await kafka.ensure_topics([topic])
    sizes = [FITS] * 60

    results = await publish_in_waves(kafka, topic, sizes, per_wave=12)

    assert results == [None] * len(sizes)
    assert await written(kafka, topic, len(sizes)) == list(range(len(sizes)))


async def test_a_record_too_large_alone_is_refused_and_its_neighbours_are_written(
    kafka: KafkaTransport, kafka_bootstrap: str, uid: str
) -> None:
    topic = f"test.refused.{uid}"
    await small_topic(kafka_bootstrap, topic)
    await kafka.ensure_topics([topic])
    sizes = [TOO_LARGE if n % 9 == 4 else FITS for n in range(45)]

    results = await publish_in_waves(kafka, topic, sizes, per_wave=7)

    for n, (size, result) in enumerate(zip(sizes, results, strict=True)):
        if size == TOO_LARGE:
            assert isinstance(result, RecordTooLarge), (n, result)
            assert "the broker refused the record" in str(result)
        else:
            assert result is None, (n, result)
    fitting = [n for n, size in enumerate(sizes) if size == FITS]
    assert await written(kafka, topic, len(sizes)) == fitting


async def test_answers_sharing_a_batch_with_an_oversized_one_are_delivered(
    kafka: KafkaTransport, kafka_bootstrap: str, uid: str
) -> None:
    """The handlers of one fetch answer in one loop iteration, so their answers
    share a batch; one answer is too large for the answers' topic."""
    requests, answers = f"test.requests.{uid}", f"test.answers.{uid}"
    await small_topic(kafka_bootstrap, answers)
    await kafka.ensure_topics([requests, answers])
    count, oversized = 20, 7
    for n in range(count):  # all waiting before the subscription's first fetch
        await kafka.publish(requests, record(n, 10), key=f"k{n}".encode())
    outcomes: dict[int, BaseException | None] = {}

    async def answer(delivery: Delivery) -> None:
        n = delivery.event.get_data()["n"]  # type: ignore[index]
        size = TOO_LARGE if n == oversized else FITS
        try:
            await kafka.publish(answers, record(n, size), answering=delivery)
        except RecordTooLarge as exc:
            outcomes[n] = exc
        else:
            outcomes[n] = None

    await kafka.subscribe([requests], f"g-{uid}", answer, from_beginning=True)
    await eventually(lambda: len(outcomes) == count, "every request answered")

    assert isinstance(outcomes.pop(oversized), RecordTooLarge)
    assert outcomes == dict.fromkeys(outcomes, None)
    delivered = await written(kafka, answers, count)
    assert sorted(delivered) == [n for n in range(count) if n != oversized]


async def test_no_batch_overtakes_those_a_replaced_producer_still_held(
    kafka_bootstrap: str, uid: str
) -> None:
    """A new producer ready at once (started beforehand) takes over while the
    batches handed to the old one after the refused batch are still on their
    way back, out of sequence: they are written before every later batch."""
    topic = f"test.refused.{uid}"
    await small_topic(kafka_bootstrap, topic)
    spares: list[AIOKafkaProducer] = []

    async def started() -> AIOKafkaProducer:
        producer = AIOKafkaProducer(
            bootstrap_servers=kafka_bootstrap, enable_idempotence=True, acks="all"
        )
        await producer.start()
        await producer.partitions_for(topic)
        return producer

    for _ in range(8):
        spares.append(await started())

    async def renew() -> AIOKafkaProducer:
        return spares.pop() if spares else await started()

    batched = Batches(await started(), renew)
    try:
        sizes = [TOO_LARGE if n % 11 == 5 else FITS for n in range(66)]
        acks = []
        for n, size in enumerate(sizes):
            value = orjson.dumps({"n": n, "pad": "x" * size})
            acks.append(batched.add(topic, 0, None, value, []))
            if n % 3 == 2:
                await asyncio.sleep(0)  # many batches, handed over one after the other
        async with asyncio.timeout(WAIT):
            results = await asyncio.gather(*acks, return_exceptions=True)
    finally:
        await batched.aclose()
        for spare in spares:
            await spare.stop()

    assert [n for n, result in enumerate(results) if result is not None] == [
        n for n, size in enumerate(sizes) if size == TOO_LARGE
    ]
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0)])
        found: list[int] = []
        async with asyncio.timeout(WAIT):
            while len(found) < len(sizes) - len(sizes) // 11:
                fetched = await consumer.getmany(timeout_ms=500)
                found += [orjson.loads(r.value)["n"] for rs in fetched.values() for r in rs]
    finally:
        await consumer.stop()
    assert found == [n for n, size in enumerate(sizes) if size == FITS]
