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


def unstarted_committer(settings: KafkaSettings, routes: AnswerRoutes) -> TransactionalCommitter:
    """A transactional committer whose consumer is not started: no broker is asked."""
    return TransactionalCommitter(
        AIOKafkaConsumer(), "group", {}, settings=settings, routes=routes, metrics=KafkaMetrics()
    )


async def test_answers_dropped_at_a_handover_mark_their_records_to_be_handled_again() -> None:
    """exactly_once: answers still waiting for their transaction when the partition
    is handed over are dropped; their records must not look handled here (if the
    partition comes back, de-duplication would skip them and commit no answer)."""
    routes = AnswerRoutes()
    committer = unstarted_committer(KafkaSettings(delivery="exactly_once"), routes)
    kept, handed = TopicPartition("in", 0), TopicPartition("in", 1)
    committer.claim([kept, handed])
    for tp, offset in ((kept, 3), (handed, 7), (handed, 8)):
        committer.outbox.add(tp, Answer(offset, "out", b"{}", None, []))
    committer.release([handed])
    assert routes.was_dropped("in", 1, 7) and routes.was_dropped("in", 1, 8)
    assert not routes.was_dropped("in", 0, 3)
    assert routes.route(handed) is None and routes.route(kept) is committer.outbox
    assert [a.offset for a in committer.outbox.take({kept: 10, handed: 10})] == [3]


async def test_marks_of_dropped_answers_below_where_their_partition_is_read_again_go() -> None:
    """A partition read here again from an offset past a marked record (another
    owner answered and committed it) never brings that record back here: its mark
    is forgotten, and the marks of later records and other partitions are kept."""
    routes = AnswerRoutes()
    committer = unstarted_committer(KafkaSettings(delivery="exactly_once"), routes)
    first, second = TopicPartition("in", 0), TopicPartition("in", 1)
    committer.claim([first, second])
    for tp, offset in ((first, 4), (first, 9), (second, 2)):
        committer.outbox.add(tp, Answer(offset, "out", b"{}", None, []))
    committer.release([first, second])
    assert routes.dropped_marks == 3
    committer.reading_from({first: 5})
    assert not routes.was_dropped("in", 0, 4)
    assert routes.was_dropped("in", 0, 9) and routes.was_dropped("in", 1, 2)
    assert routes.dropped_marks == 2


def test_marks_of_dropped_answers_are_bounded_the_oldest_going_first() -> None:
    """A partition that never comes back would keep its marks for good: past the
    bound the oldest are forgotten."""
    routes = AnswerRoutes(max_dropped=3)
    for offset in range(5):
        routes.dropped("in", 0, offset)
    assert routes.dropped_marks == 3
    assert [routes.was_dropped("in", 0, offset) for offset in range(5)] == [
        False,
        False,
        True,
        True,
        True,
    ]
    routes.settled("in", 0, 3)
    routes.dropped("in", 0, 5)  # room again: nothing more is forgotten
    assert [routes.was_dropped("in", 0, offset) for offset in (2, 4, 5)] == [True, True, True]


async def test_an_exactly_once_member_commits_again_as_soon_as_its_transaction_ended() -> None:
    """Its answers wait for its next transaction: by default it follows the last one
    at once (``transaction_commit_interval_ms``), not after ``commit_interval_ms``."""

    default = unstarted_committer(KafkaSettings(delivery="exactly_once"), AnswerRoutes())
    assert default.interval == 0
    environ = {"A2A_KAFKA_TRANSACTION_COMMIT_INTERVAL_MS": "7", "A2A_DELIVERY": "exactly_once"}
    from_env = unstarted_committer(KafkaSettings.from_env(environ), AnswerRoutes())
    assert from_env.interval == 0.007


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
