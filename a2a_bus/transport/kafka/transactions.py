"""Exactly-once answers: consume-handle-produce in Kafka transactions.

In ``exactly_once`` mode (``KafkaSettings.delivery``) a durable group member
commits through a :class:`TransactionalCommitter`: each commit is one Kafka
transaction of its own transactional producer holding the answers to the
records it commits (produced with ``answering=`` the consumed record) and, with
``send_offsets_to_transaction``, the positions the at-least-once committer
would have committed. An answer waits in the member's :class:`Outbox` until its
record's partition position passes it, so a transaction never holds the answer
of a record it does not also commit: a crash aborts both, and the next owner
handles the record again and answers it in its own transaction. Readers with
``isolation.level=read_committed`` see one answer per record.

:class:`~a2a_bus.transport.kafka.answers.AnswerRoutes` tells the transport
which member's outbox takes the answer to a consumed record.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from a2a_bus.transport.kafka.answers import AnswerRoutes, Outbox
from a2a_bus.transport.kafka.broker import KafkaMetrics
from a2a_bus.transport.kafka.commits import PartitionTracker
from a2a_bus.transport.kafka.committer import Committer
from a2a_bus.transport.kafka.config import KafkaSettings
from a2a_bus.transport.kafka.producing import producer_options

log = logging.getLogger(__name__)


def transactional_id(settings: KafkaSettings, group: str) -> str:
    """``<replica>.<group>``: stable per replica name and group (see the settings)."""
    replica = settings.transactional_id or f"{socket.gethostname()}-{os.getpid()}"
    return f"{replica}.{group}"


def transactional_producer_options(settings: KafkaSettings, group: str) -> dict[str, Any]:
    """The options of the transactional producer of ``group``'s member."""
    return {
        **producer_options(settings),
        "transactional_id": transactional_id(settings, group),
        "transaction_timeout_ms": settings.transaction_timeout_ms,
        "retry_backoff_ms": settings.transaction_retry_backoff_ms,
    }


class TransactionalCommitter(Committer):
    """Commits positions and leases in transactions with the answers they cover."""

    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        group: str,
        trackers: dict[TopicPartition, PartitionTracker],
        *,
        settings: KafkaSettings,
        routes: AnswerRoutes,
        metrics: KafkaMetrics,
    ) -> None:
        super().__init__(
            consumer,
            group,
            trackers,
            interval_ms=settings.transaction_commit_interval_ms,
            lease_size=settings.redelivery_lease,
            metrics=metrics,
        )
        self._settings = settings
        self._routes = routes
        self.outbox = Outbox()
        self._producer: AIOKafkaProducer | None = None

    async def open(self) -> None:
        producer = AIOKafkaProducer(**transactional_producer_options(self._settings, self._group))
        try:
            await producer.start()  # init_transactions: fences an older self of this id
        except BaseException:
            await producer.stop()
            raise
        self._producer = producer

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()

    def claim(self, partitions: Iterable[TopicPartition]) -> None:
        self._routes.claim(partitions, self.outbox)

    def reading_from(self, starts: Mapping[TopicPartition, int]) -> None:
        self._routes.reading_from(starts)

    def release(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = list(partitions)
        self._routes.release(partitions, self.outbox)
        dropped = self.outbox.drop(partitions)
        for tp, offset in dropped:
            # Handled here, but not committed: if the partition comes back, the record
            # is handled again rather than skipped as a copy (its answer would be lost).
            self._routes.dropped(tp.topic, tp.partition, offset)
        if dropped:
            log.debug("group %s: %d answers left to the next owner", self._group, len(dropped))

    async def _write(self, offsets: Mapping[TopicPartition, tuple[int, str]]) -> None:
        producer = self._producer
        if producer is None:
            raise KafkaError("the transactional producer is not started")
        taken = {tp: self.outbox.take({tp: offsets[tp][0]}) for tp in offsets}
        committed = False
        try:
            await producer.begin_transaction()
            try:
                for answers in taken.values():
                    for a in answers:  # acknowledged by the commit, which flushes them
                        await producer.send(a.topic, a.value, key=a.key, headers=a.headers)
                await producer.send_offsets_to_transaction(dict(offsets), self._group)
                committing = asyncio.ensure_future(producer.commit_transaction())
                try:
                    await asyncio.shield(committing)
                except asyncio.CancelledError:
                    # A commit asked for can no longer be aborted (aiokafka refuses to),
                    # and whether it wrote its answers decides whether they are written
                    # again: its end is waited for before the cancel goes on.
                    await asyncio.wait([committing])
                    committed = not committing.cancelled() and committing.exception() is None
                    raise
                committed = True
            except BaseException:
                if not committed:
                    with contextlib.suppress(KafkaError):
                        await producer.abort_transaction()
                raise
        except BaseException:
            if not committed:
                for tp, answers in taken.items():
                    if answers:
                        self.outbox.give_back(tp, answers)
            raise
        finally:
            if committed:
                self._metrics.produced += sum(len(a) for a in taken.values())
