"""What a consumer group member knows about the partitions it owns.

At each assignment the member reads, from the group's commits, where the
previous owner got to: its committed offset and the redelivery lease in the
commit metadata (see :mod:`a2a_bus.transport.kafka.commits`). Records below the
lease may have been handed to a handler before, so they are flagged as
redeliveries; records produced after the assignment cannot have been. The
ends at assignment and the first fetched offsets serve lag and the commit of a
partition the group never committed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from typing import TYPE_CHECKING

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import IllegalStateError, KafkaError

from a2a_bus.transport.kafka.commits import PartitionTracker, decode_lease
from a2a_bus.transport.kafka.committer import Committer

if TYPE_CHECKING:
    from a2a_bus.transport.kafka.transport import KafkaTransport

log = logging.getLogger(__name__)

#: A redelivery bound that flags every record: nothing proves any of them new.
_EVERYTHING = 2**63 - 1


class Ownership:
    """Per owned partition: the previous owner's lease, the redelivery bound, and
    the committed and end offsets at assignment."""

    def __init__(
        self,
        transport: KafkaTransport,
        consumer: AIOKafkaConsumer,
        commits: Committer,
        group: str,
        *,
        is_pattern: bool,
        from_beginning: bool,
    ) -> None:
        self._transport = transport
        self._consumer = consumer
        self._commits = commits
        self._group = group
        self._is_pattern = is_pattern
        self._from_beginning = from_beginning
        self._join_timeout = transport.settings.join_timeout
        #: Lease found in the group's commit metadata at assignment.
        self.previous_lease: dict[TopicPartition, int] = {}
        #: Offsets below this were possibly handled by a previous owner; a
        #: partition is in here once its previous owner is known.
        self.redelivery_bound: dict[TopicPartition, int] = {}
        #: Committed offset of each partition at assignment, and its end then (for lag).
        self.committed_at_assignment: dict[TopicPartition, int] = {}
        self.end_at_assignment: dict[TopicPartition, int] = {}
        #: Offset of the first record fetched per partition since its assignment.
        self.first_fetched: dict[TopicPartition, int] = {}
        #: Topics matching a pattern subscription when it started (read from their
        #: end unless ``from_beginning``; topics created later from their beginning).
        self.existing_topics: set[str] = set()
        #: Where a fresh group starts reading a partition of such a topic: records
        #: below it that were fetched before the seek are not handed out.
        self.skip_below: dict[TopicPartition, int] = {}

    async def learn(self, assigned: Collection[TopicPartition]) -> None:
        """Read the leases and end offsets that bound possible redeliveries, and
        commit the start of partitions the group never committed."""
        partitions = sorted(assigned)
        try:
            committed = await self._transport.committed_offsets(self._group, partitions)
            ends = await self._consumer.end_offsets(partitions)
        except KafkaError as exc:
            # Without the lease nothing proves a record new: flag all of them.
            log.warning("group %s: cannot read commit metadata (%s)", self._group, exc)
            for tp in partitions:
                self.previous_lease[tp] = 0
                self.redelivery_bound[tp] = _EVERYTHING
            return
        fresh = []
        for tp in partitions:
            offset, metadata = committed.get(tp, (-1, ""))
            self.end_at_assignment[tp] = ends.get(tp, 0)
            if offset >= 0:
                self.committed_at_assignment[tp] = offset
            else:
                fresh.append(tp)
                if (
                    self._is_pattern
                    and not self._from_beginning
                    and tp.topic in self.existing_topics
                ):
                    # The consumer resets to "earliest" (for topics created later)
                    # and may have fetched old records already: start at the end.
                    self.skip_below[tp] = ends.get(tp, 0)
                    self._consumer.seek(tp, self.skip_below[tp])
            self.previous_lease[tp] = decode_lease(metadata) or 0
        if fresh:
            await self._commit_start(fresh)
        # Set last: records of these partitions are dispatched only from here on.
        for tp in partitions:
            # Records produced after this assignment cannot have been handed
            # out by the previous owner.
            self.redelivery_bound[tp] = min(self.previous_lease[tp], ends.get(tp, 0))

    async def _commit_start(self, partitions: list[TopicPartition]) -> None:
        """Commit where this member starts reading partitions the group never committed.

        Otherwise a partition that moves to another member (rebalance, crash)
        before its first commit is read by the next owner from that owner's own
        offset reset: with "latest" every record produced in between is skipped.
        """
        starts: dict[TopicPartition, int] = {}
        for tp in partitions:
            try:
                position = await asyncio.wait_for(self._consumer.position(tp), self._join_timeout)
            except (IllegalStateError, KafkaError, TimeoutError) as exc:
                log.warning("group %s: no start position for %s: %s", self._group, tp, exc)
                continue
            skip_below = self.skip_below.get(tp)
            if skip_below is not None:
                starts[tp] = skip_below
            else:
                # Records the dispatch loop already fetched (before this callback)
                # start below the position and are not handed out yet.
                starts[tp] = min(position, self.first_fetched.get(tp, position))
        if starts and await self._commits.commit_starts(starts):
            for tp, start in starts.items():
                self.previous_lease[tp] = self.committed_at_assignment[tp] = start

    def forget(self, revoked: Collection[TopicPartition]) -> None:
        """Drop what was known of partitions this member no longer owns."""
        for tp in revoked:
            self.redelivery_bound.pop(tp, None)
            self.previous_lease.pop(tp, None)
            self.first_fetched.pop(tp, None)
            self.committed_at_assignment.pop(tp, None)
            self.end_at_assignment.pop(tp, None)
            self.skip_below.pop(tp, None)

    def lag(self, trackers: dict[TopicPartition, PartitionTracker]) -> int:
        """Records of the assigned partitions not handled yet (in flight or not
        fetched), as of the last fetch response; no request to the broker."""
        total = 0
        for tp in self._consumer.assignment():
            tracker = trackers.get(tp)
            handled = tracker.position if tracker is not None else None
            if handled is None:
                handled = self.committed_at_assignment.get(tp)
            end = self._consumer.highwater(tp)
            if end is None:
                end = self.end_at_assignment.get(tp)
            if handled is not None and end is not None:
                total += max(0, end - handled)
        return total
