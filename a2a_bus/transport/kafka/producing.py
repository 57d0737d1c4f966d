"""What every producer of the Kafka transport shares: its options, the record
size check, and the errors its publishers get.

A record over the producer's request size fails alone, before it joins a batch;
one the broker refuses for its size, or that Kafka did not acknowledge within the
delivery timeout, reaches its publisher as an error of the transport (and still
aiokafka's, for code that catches those).
"""

from __future__ import annotations

import copy
from typing import Any

from aiokafka.errors import KafkaError, KafkaTimeoutError, MessageSizeTooLargeError
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from a2a_bus.transport.errors import NotDelivered, RecordTooLarge
from a2a_bus.transport.kafka.config import KafkaSettings

#: The producer's ``max_request_size`` (aiokafka's default, passed explicitly).
#: The bounds of :mod:`a2a_bus.core.payload` keep what the bus makes under it.
MAX_REQUEST_SIZE = 1048576


def producer_options(settings: KafkaSettings) -> dict[str, Any]:
    """The options of every producer the transport starts: idempotent, ``acks=all``,
    the settings' tuning and connection."""
    return {
        "enable_idempotence": True,
        "acks": "all",
        "linger_ms": settings.linger_ms,
        "max_batch_size": settings.max_batch_size,
        "max_request_size": MAX_REQUEST_SIZE,
        "compression_type": settings.compression_type,
        **settings.client_kwargs(),
    }


class KafkaNotDelivered(NotDelivered, KafkaTimeoutError):
    """A record Kafka did not acknowledge within the delivery timeout (the broker
    was away): the transport's error, and still a ``KafkaError``."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "not delivered"


def check_size(key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]]) -> None:
    """Raise :class:`KafkaRecordTooLarge` for a record over the request size."""
    size = DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, headers)
    if size > MAX_REQUEST_SIZE:
        raise KafkaRecordTooLarge(
            f"the record is {size} bytes, more than the maximum request size "
            f"({MAX_REQUEST_SIZE}) of the Kafka producer"
        )


class KafkaRecordTooLarge(RecordTooLarge, MessageSizeTooLargeError):
    """A record Kafka does not take (what the payload and envelope bounds missed):
    the transport's size error, and still aiokafka's."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "record too large"


def transient(error: BaseException) -> bool:
    """Whether ``error`` says the broker could not take a write for now (away, no
    leader, too few replicas in sync, no acknowledgement in time) rather than
    refusing the record itself.

    A batch that failed so was never written, and may be handed over again
    without a duplicate: aiokafka fails an idempotent producer's batch with such
    an error only before it sent it (waiting for room, or for a leader); what it
    sent, it retries itself.
    """
    if isinstance(error, MessageSizeTooLargeError):
        return False
    return isinstance(error, KafkaTimeoutError) or (
        isinstance(error, KafkaError) and error.retriable
    )


def publisher_error(error: BaseException, size: int) -> BaseException:
    """What the publisher of a record of ``size`` bytes gets for ``error``."""
    if isinstance(error, MessageSizeTooLargeError) and not isinstance(error, KafkaRecordTooLarge):
        # The broker's limit (the topic's max.message.bytes) is below the producer's.
        detail = f"the broker refused the record of {size} bytes as too large: {error}"
        return KafkaRecordTooLarge(detail)
    # A copy each, so tracebacks do not pile up on one exception object.
    return copy.copy(error)
