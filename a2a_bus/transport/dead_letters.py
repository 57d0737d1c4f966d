"""The dead-letter record: one header codec for both transports and every writer.

A dead letter keeps the original record's value, key and headers, and adds
headers that say why it was set aside and where it was read. The transports,
the agent hosts, the Kafka ingress and the registry reader all describe what
they set aside as a :class:`~a2a_bus.transport.base.DeadLetter` and hand it to
``Transport.dead_letter``; the headers are made here only, and so are the
letters of undecodable records (:func:`undecodable_letter`) and of records whose
handler raised (:func:`failed_letter`), and the transports' log of what they
wrote (:class:`DeadLetterLog`: a flood of junk is summed up).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

import orjson

from a2a_bus.protocol import Failure, to_kafka
from a2a_bus.runtime.rate_limited import RateLimitedLog
from a2a_bus.transport.base import DeadLetter, Delivery
from a2a_bus.transport.records import failure_reason

#: Headers of a dead-letter record (the original headers are kept beside them).
DLQ_REASON = "a2a-dlq-reason"
DLQ_SOURCE_TOPIC = "a2a-dlq-source-topic"
DLQ_SOURCE_PARTITION = "a2a-dlq-source-partition"
DLQ_SOURCE_OFFSET = "a2a-dlq-source-offset"
DLQ_ERROR = "a2a-dlq-error"
DLQ_EVENT_ID = "a2a-dlq-event-id"

Headers = list[tuple[str, bytes]]

log = logging.getLogger(__name__)


class DeadLetterLog(RateLimitedLog):
    """A transport's line per dead letter written, per source topic: the first few
    of a flood (junk from another producer), then one count every ``interval``
    seconds. Every record is still written to the dead-letter topic."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__(logger, "%d more records dead-lettered on %s since %s")

    def written(self, letter: DeadLetter) -> None:
        """``letter`` was written to the dead-letter topic."""
        self.log(
            letter.topic,
            "dead letter %s/%d/%d: %s",
            letter.topic,
            letter.partition,
            letter.offset,
            letter.reason,
        )


def read_from(letter: DeadLetter, dlq_topic: str) -> bool:
    """Whether ``letter`` was read from the dead-letter topic itself: it is logged
    and never written back (a dead letter must not feed its own topic)."""
    if letter.topic != dlq_topic:
        return False
    log.error(
        "dropped a dead letter read from the DLQ %s/%d/%d: %s",
        letter.topic,
        letter.partition,
        letter.offset,
        letter.reason,
    )
    return True


def dead_letter_headers(letter: DeadLetter) -> Headers:
    """The headers of ``letter``'s record: the original ones, then why and where
    from, then the writer's own (``letter.extra``)."""
    headers = [(n, v) for n, v in letter.headers if not n.startswith("a2a-dlq-")]
    headers += [
        (DLQ_REASON, letter.reason.encode()),
        (DLQ_SOURCE_TOPIC, letter.topic.encode()),
        (DLQ_SOURCE_PARTITION, str(letter.partition).encode()),
        (DLQ_SOURCE_OFFSET, str(letter.offset).encode()),
    ]
    if letter.failures:
        headers.append((DLQ_ERROR, orjson.dumps([f.response() for f in letter.failures])))
    headers.extend(letter.extra)
    return headers


def delivered_letter(
    delivery: Delivery, reason: str, extra: Sequence[tuple[str, bytes]] = ()
) -> DeadLetter:
    """A delivered event set aside after decoding (a handler failed, a refusal):
    written as a structured CloudEvent, with the delivery's non-CloudEvent headers."""
    record = to_kafka(delivery.event, "structured")
    original = [
        (name, value)
        for name, value in delivery.headers
        if not name.lower().startswith("ce_") and name.lower() != "content-type"
    ]
    return DeadLetter(
        topic=delivery.topic,
        partition=delivery.partition,
        offset=delivery.offset,
        value=record.value,
        key=delivery.key,
        headers=original,
        reason=reason,
        extra=(*record.headers, *extra),
    )


def undecodable_letter(
    topic: str,
    partition: int,
    offset: int,
    value: bytes | None,
    key: bytes | None,
    headers: Sequence[tuple[str, bytes]],
    failures: Sequence[Failure],
) -> DeadLetter:
    """A record that holds no event, set aside as it was read, with why (``failures``,
    at least one)."""
    return DeadLetter(
        topic, partition, offset, value, key, headers, failure_reason(failures), failures
    )


class ReadRecord(Protocol):
    """Where a record was read and what came with it (a Kafka consumer record, a
    :class:`~a2a_bus.transport.base.Delivery`)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def headers(self) -> Sequence[tuple[str, bytes]]: ...


def failed_letter(record: ReadRecord, value: bytes, event_id: str, exc: Exception) -> DeadLetter:
    """The record (``value``, as it was read) holding the event ``event_id`` whose
    handler raised ``exc``, set aside with why; the event's id in a header of its own."""
    return DeadLetter(
        record.topic,
        record.partition,
        record.offset,
        value,
        record.key,
        record.headers,
        handler_failure(exc),
        extra=[(DLQ_EVENT_ID, event_id.encode())],
    )


def handler_failure(exc: Exception) -> str:
    """The dead-letter reason of a record whose handler raised ``exc``."""
    return f"handler-error: {type(exc).__name__}: {exc}"
