"""Commits of one Kafka group member: positions and redelivery leases.

A :class:`Committer` writes what the member's
:class:`~a2a_bus.transport.kafka.commits.PartitionTracker` objects say: the
position of each partition (its first unfinished record) and the lease (the
offset below which records may be handed out) as commit metadata. It commits
in the background when asked (:attr:`Committer.wanted`, at most once per
:attr:`Committer.interval`), and at once for a lease a record waits for, a revoke
or a stop. One lock keeps commits of the member in order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import IllegalStateError, KafkaError

from a2a_bus.runtime.loops import stop_task
from a2a_bus.transport.kafka.broker import KafkaMetrics
from a2a_bus.transport.kafka.commits import PartitionTracker, encode_lease

log = logging.getLogger(__name__)


class Committer:
    """Commits for ``consumer`` (group ``group``) from the shared ``trackers``."""

    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        group: str,
        trackers: dict[TopicPartition, PartitionTracker],
        *,
        interval_ms: int,
        lease_size: int,
        metrics: KafkaMetrics,
    ) -> None:
        self._consumer = consumer
        self._group = group
        self._trackers = trackers
        self._interval = interval_ms / 1000
        self._lease_size = lease_size
        self._metrics = metrics
        self._lock = asyncio.Lock()
        #: Set to ask for a background commit (cheap enough for every record).
        self.wanted = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def interval(self) -> float:
        """Seconds between the end of a background commit and the next one."""
        return self._interval

    async def open(self) -> None:
        """Get ready to commit (the transactional committer starts its producer)."""

    async def close(self) -> None:
        """Release what :meth:`open` took."""

    def claim(self, partitions: Iterable[TopicPartition]) -> None:
        """``partitions`` were assigned to this member."""

    def release(self, partitions: Iterable[TopicPartition]) -> None:
        """``partitions`` left this member (their last commit is done)."""

    def reading_from(self, starts: Mapping[TopicPartition, int]) -> None:
        """Assigned partitions are read from these offsets on."""

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"kafka-commit-{self._group}")

    async def stop(self) -> None:
        """Stop committing in the background (commit once more with :meth:`commit`)."""
        task, self._task = self._task, None
        await stop_task(task)

    async def _run(self) -> None:
        while True:
            await self.wanted.wait()
            self.wanted.clear()
            await self.commit(self._trackers)
            if self._interval:
                await asyncio.sleep(self._interval)

    def covers(self, tracker: PartitionTracker, offset: int) -> bool:
        """True if the acknowledged lease covers ``offset`` (no waiting); near its
        end a background commit is asked for to extend it before it runs out."""
        if not tracker.covers(offset, self._lease_size):
            return False
        if tracker.lease > tracker.committed_lease:
            self.wanted.set()
        return True

    async def hold_lease(self, tp: TopicPartition, tracker: PartitionTracker, offset: int) -> bool:
        """Make sure an acknowledged commit covers ``offset`` with the lease before
        it is handed out; False if it does not (the commit failed)."""
        if self.covers(tracker, offset):
            return True
        tracker.lease = max(tracker.lease, offset + self._lease_size)
        await self.commit([tp])
        return offset < tracker.committed_lease

    async def commit(
        self,
        partitions: Iterable[TopicPartition],
        *,
        final: Mapping[TopicPartition, int] | None = None,
    ) -> bool:
        """Commit the position (and lease) of ``partitions``; False if it failed.

        ``final`` gives the lease of partitions this member hands out nothing
        more from (revoked, stopping): one past the last record it handed to a
        handler, or more (see ``GroupMember``), so the next owner flags no record
        this member never handed out.
        """
        async with self._lock:
            offsets: dict[TopicPartition, tuple[int, str]] = {}
            leases: dict[TopicPartition, int] = {}
            for tp in list(partitions):
                tracker = self._trackers.get(tp)
                if tracker is None:
                    continue
                position = tracker.position
                if position is None:
                    continue
                lease = tracker.lease if final is None else final.get(tp, tracker.lease)
                if not tracker.dirty and lease == tracker.committed_lease:
                    continue
                offsets[tp] = (position, encode_lease(lease))
                leases[tp] = lease
            if not offsets:
                return True
            try:
                await self._write(offsets)
            except IllegalStateError as exc:
                # A rebalance is under way (nothing assigned right now): the offsets stay
                # dirty and are committed by the next round or by the revoke callback.
                log.debug("group %s: commit deferred during a rebalance: %s", self._group, exc)
                return False
            except KafkaError as exc:
                log.warning("group %s: commit failed: %s", self._group, exc)
                return False
            self._metrics.commits += 1
            for tp, (position, _) in offsets.items():
                tracker = self._trackers.get(tp)
                if tracker is not None:
                    tracker.committed(position, leases[tp])
                    if final is not None:
                        tracker.lease = leases[tp]
            return True

    async def _write(self, offsets: Mapping[TopicPartition, tuple[int, str]]) -> None:
        """Write one commit: positions with their lease metadata."""
        await self._consumer.commit(offsets)

    async def commit_starts(self, starts: Mapping[TopicPartition, tuple[int, int]]) -> bool:
        """Commit where reading starts, and the lease then, on partitions whose
        start the group has no commit for (no tracker yet); False if it failed."""
        offsets = {tp: (start, encode_lease(lease)) for tp, (start, lease) in starts.items()}
        async with self._lock:
            try:
                await self._consumer.commit(offsets)
            except (KafkaError, IllegalStateError) as exc:
                log.warning("group %s: cannot commit start positions: %s", self._group, exc)
                return False
        self._metrics.commits += 1
        return True


class Uncommitted(Committer):
    """A committer that commits nothing, for ``durable=False`` subscriptions: the
    group keeps no offsets, so Kafka forgets it once it is empty."""

    def start(self) -> None:
        pass

    def covers(self, tracker: PartitionTracker, offset: int) -> bool:
        return True  # no lease: nothing is redelivered to a later member

    async def hold_lease(self, tp: TopicPartition, tracker: PartitionTracker, offset: int) -> bool:
        return True

    async def commit(
        self,
        partitions: Iterable[TopicPartition],
        *,
        final: Mapping[TopicPartition, int] | None = None,
    ) -> bool:
        return True

    async def commit_starts(self, starts: Mapping[TopicPartition, tuple[int, int]]) -> bool:
        return True  # nothing to keep
