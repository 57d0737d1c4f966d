"""The Kafka benchmark counts the producer's NOT_ENOUGH_REPLICAS retries instead of
logging each one, and lets every other warning through."""

from __future__ import annotations

import logging

import pytest
from aiokafka.errors import NotEnoughReplicasError, NotLeaderForPartitionError
from aiokafka.structs import TopicPartition

from a2a_bus.bench.retried_writes import SENDER_LOGGER, counting_retried_writes

TP = TopicPartition("bench-inbox", 0)


def warn_retry(error: object) -> None:
    """The warning aiokafka's sender logs before it sends a refused write again."""
    logging.getLogger(SENDER_LOGGER).warning(
        "Got error produce response on topic-partition %s, retrying. Error: %s", TP, error
    )


def test_not_enough_replicas_retries_are_counted_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger=SENDER_LOGGER)
    with counting_retried_writes() as retried:
        warn_retry(NotEnoughReplicasError)
        warn_retry(NotEnoughReplicasError())  # a global error comes as an instance
    assert retried.count == 2
    assert caplog.records == []


def test_other_producer_warnings_still_reach_the_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=SENDER_LOGGER)
    with counting_retried_writes() as retried:
        warn_retry(NotLeaderForPartitionError)
        logging.getLogger(SENDER_LOGGER).warning("something else: %s", NotEnoughReplicasError)
    assert retried.count == 0
    assert len(caplog.records) == 2


def test_retries_are_logged_again_once_the_count_ends(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=SENDER_LOGGER)
    with counting_retried_writes():
        pass
    warn_retry(NotEnoughReplicasError)
    assert ["NotEnoughReplicasError" in r.getMessage() for r in caplog.records] == [True]
