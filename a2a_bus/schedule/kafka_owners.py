"""Who fires which schedule on Kafka: the members of one consumer group share the
partitions of the group's state topic, and a schedule belongs to the member that
holds the partition its name is keyed to (as the producer places its state).

The group reads nothing through this consumer (its partitions stay paused); it is
there for Kafka's assignment: one owner per partition, handed over on a rebalance
(a member that stops leaves at once, one that dies after the session timeout).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import ConsumerStoppedError, KafkaError

from a2a_bus.runtime.loops import stop_task
from a2a_bus.schedule.scheduler import Names
from a2a_bus.transport.kafka.consumers import stop_consumer
from a2a_bus.transport.kafka.partitioning import pick_partition
from a2a_bus.transport.kafka.transport import KafkaTransport

log = logging.getLogger(__name__)


class KafkaOwners(ConsumerRebalanceListener):
    """Calls ``own(names)`` for the schedules assigned to this process and
    ``lose(names)`` (awaited before another member takes them) for those revoked."""

    def __init__(
        self,
        transport: KafkaTransport,
        topic: str,
        group: str,
        names: Sequence[str],
        own: Names,
        lose: Names,
    ) -> None:
        self._transport = transport
        self._topic = topic
        self._group = group
        self._names = list(names)
        self._own = own
        self._lose = lose
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._held: set[TopicPartition] = set()

    def _names_in(self, partitions: set[TopicPartition]) -> list[str]:
        consumer = self._consumer
        assert consumer is not None
        every = sorted(consumer.partitions_for_topic(self._topic) or ())
        numbers = {tp.partition for tp in partitions if tp.topic == self._topic}
        return [
            name for name in self._names if pick_partition(name.encode(), every, every) in numbers
        ]

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self._held -= revoked
        await self._lose(self._names_in(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        assert self._consumer is not None
        self._consumer.pause(*assigned)
        self._held |= assigned
        await self._own(self._names_in(assigned))

    async def start(self) -> None:
        settings = self._transport.settings
        await self._transport.ensure_topics([self._topic])
        consumer = AIOKafkaConsumer(
            group_id=self._group,
            enable_auto_commit=False,
            session_timeout_ms=settings.session_timeout_ms,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            metadata_max_age_ms=settings.metadata_max_age_ms,
            **settings.client_kwargs(),
        )
        self._consumer = consumer
        await consumer.start()
        consumer.subscribe([self._topic], listener=self)
        self._task = asyncio.create_task(self._poll(), name=f"scheduler group {self._group}")

    async def _poll(self) -> None:
        # Polling keeps the membership alive; the paused partitions give no records.
        assert self._consumer is not None
        while True:
            try:
                await self._consumer.getmany(timeout_ms=1000)
            except ConsumerStoppedError:
                return
            except KafkaError as exc:
                log.warning("scheduler group %s: %s", self._group, exc)
                await asyncio.sleep(0.5)

    async def stop(self) -> None:
        """Give the schedules up, then leave the group (the others take them at once)."""
        task, self._task = self._task, None
        await stop_task(task)
        held, self._held = self._held, set()
        if held and self._consumer is not None:
            await self._lose(self._names_in(held))
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            consumer.unsubscribe()  # no revoke callback: the schedules were given up above
            await stop_consumer(consumer)
