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

import contextlib
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from aiokafka import TopicPartition

from a2a_bus.protocol import Adaptor
from a2a_bus.transport.base import (
    Handler,
    ReadBatch,
    Subscription,
    TopicPattern,
    UndecodableHandler,
    checked_topics,
)
from a2a_bus.transport.kafka.admin import ClusterAdmin
from a2a_bus.transport.kafka.broker import KafkaMetrics
from a2a_bus.transport.kafka.config import KafkaSettings
from a2a_bus.transport.kafka.inboxes import KafkaInboxes
from a2a_bus.transport.kafka.reader import EndOffsets, read_topic
from a2a_bus.transport.kafka.subscription import KafkaSubscription
from a2a_bus.transport.kafka.watch import BrokerWatch
from a2a_bus.transport.kafka.writer import KafkaWriter
from a2a_bus.transport.positions import Position
from a2a_bus.transport.reading import check_request


class KafkaTransport(KafkaWriter):
    """A :class:`~a2a_bus.transport.base.Transport` over Apache Kafka (what it
    writes: :class:`~a2a_bus.transport.kafka.writer.KafkaWriter`, its base).

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
        settings = replace(base, **options) if options else base
        metrics = KafkaMetrics()
        self.admin = ClusterAdmin(settings, metrics)
        # The admin's set, read by the writer for every record produced.
        super().__init__(settings, metrics, self.admin.known_topics)
        self.adaptor = adaptor or Adaptor()
        self._subscriptions: set[KafkaSubscription] = set()
        self._inboxes: list[KafkaInboxes] = []
        self._ready = False
        self._watch: BrokerWatch | None = None
        self._end_offsets = EndOffsets(self.settings)

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

    @property
    def redelivered(self) -> int:
        return self.metrics.redelivered

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
            await self._open_batches()
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
        await self._close_batches()
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
