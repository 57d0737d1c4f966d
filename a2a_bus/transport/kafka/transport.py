"""The Kafka transport (aiokafka): topics, an idempotent producer, consumer groups.

Guarantees (details in ``docs/kafka.md``):

* every publish is one record, written by an idempotent producer with
  ``acks=all``, whatever the number of subscribing groups;
* offsets are committed only after the handler finished, per partition in
  order, so a crash redelivers but never skips (at-least-once);
* copies of an event with the same (source, id) within the de-duplication
  window of a subscription reach its handler once;
* a record that a previous owner of its partition may have handed to a handler
  is delivered with ``redelivered=True`` (commit-metadata leases make this exact
  for crashed owners, with no false negatives);
* undecodable records and records whose handler raised go to the dead-letter
  topic with ``a2a-dlq-*`` reason headers, and are committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, TypeVar

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import (
    KafkaError,
    MessageSizeTooLargeError,
    UnknownTopicOrPartitionError,
)
from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol import Adaptor, record_key, to_kafka
from a2a_bus.protocol.formats import dump_structured
from a2a_bus.protocol.kafka_codec import STRUCTURED_HEADER, Mode
from a2a_bus.transport.base import (
    Consumed,
    DeadLetter,
    Handler,
    ReadBatch,
    Subscription,
    TopicPattern,
    Transport,
    UndecodableHandler,
    checked_topics,
)
from a2a_bus.transport.dead_letters import DeadLetterLog, dead_letter_headers, read_from
from a2a_bus.transport.kafka.admin import ClusterAdmin
from a2a_bus.transport.kafka.answers import Answer, AnswerRoutes, Outbox
from a2a_bus.transport.kafka.batches import Batches
from a2a_bus.transport.kafka.broker import KafkaMetrics
from a2a_bus.transport.kafka.config import KafkaSettings
from a2a_bus.transport.kafka.inboxes import KafkaInboxes
from a2a_bus.transport.kafka.partitioning import pick_partition
from a2a_bus.transport.kafka.producing import check_size, producer_options
from a2a_bus.transport.kafka.reader import EndOffsets, read_topic
from a2a_bus.transport.kafka.subscription import KafkaSubscription
from a2a_bus.transport.kafka.watch import BrokerWatch
from a2a_bus.transport.positions import Position
from a2a_bus.transport.reading import check_request

log = logging.getLogger(__name__)

#: The headers of every record published in structured mode: one list for all
#: (aiokafka's record builder takes a list and only reads it).
_STRUCTURED = [STRUCTURED_HEADER]
_Client = TypeVar("_Client")


class KafkaTransport(Transport):
    """A :class:`~a2a_bus.transport.base.Transport` over Apache Kafka.

    ``KafkaTransport("host:9092", partitions=6)`` or
    ``KafkaTransport(settings=KafkaSettings.from_env())``; keyword options are
    any :class:`KafkaSettings` field and override ``settings``.
    """

    def __init__(
        self,
        bootstrap_servers: str | None = None,
        *,
        settings: KafkaSettings | None = None,
        adaptor: Adaptor | None = None,
        **options: Any,
    ) -> None:
        base = settings or KafkaSettings()
        if bootstrap_servers is not None:
            options["bootstrap_servers"] = bootstrap_servers
        self.settings = replace(base, **options) if options else base
        self.adaptor = adaptor or Adaptor()
        self._content_mode: Mode = (
            "binary" if self.settings.content_mode == "binary" else "structured"
        )
        self.metrics = KafkaMetrics()
        self._batches: Batches | None = None
        self.admin = ClusterAdmin(self.settings, self.metrics)
        # The admin's set, read here for every record produced.
        self._known_topics = self.admin.known_topics
        self._subscriptions: set[KafkaSubscription] = set()
        self._inboxes: list[KafkaInboxes] = []
        self._ready = False
        self._watch: BrokerWatch | None = None
        self._exactly_once = self.settings.exactly_once
        self.answer_routes = AnswerRoutes()
        self._end_offsets = EndOffsets(self.settings)
        #: Its line per dead letter, a flood of them summed up (see DeadLetterLog).
        self.dead_letter_log = DeadLetterLog(log)

    @classmethod
    def from_env(cls, **options: Any) -> KafkaTransport:
        """A transport configured from ``A2A_KAFKA_*`` variables (see KafkaSettings)."""
        return cls(settings=KafkaSettings.from_env(**options))

    @property
    def ready(self) -> bool:
        return self._ready

    @property
    def connection_problem(self) -> str | None:
        """Not started, or the broker did not answer the last look (every second; see
        :mod:`a2a_bus.transport.kafka.watch`)."""
        if not self._ready or self._watch is None:
            return "the transport is not started"
        return self._watch.problem

    @property
    def dead_lettered(self) -> int:
        """Records written to the dead-letter topic through this transport (its own
        and the bus's)."""
        return self.metrics.dead_lettered

    @property
    def duplicates_skipped(self) -> int:
        return self.metrics.duplicates

    def lag(self) -> dict[str, int]:
        """Records not handled yet per consumer group of this process (the sum
        over its members' assigned partitions, as of their last fetch)."""
        lags: dict[str, int] = {}
        for subscription in self._subscriptions:
            lags[subscription.group] = lags.get(subscription.group, 0) + subscription.lag()
        for inboxes in self._inboxes:
            for group, lag in inboxes.lag().items():
                lags[group] = lags.get(group, 0) + lag
        return lags

    # -- lifecycle ------------------------------------------------------------------

    async def start(self) -> None:
        if self._ready:
            return
        try:
            self._batches = Batches(
                await self._started_producer(),
                self._started_producer,
                self.settings.delivery_timeout_ms / 1000,
            )
            await self.admin.start()
            await self.ensure_topics([self.settings.dlq_topic])
        except BaseException:
            await self._close_clients()
            raise
        self._ready = True
        # One small request: the metadata of the one topic every bus has.
        admin, dlq = self.admin.require(), self.settings.dlq_topic
        self._watch = BrokerWatch(
            lambda: admin.describe_topics([dlq]), self.settings.bootstrap_servers
        )
        self._watch.start()

    async def _started_producer(self) -> AIOKafkaProducer:
        """A started idempotent producer (``acks=all``) with the settings' tuning."""
        producer = AIOKafkaProducer(**producer_options(self.settings))
        try:
            await producer.start()
        except BaseException:
            await producer.stop()
            raise
        return producer

    async def stop(self) -> None:
        for inboxes in self._inboxes:
            await inboxes.stop()
        watch, self._watch = self._watch, None
        if watch is not None:
            await watch.stop()
        for subscription in list(self._subscriptions):
            await subscription.stop()
        self._ready = False
        self.dead_letter_log.close()
        await self._close_clients()

    async def _close_clients(self) -> None:
        if self._batches is not None:
            await self._batches.aclose()
            self._batches = None
        await self._end_offsets.close()
        await self.admin.close()

    # -- topics and groups (see a2a_bus.transport.kafka.admin) ------------------------

    async def ensure_topics(self, topics: Sequence[str], partitions: int | None = None) -> None:
        await self.admin.ensure_topics(topics, partitions)

    def created(self, topic: str) -> bool:
        return self.admin.created(topic)

    def known(self, topic: str) -> bool:
        return topic in self._known_topics

    def declare_compacted(self, topic: str) -> None:
        self.admin.declare_compacted(topic)

    def declare_private(self, topic: str) -> None:
        self.admin.declare_private(topic)

    async def list_topics(self) -> list[str]:
        return await self.admin.list_topics()

    async def partitions(self, topics: Sequence[str]) -> list[TopicPartition]:
        return await self.admin.partitions(topics)

    async def committed_offsets(
        self, group: str, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, tuple[int, str]]:
        return await self.admin.committed_offsets(group, partitions)

    async def consumer_groups(self) -> list[str]:
        return await self.admin.consumer_groups()

    async def group_topics(self, groups: Sequence[str]) -> dict[str, set[str]]:
        return await self.admin.group_topics(groups)

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
            await batches.producer.partitions_for(topic)  # waits for metadata
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
        """Write ``letter`` to the dead-letter topic (retried ``max_retries`` times);
        one that cannot be written is logged with its position, and the record is
        still acknowledged so one bad record cannot stall its partition."""
        if read_from(letter, self.settings.dlq_topic):
            return
        headers = dead_letter_headers(letter)
        delay = 0.1
        for attempt in range(1, self.settings.max_retries + 1):
            try:
                await self.publish_raw(
                    self.settings.dlq_topic, letter.value or b"", key=letter.key, headers=headers
                )
                self.dead_letter_log.written(letter)
                return
            except KafkaError as exc:
                log.warning("dead letter write failed (attempt %d): %s", attempt, exc)
                if isinstance(exc, MessageSizeTooLargeError):
                    break  # with its headers it is over the limit: retrying cannot help
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

    # -- consuming ------------------------------------------------------------------

    async def subscribe(
        self,
        topics: Sequence[str] | TopicPattern,
        group: str,
        handler: Handler,
        *,
        from_beginning: bool = False,
        max_in_flight: int = 64,
        on_undecodable: UndecodableHandler | None = None,
        durable: bool = True,
        dead_letter: bool = True,
        dedup: bool = True,
    ) -> Subscription:
        if not self._ready:
            raise RuntimeError("the Kafka transport is not started")
        topics = checked_topics(topics)
        if not isinstance(topics, TopicPattern):
            await self.ensure_topics(topics)
        subscription = KafkaSubscription(
            self,
            topics,
            group,
            handler,
            from_beginning=from_beginning,
            max_in_flight=max_in_flight,
            on_undecodable=on_undecodable,
            durable=durable,
            dead_letter=dead_letter,
            dedup=dedup,
            on_stop=self._subscriptions.discard,
        )
        self._subscriptions.add(subscription)
        try:
            await subscription.start()
        except BaseException:
            with contextlib.suppress(Exception):
                await subscription.stop(drain_timeout=0)
            self._subscriptions.discard(subscription)
            raise
        return subscription

    def inboxes(self, group_prefix: str) -> KafkaInboxes:
        """One consumer for every agent inbox of this process, in the group
        ``<group_prefix>.<digest of the inbox topics>`` (see docs/kafka.md)."""
        inboxes = KafkaInboxes(self, group_prefix)
        self._inboxes.append(inboxes)
        return inboxes

    async def read(
        self, topic: str, *, limit: int, position: Position | None = None, newest: bool = False
    ) -> ReadBatch:
        check_request(limit, position, newest)
        if not self._ready:
            raise RuntimeError("the Kafka transport is not started")
        admin = self.admin.require()
        return await read_topic(self.settings, admin, self.adaptor, topic, limit, position, newest)

    async def end_offsets(self, topic: str) -> dict[int, int]:
        if not self._ready:
            raise RuntimeError("the Kafka transport is not started")
        return await self._end_offsets.of(self.admin.require(), topic)

    @staticmethod
    def _require(client: _Client | None) -> _Client:
        if client is None:
            raise RuntimeError("the Kafka transport is not started")
        return client
