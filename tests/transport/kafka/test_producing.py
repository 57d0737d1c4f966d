"""What every producer of the Kafka transport shares: the record size check, which
failed batches were never written, and the error each publisher gets."""

from __future__ import annotations

import pytest
from aiokafka.errors import (
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    NotLeaderForPartitionError,
    UnsupportedVersionError,
)

from a2a_bus.transport.errors import RecordTooLarge
from a2a_bus.transport.kafka.config import KafkaSettings
from a2a_bus.transport.kafka.producing import (
    MAX_REQUEST_SIZE,
    KafkaRecordTooLarge,
    check_size,
    producer_options,
    publisher_error,
    transient,
)


def test_a_record_over_the_request_size_is_refused_before_it_is_batched() -> None:
    check_size(b"key", b"x" * (MAX_REQUEST_SIZE // 2), [("h", b"v")])
    with pytest.raises(KafkaRecordTooLarge, match="maximum request size") as refused:
        check_size(b"key", b"x" * MAX_REQUEST_SIZE, [])
    # The transport's size error, and still aiokafka's.
    assert isinstance(refused.value, RecordTooLarge)
    assert isinstance(refused.value, MessageSizeTooLargeError)


@pytest.mark.parametrize(
    ("error", "written"),
    [
        (KafkaTimeoutError(), False),
        (NotLeaderForPartitionError(), False),  # retriable: aiokafka never sent it
        (MessageSizeTooLargeError(), True),  # the broker saw it and refused it
        (UnsupportedVersionError(), True),  # not retriable: it may have been sent
        (ValueError("not Kafka's"), True),
    ],
)
def test_only_a_batch_failed_before_it_was_sent_goes_again(
    error: BaseException, written: bool
) -> None:
    assert transient(error) is not written


def test_a_publisher_hears_of_the_broker_s_size_refusal_with_its_record_s_size() -> None:
    told = publisher_error(MessageSizeTooLargeError("from the broker"), 4096)
    assert isinstance(told, KafkaRecordTooLarge)
    assert "4096 bytes" in str(told)


def test_each_publisher_of_a_failed_batch_gets_an_error_of_its_own() -> None:
    error = KafkaError("the batch failed")
    first, second = publisher_error(error, 10), publisher_error(error, 20)
    assert first is not error and second is not first
    assert type(first) is KafkaError and str(first) == str(error)


def test_every_producer_is_idempotent_and_waits_for_all_replicas() -> None:
    options = producer_options(KafkaSettings(bootstrap_servers="broker:9092"))
    assert options["enable_idempotence"] is True
    assert options["acks"] == "all"
    assert options["max_request_size"] == MAX_REQUEST_SIZE
    assert options["bootstrap_servers"] == "broker:9092"
