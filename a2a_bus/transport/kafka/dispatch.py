"""The dispatch loop of a group member: fetched records to their targets.

It fetches records, decodes them and starts a handler for each, concurrently
across keys and in offset order within a key
(:class:`~a2a_bus.transport.kafka.keys.KeyedRuns`). Each record goes to the
:class:`~a2a_bus.transport.kafka.target.Target` of its topic, which allows at
most ``max_in_flight`` records in flight: the records a full (or paused) target
cannot take yet wait in its backlog, handed out in order by a task of their own
as it takes records again, and its partitions are paused while that backlog is
long, so one slow target never holds up the others. Before a record is handed
out, a committed lease must cover it (see
:mod:`a2a_bus.transport.kafka.commits`). A target that keeps no progress takes a
record whose key has none running straight to its handler
(:meth:`~a2a_bus.transport.kafka.target.Target.run_at_once`): one that finishes
there needs no handling of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.errors import ConsumerStoppedError, IllegalStateError, KafkaError

from a2a_bus.protocol import Adaptor
from a2a_bus.runtime.loops import stop_task
from a2a_bus.transport.kafka.broker import KafkaMetrics
from a2a_bus.transport.kafka.commits import PartitionTracker
from a2a_bus.transport.kafka.committer import Committer
from a2a_bus.transport.kafka.keys import Handling, KeyedRuns
from a2a_bus.transport.kafka.ownership import Ownership
from a2a_bus.transport.kafka.target import Routing, Target
from a2a_bus.transport.records import decode_record

log = logging.getLogger(__name__)

#: Seconds to wait before fetching again after a failed fetch, lease commit or
#: reading of the partitions' offsets.
RETRY_DELAY = 0.5


class Dispatch:
    """Hands ``consumer``'s records to ``routing``'s targets; its member tells
    it about assignments (:meth:`assigned`, :meth:`learned`, :meth:`revoked`)."""

    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        routing: Routing,
        runs: KeyedRuns,
        trackers: dict[TopicPartition, PartitionTracker],
        commits: Committer,
        ownership: Ownership,
        adaptor: Adaptor,
        metrics: KafkaMetrics,
        name: str,
    ) -> None:
        self._consumer = consumer
        self._routing = routing
        self._runs = runs
        self._trackers = trackers
        self._commits = commits
        self._ownership = ownership
        self._adaptor = adaptor
        self._metrics = metrics
        self._name = name
        #: Bumped at each revocation: work fetched before it is dropped.
        self.epoch = 0
        self.closing = False
        # Read for every record handed out.
        self._redelivery_bound = ownership.redelivery_bound
        self._commit_wanted = commits.wanted
        #: Assigned partitions whose start is not known yet (kept paused).
        self._learning: set[TopicPartition] = set()
        self._by_topic: dict[str, list[TopicPartition]] = {}

    def close(self) -> None:
        """Hand out nothing more (the loop ends once its task is cancelled)."""
        self.closing = True
        self.epoch += 1

    # -- assignments ----------------------------------------------------------------

    def assigned(self, assigned: Collection[TopicPartition]) -> None:
        """Fetch nothing of ``assigned`` before it is :meth:`learned`."""
        self._consumer.pause(*assigned)
        self._learning.update(assigned)
        for tp in assigned:
            self._by_topic.setdefault(tp.topic, []).append(tp)

    def learned(self, partitions: Collection[TopicPartition]) -> None:
        """The starts of ``partitions`` are sought: fetch those whose target takes records."""
        self._learning.difference_update(partitions)
        for target in {self._routing.target(tp.topic) for tp in partitions}:
            if target is not None:
                self.sync_fetching(target)

    def revoked(self, revoked: Collection[TopicPartition]) -> None:
        """Drop what was fetched and not handed out (the next owner fetches it)."""
        self.epoch += 1
        for target in self._routing.targets():
            target.drop_backlog()
        gone = set(revoked)
        self._learning -= gone
        for topic in {tp.topic for tp in gone}:
            left = [tp for tp in self._by_topic.get(topic, ()) if tp not in gone]
            if left:
                self._by_topic[topic] = left
            else:
                self._by_topic.pop(topic, None)

    async def withdraw(self, target: Target) -> None:
        """Hand out nothing more from ``target``'s backlog (dropped: the next
        owner fetches those records from the commit)."""
        task = target.draining
        await stop_task(task)
        target.drop_backlog()
        self.sync_fetching(target)

    def sync_fetching(self, target: Target) -> None:
        """Pause or resume fetching the partitions of ``target`` as
        ``target.fetching`` says (partitions whose start is still being learned
        stay paused)."""
        if self.closing:
            return
        if target.topic is None:
            partitions: Collection[TopicPartition] = self._consumer.assignment()
        else:
            partitions = self._by_topic.get(target.topic, ())
        with contextlib.suppress(IllegalStateError):  # revoked meanwhile
            if not target.fetching:
                self._consumer.pause(*partitions)
            elif self._learning:
                self._consumer.resume(*(tp for tp in partitions if tp not in self._learning))
            else:
                self._consumer.resume(*partitions)

    # -- the loop -------------------------------------------------------------------

    async def run(self) -> None:
        route = self._routing.target
        metrics = self._metrics
        while not self.closing:
            try:
                batches = await self._consumer.getmany(timeout_ms=1000)
            except ConsumerStoppedError:
                return
            except KafkaError as exc:
                log.warning("%s: fetch failed: %s", self._name, exc)
                await asyncio.sleep(RETRY_DELAY)
                continue
            if not batches:
                continue
            metrics.fetches += 1
            metrics.fetched += sum(map(len, batches.values()))
            epoch = self.epoch
            bound = self._redelivery_bound
            # A partition not learned when this fetch returned was fetched before
            # it was sought to its start: that fetches its records again.
            learned = [(tp, records) for tp, records in batches.items() if tp in bound]
            for tp, records in learned:
                if self.epoch != epoch:
                    break  # revoked: the new owner fetches from the commit
                target = route(tp.topic)
                if target is None or not records:
                    continue  # not handed out: fetched again by the next owner
                if target.draining is not None:
                    self._spill(target, tp, records, epoch)  # behind its backlog
                else:
                    await self._hand_out(tp, records, epoch, target, spill=True)

    async def _hand_out(
        self,
        tp: TopicPartition,
        records: list[ConsumerRecord],
        epoch: int,
        target: Target,
        *,
        spill: bool,
    ) -> None:
        """Start handling ``records`` of ``tp`` in offset order.

        When ``target`` is full or paused the rest go to its backlog (``spill``,
        from the dispatch loop) or wait until it takes records again (from the
        backlog's own task). The common case is synchronous (a free slot, the
        offset well inside the committed lease); only the rest awaits.
        """
        runs, adaptor, trackers, commits = self._runs, self._adaptor, self._trackers, self._commits
        topic, partition = tp
        bound = self._redelivery_bound
        wanted = self._commit_wanted
        last = records[-1].offset
        at_once = target.at_once
        tracker: PartitionTracker | None = None
        # Records up to this offset are under the acknowledged lease: the batch is
        # checked once (by its last record) rather than record by record.
        covered = -1
        for index, record in enumerate(records):
            if target.paused or target.in_flight >= target.max_in_flight:
                if spill:
                    self._spill(target, tp, records[index:], epoch)
                    return
                await target.wait_for_slot()
                tracker = None  # looked up again after a wait
            if self.epoch != epoch:
                return  # revoked: the new owner fetches from the commit
            offset = record.offset
            if tracker is None or offset > covered:
                tracker = trackers.get(tp)
                if tracker is not None and commits.covers(tracker, last):
                    covered = last
                else:  # this record alone, holding a lease for it first if need be
                    if tracker is None or not commits.covers(tracker, offset):
                        tracker = await self._prepare(tp, offset, epoch)
                        if tracker is None:
                            if self.epoch == epoch and tp in bound:
                                self._rewind(tp, offset, target)  # no lease yet: fetch it later
                            return
                    covered = offset
            # Decoded, counted in flight, and started (or queued behind the running
            # record of its key); spelled out here, as this runs for every record.
            value, headers, key = record.value, record.headers, record.key
            decoded = decode_record(adaptor, topic, partition, offset, value, headers, key)
            redelivered = offset < bound[tp]
            started = None
            if at_once and (key is None or runs.idle(tp, key)):
                ran = target.run_at_once(tp, record, decoded, redelivered)
                if ran is True:
                    tracker.add(offset, 0)
                    continue
                if ran is not False:
                    started = ran
            tracker.add(offset)
            target.in_flight += 1
            runs.start(
                Handling(runs, target, tp, record, decoded, tracker, redelivered, wanted, started)
            )

    def _spill(
        self, target: Target, tp: TopicPartition, records: list[ConsumerRecord], epoch: int
    ) -> None:
        """Keep ``records`` in ``target``'s backlog, handed out by a task of its own
        as it takes records again; its partitions are paused while the backlog
        holds ``max_in_flight`` records or more."""
        target.backlog.append((tp, records, epoch))
        target.backlog_records += len(records)
        if target.draining is None:
            target.draining = asyncio.create_task(
                self._drain_backlog(target), name=f"kafka-backlog-{target.name}"
            )
        if not target.fetching:
            self.sync_fetching(target)

    async def _drain_backlog(self, target: Target) -> None:
        try:
            while target.backlog and not self.closing:
                tp, records, epoch = target.backlog.popleft()
                target.backlog_records -= len(records)
                if target.fetching:
                    self.sync_fetching(target)  # fetch more while these are handed out
                await self._hand_out(tp, records, epoch, target, spill=False)
        finally:
            target.draining = None
            self.sync_fetching(target)

    async def _prepare(
        self, tp: TopicPartition, offset: int, epoch: int
    ) -> PartitionTracker | None:
        """Before handing out ``offset``: hold a lease covering it. None if it must
        not be handed out now."""
        if self.epoch != epoch or tp not in self._redelivery_bound:
            return None  # dropped on purpose: the partition was revoked
        tracker = self._trackers.get(tp)
        if tracker is None:
            lease = self._ownership.previous_lease.get(tp, 0)
            tracker = self._trackers[tp] = PartitionTracker(offset, lease=lease)
        if not await self._commits.hold_lease(tp, tracker, offset):
            await asyncio.sleep(RETRY_DELAY)  # the lease commit failed: retry shortly
            return None
        return tracker if self.epoch == epoch else None

    def _rewind(self, tp: TopicPartition, offset: int, target: Target) -> None:
        """Fetch ``tp`` again from ``offset`` (its later records in the backlog too)."""
        if target.backlog:
            kept = [entry for entry in target.backlog if entry[0] != tp]
            target.backlog.clear()
            target.backlog.extend(kept)
            target.backlog_records = sum(len(entry[1]) for entry in kept)
        with contextlib.suppress(IllegalStateError):
            if tp in self._consumer.assignment():
                self._consumer.seek(tp, offset)
