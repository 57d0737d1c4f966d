"""Exactly-once answers without a broker: the committer's handover, pace and producer options."""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from a2a_bus.transport.kafka.answers import Answer, AnswerRoutes
from a2a_bus.transport.kafka.broker import KafkaMetrics
from a2a_bus.transport.kafka.config import KafkaSettings
from a2a_bus.transport.kafka.transactions import (
    TransactionalCommitter,
    transactional_producer_options,
)


async def test_answers_dropped_at_a_handover_mark_their_records_to_be_handled_again() -> None:
    """exactly_once: answers still waiting for their transaction when the partition
    is handed over are dropped; their records must not look handled here (if the
    partition comes back, de-duplication would skip them and commit no answer)."""
    routes = AnswerRoutes()
    committer = TransactionalCommitter(
        AIOKafkaConsumer(),  # not started: the handover touches no broker
        "group",
        {},
        settings=KafkaSettings(delivery="exactly_once"),
        routes=routes,
        metrics=KafkaMetrics(),
    )
    kept, handed = TopicPartition("in", 0), TopicPartition("in", 1)
    committer.claim([kept, handed])
    for tp, offset in ((kept, 3), (handed, 7), (handed, 8)):
        committer.outbox.add(tp, Answer(offset, "out", b"{}", None, []))
    committer.release([handed])
    assert routes.was_dropped("in", 1, 7) and routes.was_dropped("in", 1, 8)
    assert not routes.was_dropped("in", 0, 3)
    assert routes.route(handed) is None and routes.route(kept) is committer.outbox
    assert [a.offset for a in committer.outbox.take({kept: 10, handed: 10})] == [3]


async def test_an_exactly_once_member_commits_again_as_soon_as_its_transaction_ended() -> None:
    """Its answers wait for its next transaction: by default it follows the last one
    at once (``transaction_commit_interval_ms``), not after ``commit_interval_ms``."""

    def committer(settings: KafkaSettings) -> TransactionalCommitter:
        return TransactionalCommitter(
            AIOKafkaConsumer(),  # not started: no broker is asked
            "group",
            {},
            settings=settings,
            routes=AnswerRoutes(),
            metrics=KafkaMetrics(),
        )

    assert committer(KafkaSettings(delivery="exactly_once")).interval == 0
    environ = {"A2A_KAFKA_TRANSACTION_COMMIT_INTERVAL_MS": "7", "A2A_DELIVERY": "exactly_once"}
    assert committer(KafkaSettings.from_env(environ)).interval == 0.007


async def test_a_transactional_producer_sends_a_refused_write_again_soon() -> None:
    """A broker that checks each transactional write now and then refuses one with a
    retriable error; the producer sends it again after ``transaction_retry_backoff_ms``
    (20 ms unless set), not aiokafka's 100 ms."""
    default = transactional_producer_options(KafkaSettings(delivery="exactly_once"), "g")
    assert default["retry_backoff_ms"] == 20
    environ = {"A2A_KAFKA_TRANSACTION_RETRY_BACKOFF_MS": "5", "A2A_KAFKA_TRANSACTIONAL_ID": "r1"}
    options = transactional_producer_options(KafkaSettings.from_env(environ), "g")
    assert (options["retry_backoff_ms"], options["transactional_id"]) == (5, "r1.g")
    assert (options["acks"], options["enable_idempotence"]) == ("all", True)
    producer = AIOKafkaProducer(**options)  # aiokafka takes every option as given
    await producer.stop()
