"""Produce batching against a real broker (fixture ``kafka_bootstrap``): when the
publishers of a batch hear of its acknowledgement.

An answer's acknowledgement (``ack_later``) waits for the next hand-over, or for
``ACK_WAIT``, or for ``settle_acks``; every other publisher hears at once. A full
subscription settles the held acknowledgements that keep its slots.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from a2a_bus.transport import Delivery
from a2a_bus.transport.kafka import batches
from a2a_bus.transport.kafka.batches import Batches
from a2a_bus.transport.kafka.transport import KafkaTransport
from tests.buses import eventually
from tests.transport.kafka.support import WAIT, event

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]

#: Longer than any test here: an acknowledgement held this long is never let go by time.
FOREVER = 3600.0


@pytest.fixture
def uid() -> str:
    return uuid.uuid4().hex[:10]


@pytest.fixture
async def open_batches(kafka_bootstrap: str, uid: str) -> AsyncIterator[tuple[Batches, str]]:
    """Batches over a started producer, and a topic of one partition to write to."""
    topic = f"test.held.{uid}"
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, enable_idempotence=True, acks="all"
    )
    await producer.start()
    await producer.partitions_for(topic)
    batched = Batches(producer)
    try:
        yield batched, topic
    finally:
        await batched.aclose()


@pytest.fixture
def patient(
    open_batches: tuple[Batches, str], monkeypatch: pytest.MonkeyPatch
) -> tuple[Batches, str]:
    """``open_batches`` whose held acknowledgements are never let go by time."""
    monkeypatch.setattr(batches, "ACK_WAIT", FOREVER)
    return open_batches


async def test_an_answer_s_acknowledgement_waits_for_the_next_hand_over(
    patient: tuple[Batches, str],
) -> None:
    batched, topic = patient
    answer = batched.add(topic, 0, b"k", b"answer", [], ack_later=True)
    await eventually(lambda: batched.held_acks == 1, "the answer's acknowledgement held")
    assert not answer.done()

    other = batched.add(topic, 0, b"k", b"next", [])
    async with asyncio.timeout(WAIT):
        await other  # told as it arrives; the hand-over before it let the answer go
        await answer
    assert batched.held_acks == 0


async def test_a_held_acknowledgement_is_settled_after_ack_wait_without_a_hand_over(
    open_batches: tuple[Batches, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batches, "ACK_WAIT", 0.05)
    batched, topic = open_batches
    async with asyncio.timeout(WAIT):
        await batched.add(topic, 0, b"k", b"answer", [], ack_later=True)
    assert batched.held_acks == 0


async def test_the_other_publishers_of_a_batch_hear_at_once(
    patient: tuple[Batches, str],
) -> None:
    """One batch, one acknowledgement: only the answer's publisher waits."""
    batched, topic = patient
    answer = batched.add(topic, 0, b"k", b"answer", [], ack_later=True)
    plain = batched.add(topic, 0, b"k", b"plain", [])  # the same loop iteration: one batch
    async with asyncio.timeout(WAIT):
        await plain
    assert batched.held_acks == 1
    assert not answer.done()

    batched.settle_acks()
    assert answer.done()
    assert batched.held_acks == 0


@pytest.mark.parametrize(
    ("max_in_flight", "same_key"),
    [(1, False), (64, True)],
    ids=["a-full-subscription", "a-record-queued-behind-its-key"],
)
async def test_a_record_waiting_for_another_to_finish_does_not_wait_for_its_held_ack(
    kafka_bootstrap: str,
    uid: str,
    monkeypatch: pytest.MonkeyPatch,
    max_in_flight: int,
    same_key: bool,
) -> None:
    """A handler that answers keeps its record unfinished until the answer is
    acknowledged. The next record waits for it when the subscription is full (one
    slot) or when they share a key; with no other hand-over coming, that wait must
    not last ``ACK_WAIT`` (here longer than the test). The last answer's
    acknowledgement is held until the stop, which waits for its record."""
    monkeypatch.setattr(batches, "ACK_WAIT", FOREVER)
    topic, answers = f"test.waiting.{uid}", f"test.waiting.answers.{uid}"
    handled: list[int] = []
    async with KafkaTransport(kafka_bootstrap, dlq_topic=f"test.dlq.{uid}") as kafka:
        assert isinstance(kafka, KafkaTransport)
        await kafka.ensure_topics([answers])

        async def answer(delivery: Delivery) -> None:
            data = delivery.event.get_data()
            assert isinstance(data, dict)
            handled.append(data["n"])
            await kafka.publish(answers, event(data["n"]), answering=delivery)

        await kafka.subscribe([topic], f"g-{uid}", answer, max_in_flight=max_in_flight)
        for n in range(3):
            await kafka.publish(topic, event(n, key="one-key" if same_key else f"k{n}"))
        await eventually(lambda: len(handled) == 3, "three answered records")
    assert sorted(handled) == [0, 1, 2]
    # The stop waited for the last handler without holding its acknowledgement:
    # it finished rather than being cancelled at the end of the drain.
    assert kafka.metrics.delivered == 3
