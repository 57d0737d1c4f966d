"""What a consumer group member knows about the partitions it owns.

At each assignment the member reads, from the group's commits, where the
previous owner got to: its committed offset and the redelivery lease in the
commit metadata (see :mod:`a2a_bus.transport.kafka.commits`). Records below the
lease may have been handed to a handler before, so they are flagged as
redeliveries; records produced after the assignment cannot have been.

Every assigned partition is then sought to where this member starts, so
aiokafka never resolves a position itself (it asks for one partition's commit
at a time, which took seconds for thousands of partitions):

* the group's commit;
* else, or when it is older, the *handover*: the newest commit of the same
  partition by another group that consumed it before (the inbox groups of
  other compositions, :mod:`a2a_bus.transport.kafka.groups`), whose lease bounds
  the redeliveries as the group's own would;
* else, for a partition this member owned before (a group that keeps no
  commits, ``durable=False``, rejoining after it was expelled: a broker restart,
  a pause past the session timeout), where it got to then, so records written
  while it was away are not skipped;
* else the oldest retained record or the end, as ``from_beginning`` says (a
  topic the transport created itself is read from offset 0 without asking the
  broker: its new partitions answer only once their logs exist).

A start that is not the group's own commit is committed at once, with its
lease, so that any later owner resumes from a commit.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import IllegalStateError, KafkaError

from a2a_bus.transport.kafka.broker import Broker
from a2a_bus.transport.kafka.commits import PartitionTracker, decode_lease
from a2a_bus.transport.kafka.committer import Committer

log = logging.getLogger(__name__)

#: Per partition: the offset another group committed and the lease it recorded.
Handover = Mapping[TopicPartition, tuple[int, int]]


class Ownership:
    """Per owned partition: the previous owner's lease, the redelivery bound, and
    the committed and end offsets at assignment."""

    def __init__(
        self,
        transport: Broker,
        consumer: AIOKafkaConsumer,
        commits: Committer,
        group: str,
        *,
        is_pattern: bool,
        from_beginning: bool,
        handover: Handover | None = None,
    ) -> None:
        self._transport = transport
        self._consumer = consumer
        self._commits = commits
        self._group = group
        self._is_pattern = is_pattern
        self._from_beginning = from_beginning
        self._handover = handover or {}
        #: Lease found in the group's commit metadata (or the handover) at assignment.
        self.previous_lease: dict[TopicPartition, int] = {}
        #: Offsets below this were possibly handled by a previous owner; a
        #: partition is in here once its previous owner is known.
        self.redelivery_bound: dict[TopicPartition, int] = {}
        #: Where this member started each partition, and its end then (for lag).
        self.committed_at_assignment: dict[TopicPartition, int] = {}
        self.end_at_assignment: dict[TopicPartition, int] = {}
        #: Topics matching a pattern subscription when it started (read from their
        #: end unless ``from_beginning``; topics created later from their beginning).
        self.existing_topics: set[str] = set()
        #: Where this member got to in partitions it owned before (see :meth:`forget`).
        self.resume_at: dict[TopicPartition, int] = {}

    async def learn(self, assigned: Collection[TopicPartition]) -> bool:
        """Read the leases and offsets that bound possible redeliveries, seek every
        partition to its start and commit the starts that are no commit of the
        group yet; False if that failed (the caller tries again)."""
        partitions = sorted(assigned)
        try:
            committed = await self._transport.committed_offsets(self._group, partitions)
            # The partitions of a topic created a moment ago answer these only once
            # their leader has made their logs (tens of seconds for thousands), and a
            # new partition's start is known: ask only about the others.
            asked = [tp for tp in partitions if not self._new(tp, committed)]
            ends = await self._consumer.end_offsets(asked) if asked else {}
            beginnings = await self._consumer.beginning_offsets(asked) if asked else {}
        except KafkaError as exc:
            log.warning("group %s: cannot read the partitions' offsets (%s)", self._group, exc)
            return False
        starts: dict[TopicPartition, tuple[int, int]] = {}
        leases: dict[TopicPartition, int] = {}
        for tp in partitions:
            end = ends.get(tp, 0)
            own, metadata = committed.get(tp, (-1, ""))
            prior = self._handover.get(tp)
            if prior is not None and prior[0] > own:
                # Another composition's group got further (or this group never read
                # it): start there; its lease bounds what its members handed out.
                start, lease = prior[0], min(prior[1], end)
                starts[tp] = (start, lease)
            elif own >= 0:
                start, lease = own, decode_lease(metadata) or 0
            else:
                start = self.resume_at.get(tp, -1)
                if start < 0:
                    start = beginnings.get(tp, 0) if self._from_start(tp) else end
                lease = start
                starts[tp] = (start, lease)
            leases[tp] = lease
            self.committed_at_assignment[tp] = start
            if tp in ends:
                self.end_at_assignment[tp] = end
            try:
                self._consumer.seek(tp, start)
            except IllegalStateError:
                return False  # revoked meanwhile: the next assignment learns again
        if starts and not await self._commits.commit_starts(starts):
            return False
        # Set last: records of these partitions are handed out only from here on.
        for tp in partitions:
            self.previous_lease[tp] = leases[tp]
            # Records produced after this assignment cannot have been handed
            # out by the previous owner.
            self.redelivery_bound[tp] = min(leases[tp], ends.get(tp, 0))
        return True

    def _new(self, tp: TopicPartition, committed: Mapping[TopicPartition, tuple[int, str]]) -> bool:
        """Whether ``tp`` starts at offset 0 without asking: its topic was created
        by this transport (so it began empty), it is read from its start, and no
        group committed it nor did this member read it before."""
        return (
            committed.get(tp, (-1, ""))[0] < 0
            and tp not in self._handover
            and tp not in self.resume_at
            and self._from_start(tp)
            and self._transport.created(tp.topic)
        )

    def _from_start(self, tp: TopicPartition) -> bool:
        """Whether a partition the group never committed is read from its oldest
        retained record (else from its end)."""
        if self._from_beginning:
            return True
        # Topics created after a pattern subscription started are read whole.
        return self._is_pattern and tp.topic not in self.existing_topics

    def forget(
        self, revoked: Collection[TopicPartition], positions: Mapping[TopicPartition, int | None]
    ) -> None:
        """Drop what was known of partitions this member no longer owns, but for
        where it got to (``positions``: the first record it did not finish, None
        if it handed out none), where it starts them again if it gets them back
        and the group has no commit."""
        for tp in revoked:
            position = positions.get(tp)
            if position is None:
                position = self.committed_at_assignment.get(tp)
            if position is not None:
                self.resume_at[tp] = position
            self.redelivery_bound.pop(tp, None)
            self.previous_lease.pop(tp, None)
            self.committed_at_assignment.pop(tp, None)
            self.end_at_assignment.pop(tp, None)

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
