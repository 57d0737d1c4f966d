"""The writing side of the Kafka transport: every record it produces.

A publish is one record, appended to an open batch of its partition
(:mod:`~a2a_bus.transport.kafka.batches`) once its topic is known; a topic not
created or not in the metadata yet is created (or waited for) first. In
exactly_once mode an answer joins the transaction of the record it answers
(:mod:`~a2a_bus.transport.kafka.answers`). Dead letters wait out a broker outage;
one the broker refuses is retried, then logged as lost. :class:`KafkaWriter` is the base of
:class:`~a2a_bus.transport.kafka.transport.KafkaTransport`, which adds the rest.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Sequence
from contextlib import AbstractContextManager
from typing import TypeVar

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import (
    KafkaError,
    MessageSizeTooLargeError,
    UnknownTopicOrPartitionError,
)
from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol import record_key, to_kafka
from a2a_bus.protocol.formats import dump_structured
from a2a_bus.protocol.kafka_codec import STRUCTURED_HEADER, Mode
from a2a_bus.transport.base import Consumed, DeadLetter, Transport
from a2a_bus.transport.dead_letters import DeadLetterLog, dead_letter_headers, read_from
from a2a_bus.transport.kafka.answers import Answer, AnswerRoutes, Outbox
from a2a_bus.transport.kafka.batches import Batches
from a2a_bus.transport.kafka.broker import KafkaMetrics
from a2a_bus.transport.kafka.config import KafkaSettings
from a2a_bus.transport.kafka.partitioning import pick_partition
from a2a_bus.transport.kafka.producing import (
    KafkaNotDelivered,
    check_size,
    producer_options,
    transient,
)

# The transport's logger, as before its writing side left a2a_bus.transport.kafka.transport.
log = logging.getLogger("a2a_bus.transport.kafka.transport")

#: The headers of every record published in structured mode: one list for all
#: (aiokafka's record builder takes a list and only reads it).
_STRUCTURED = [STRUCTURED_HEADER]
_Client = TypeVar("_Client")


class KafkaWriter(Transport):
    """What the Kafka transport writes: publishes, raw records, answers, dead letters.

    ``known_topics`` is the cluster admin's set of the topics known to exist, read
    for every record produced; topics are created through :meth:`ensure_topics`.
    """

    def __init__(
        self, settings: KafkaSettings, metrics: KafkaMetrics, known_topics: set[str]
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self._content_mode: Mode = "binary" if settings.content_mode == "binary" else "structured"
        self._batches: Batches | None = None
        self._known_topics = known_topics
        self._exactly_once = settings.exactly_once
        self.answer_routes = AnswerRoutes()
        #: Its line per dead letter, a flood of them summed up (see DeadLetterLog).
        self.dead_letter_log = DeadLetterLog(log)

    @abc.abstractmethod
    async def ensure_topics(self, topics: Sequence[str], partitions: int | None = None) -> None:
        """Create those of ``topics`` that do not exist yet."""

    # -- the producer ---------------------------------------------------------------

    async def _open_batches(self) -> None:
        """Start the producer, and the batches in front of it."""
        self._batches = Batches(
            await self._started_producer(),
            self._started_producer,
            self.settings.delivery_timeout_ms / 1000,
        )

    async def _started_producer(self) -> AIOKafkaProducer:
        """A started idempotent producer (``acks=all``) with the settings' tuning."""
        producer = AIOKafkaProducer(**producer_options(self.settings))
        try:
            await producer.start()
        except BaseException:
            await producer.stop()
            raise
        return producer

    async def _close_batches(self) -> None:
        """Hand over what was added, then stop the producer."""
        if self._batches is not None:
            await self._batches.aclose()
            self._batches = None

    # -- producing ------------------------------------------------------------------

    def publish(
        self,
        topic: str,
        event: CloudEvent,
        *,
        key: bytes | None = None,
        answering: Consumed | None = None,
    ) -> Awaitable[None]:
        """The record's acknowledgement: a future once the topic is known (see
        :meth:`_send`); retried while the broker is away, up to the settings'
        ``delivery_timeout_ms`` (then ``NotDelivered``). In exactly_once mode an
        answer (``answering``) joins the transaction of the record it answers;
        otherwise its acknowledgement may wait for the next hand-over (only the
        record it answers waits for it: see :mod:`~a2a_bus.transport.kafka.batches`)."""
        if self._content_mode == "structured":  # the default: one constant header
            value = dump_structured(event)
            key = record_key(event) if key is None else key
            if answering is None:
                return self._send(topic, value, key, _STRUCTURED)
            if self._exactly_once:
                return self._answer(answering, topic, value, key, list(_STRUCTURED))
            return self._send(topic, value, key, _STRUCTURED, True)
        record = to_kafka(event, self._content_mode, key)
        if answering is not None and self._exactly_once:
            return self._answer(answering, topic, record.value, record.key, record.headers)
        return self._send(topic, record.value, record.key, record.headers, answering is not None)

    async def publish_raw(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes]] = (),
        answering: Consumed | None = None,
    ) -> None:
        if answering is not None and self._exactly_once:
            await self._answer(answering, topic, value, key, list(headers))
            return
        await self._send(topic, value, key, list(headers), answering is not None)
        if topic == self.settings.dlq_topic:  # the bus's own dead letters come this way too
            self.metrics.dead_lettered += 1

    def _send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        headers: list[tuple[str, bytes]],
        ack_later: bool = False,
    ) -> Awaitable[None]:
        """The record's acknowledgement; a plain future (no coroutine per record)
        once the topic and its partitions are known (``ack_later``: see
        :meth:`Batches.add`)."""
        batches = self._require(self._batches)
        partitions = batches.partitions(topic) if topic in self._known_topics else None
        if partitions is None:
            return self._send_unknown(topic, value, key, headers, ack_later)
        sent = batches.add(topic, pick_partition(key, *partitions), key, value, headers, ack_later)
        self.metrics.produced += 1
        return sent

    async def _send_unknown(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        headers: list[tuple[str, bytes]],
        ack_later: bool = False,
    ) -> None:
        """:meth:`_send` to a topic not created or not in the metadata yet."""
        batches = self._require(self._batches)
        if topic not in self._known_topics:
            # In a task of its own: handlers start eagerly, outside a task, and
            # aiokafka's admin requests need one for their timeout.
            await asyncio.ensure_future(self.ensure_topics([topic]))
        if batches.partitions(topic) is None:
            # Waits for metadata: no longer than a record waits for its acknowledgement.
            timeout = self.settings.delivery_timeout_ms / 1000
            try:
                await asyncio.wait_for(batches.producer.partitions_for(topic), timeout)
            except TimeoutError:
                detail = f"Kafka gave no partitions of {topic} within {timeout:g} s"
                raise KafkaNotDelivered(f"{detail}; the record was not written") from None
            if batches.partitions(topic) is None:
                raise UnknownTopicOrPartitionError(topic)
        await self._send(topic, value, key, headers, ack_later)  # both known now

    async def _answer(
        self,
        consumed: Consumed,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        headers: list[tuple[str, bytes]],
    ) -> None:
        """Hand an answer to the outbox of the member that owns ``consumed``'s
        partition: its next transaction writes it with the record's commit."""
        tp = TopicPartition(consumed.topic, consumed.partition)
        if self.answer_routes.route(tp) is False:  # not from a transactional member
            await self._send(topic, value, key, headers)
            return
        check_size(key, value, headers)
        if topic not in self._known_topics:
            await asyncio.ensure_future(self.ensure_topics([topic]))  # see _send_unknown
        outbox = self.answer_routes.route(tp)  # again: the await may have seen a rebalance
        if isinstance(outbox, Outbox):
            outbox.add(tp, Answer(consumed.offset, topic, value, key, headers))
        else:
            # Handed over while its handler ran: the record was not committed here,
            # so the partition's next owner handles it again and answers it (this
            # process too, should the partition come back: not as a duplicate).
            self.answer_routes.dropped(consumed.topic, consumed.partition, consumed.offset)
            log.info(
                "answer to %s/%d/%d left to the partition's next owner",
                consumed.topic,
                consumed.partition,
                consumed.offset,
            )

    def acks_at_once(self) -> AbstractContextManager[None]:
        """While inside, answers' acknowledgements are not held for the next
        hand-over (a full subscription waits for the records they finish)."""
        if self._batches is None:
            return contextlib.nullcontext()
        return self._batches.acks_at_once()

    async def dead_letter(self, letter: DeadLetter) -> None:
        """Write ``letter`` to the dead-letter topic.

        While the broker is away or cannot take the write yet (a timeout, a
        retriable error), it is tried again, with a back-off up to 5 s, until it
        is written or its handler is cancelled (the transport stopping): the
        record is then not committed, so it comes back rather than being lost.
        Any other error is tried ``max_retries`` times; a letter too large is
        not tried again. One that cannot be written is logged as lost, and the
        record is still acknowledged, so one bad record cannot stall its partition.
        """
        if read_from(letter, self.settings.dlq_topic):
            return
        headers = dead_letter_headers(letter)
        delay = 0.1
        refusals = 0
        attempt = 0
        while True:
            attempt += 1
            try:
                await self.publish_raw(
                    self.settings.dlq_topic, letter.value or b"", key=letter.key, headers=headers
                )
                self.dead_letter_log.written(letter)
                if attempt > 1:
                    log.warning(
                        "dead letter %s/%d/%d written at attempt %d",
                        letter.topic,
                        letter.partition,
                        letter.offset,
                        attempt,
                    )
                return
            except KafkaError as exc:
                if isinstance(exc, MessageSizeTooLargeError):
                    log.warning("dead letter refused: %s", exc)
                    break  # with its headers it is over the limit: retrying cannot help
                if not transient(exc):
                    refusals += 1
                    log.warning("dead letter write failed (attempt %d): %s", attempt, exc)
                    if refusals >= self.settings.max_retries:
                        break
                elif attempt == 1 or attempt % 10 == 0:
                    log.warning(
                        "dead letter write failed (attempt %d), tried again until the "
                        "broker takes it: %s",
                        attempt,
                        exc,
                    )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        log.error(
            "LOST dead letter %s/%d/%d (%s): it cannot be written to the DLQ topic %r",
            letter.topic,
            letter.partition,
            letter.offset,
            letter.reason,
            self.settings.dlq_topic,
        )

    @staticmethod
    def _require(client: _Client | None) -> _Client:
        if client is None:
            raise RuntimeError("the Kafka transport is not started")
        return client
