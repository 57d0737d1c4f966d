"""One consumer group membership of the Kafka transport: a consumer and its dispatch loop.

The dispatch loop fetches records, decodes them and starts a handler for each,
concurrently across keys and in offset order within a key
(:class:`~a2a_bus.transport.kafka.keys.KeyedRuns`). Each record goes to the
:class:`~a2a_bus.transport.kafka.target.Target` of its topic, which allows at
most ``max_in_flight`` records in flight: the records a full target cannot take
yet wait in its backlog (handed out in order as its handlers finish) and its
partitions are paused meanwhile, so one slow target never holds up the
others. Commits follow the
:class:`~a2a_bus.transport.kafka.commits.PartitionTracker` of each partition,
so the committed position never passes an unfinished record; a
:class:`~a2a_bus.transport.kafka.committer.Committer` writes them. What is known
of each owned partition's previous owner (which records may be redeliveries,
where to start) is kept by :class:`~a2a_bus.transport.kafka.ownership.Ownership`.

A single-group subscription is one member with one target; the inboxes of a
process are one member (per composition) with a target per inbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Collection, Sequence

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, ConsumerRecord, TopicPartition
from aiokafka.errors import ConsumerStoppedError, IllegalStateError, KafkaError

from a2a_bus.transport.base import TopicPattern
from a2a_bus.transport.kafka.broker import Broker
from a2a_bus.transport.kafka.commits import PartitionTracker
from a2a_bus.transport.kafka.committer import Committer, Uncommitted
from a2a_bus.transport.kafka.keys import Handling, KeyedRuns, Which
from a2a_bus.transport.kafka.ownership import Handover, Ownership
from a2a_bus.transport.kafka.records import decode_record
from a2a_bus.transport.kafka.target import Routing, Target

log = logging.getLogger(__name__)

#: Seconds to wait before fetching again after a failed fetch, lease commit or
#: reading of the partitions' offsets.
RETRY_DELAY = 0.5
#: aiokafka's own fetcher wake-up (its ``consumer_timeout_ms`` default).
_FETCHER_WAKEUP_MS = 200


class _Listener(ConsumerRebalanceListener):
    def __init__(self, member: GroupMember) -> None:
        self._member = member

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._member.on_revoked(revoked)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        await self._member.on_assigned(assigned)


class GroupMember:
    """A consumer in group ``group`` handing records to ``routing``'s targets."""

    def __init__(
        self,
        transport: Broker,
        topics: Sequence[str] | TopicPattern,
        group: str,
        routing: Routing,
        runs: KeyedRuns,
        *,
        from_beginning: bool = False,
        durable: bool = True,
        handover: Handover | None = None,
        fetch_max_wait_ms: int | None = None,
    ) -> None:
        self._transport = transport
        self._settings = settings = transport.settings
        self._topics = topics
        self.group = group
        self._routing = routing
        self._runs = runs
        self._is_pattern = isinstance(topics, TopicPattern)
        wait = settings.fetch_max_wait_ms if fetch_max_wait_ms is None else fetch_max_wait_ms
        self._consumer = AIOKafkaConsumer(
            group_id=group,
            enable_auto_commit=False,
            # Every assigned partition is sought to its start (Ownership.learn);
            # the reset only applies to an offset out of range.
            auto_offset_reset="earliest" if from_beginning or self._is_pattern else "latest",
            fetch_max_wait_ms=wait,
            # The fetcher's own wake-up: every wait it ends re-examines every
            # partition, so not more often than it fetches.
            consumer_timeout_ms=max(_FETCHER_WAKEUP_MS, wait),
            max_poll_records=settings.max_poll_records,
            session_timeout_ms=settings.session_timeout_ms,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            metadata_max_age_ms=settings.metadata_max_age_ms,
            **settings.client_kwargs(),
        )
        self._trackers: dict[TopicPartition, PartitionTracker] = {}
        #: Bumped at each revocation: work fetched before it is dropped.
        self._epoch = 0
        self._closing = False
        self._stopped = False
        #: Set once an assignment's partitions are all sought to their start.
        self._ready = asyncio.Event()
        #: Assigned partitions whose start is not known yet (kept paused).
        self._learning: set[TopicPartition] = set()
        self._relearning: asyncio.Task[None] | None = None
        self._by_topic: dict[str, list[TopicPartition]] = {}
        #: Offsets of records dropped from the key queues, never handed out.
        self._never_handled: dict[TopicPartition, set[int]] = {}
        self._commits = (Committer if durable else Uncommitted)(
            self._consumer,
            group,
            self._trackers,
            interval_ms=settings.commit_interval_ms,
            lease_size=settings.redelivery_lease,
            metrics=transport.metrics,
        )
        #: Set for a background commit (its own name: this runs for every record).
        self._commit_wanted = self._commits.wanted
        self._ownership = Ownership(
            transport,
            self._consumer,
            self._commits,
            group,
            is_pattern=self._is_pattern,
            from_beginning=from_beginning,
            handover=handover,
        )
        # Read for every record handed out.
        self._redelivery_bound = self._ownership.redelivery_bound
        self._run_task: asyncio.Task[None] | None = None

    # -- lifecycle ------------------------------------------------------------------

    async def start(self) -> None:
        """Join the group and return once the first assignment is in place (every
        assigned partition sought to its start), or after ``join_timeout``."""
        await self._consumer.start()
        listener = _Listener(self)
        if isinstance(self._topics, TopicPattern):
            regex = re.compile(self._topics.regex)
            topics = await self._transport.list_topics()
            self._ownership.existing_topics = {t for t in topics if regex.fullmatch(t)}
            self._consumer.subscribe(pattern=self._topics.regex, listener=listener)
        else:
            await self._wait_for_metadata(set(self._topics))
            self._consumer.subscribe(topics=list(self._topics), listener=listener)
        self._run_task = asyncio.create_task(self._run(), name=f"kafka-dispatch-{self.group}")
        self._commits.start()
        if self._is_pattern and not self._ownership.existing_topics:
            return  # nothing to be assigned until a matching topic appears
        try:
            await asyncio.wait_for(self._ready.wait(), self._settings.join_timeout)
        except TimeoutError:
            log.warning(
                "group %s: no partition assignment after %ss",
                self.group,
                self._settings.join_timeout,
            )

    async def _wait_for_metadata(self, topics: set[str]) -> None:
        """Wait until freshly created topics are in the cluster metadata, so the
        first assignment already covers them."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._settings.join_timeout
        while {tp.topic for tp in await self._transport.partitions(sorted(topics))} < topics:
            if loop.time() > deadline:
                log.warning("group %s: topics not in metadata yet", self.group)
                return
            await asyncio.sleep(0.05)

    async def stop(self, *, drain_timeout: float | None = None, cancel: bool = True) -> None:
        """Stop fetching, let running handlers finish (up to ``drain_timeout``
        seconds; None: the settings'), commit what finished and leave the group.

        Handlers still running then are cancelled with ``cancel``; without it they
        go on (a record fetched again meanwhile waits for its original, as
        de-duplication does). Records waiting behind their key are dropped either
        way: the next owner fetches them from the commit.
        """
        if self._stopped:
            return
        self._stopped = self._closing = True
        self._epoch += 1
        for task in (self._run_task, self._relearning):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        for target in list(self._routing.targets()):
            await self.withdraw(target)
        timeout = self._settings.drain_timeout if drain_timeout is None else drain_timeout
        unfinished = await self._runs.drain(None, timeout) if timeout > 0 else []
        self.drop_queued(None)
        if cancel and unfinished:
            running = self._runs.running(None)
            for handling in running:
                handling.cancel()
            log.warning("group %s: %d handlers cancelled at stop", self.group, len(running))
            await self._runs.drain(None, None)
        await self._commits.stop()
        final = self._final_leases(self._trackers)
        await self._commits.commit(list(self._trackers), final=final)
        await self._consumer.stop()

    async def withdraw(self, target: Target) -> None:
        """Hand out nothing more from ``target``'s backlog (dropped: the next
        owner fetches those records from the commit)."""
        task = target.draining
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        target.drop_backlog()
        self._sync_fetching(target)

    def _sync_fetching(self, target: Target) -> None:
        """Pause or resume fetching the partitions of ``target`` as
        ``target.fetching`` says (partitions whose start is still being learned
        stay paused)."""
        if self._closing:
            return
        partitions = self._partitions_of(target)
        with contextlib.suppress(IllegalStateError):  # revoked meanwhile
            if not target.fetching:
                self._consumer.pause(*partitions)
            elif self._learning:
                self._consumer.resume(*(tp for tp in partitions if tp not in self._learning))
            else:
                self._consumer.resume(*partitions)

    def _partitions_of(self, target: Target) -> Collection[TopicPartition]:
        if target.topic is None:
            return self._consumer.assignment()
        return self._by_topic.get(target.topic, ())

    @property
    def assignment(self) -> set[TopicPartition]:
        """Partitions this member owns now."""
        return set(self._consumer.assignment())

    def lag(self) -> int:
        """Records of the assigned partitions not handled yet (in flight or not
        fetched), as of the last fetch response; no request to the broker."""
        return self._ownership.lag(self._trackers)

    # -- rebalance ------------------------------------------------------------------

    async def on_revoked(self, revoked: set[TopicPartition]) -> None:
        self._epoch += 1  # the dispatch loop and the backlogs drop what they hold
        for target in self._routing.targets():
            target.drop_backlog()
        gone = set(revoked)

        def of_revoked(handling: Handling) -> bool:
            return handling.tp in gone

        await self._runs.drain(of_revoked, self._settings.drain_timeout)
        # Queued records were not handed to a handler: the next owner handles them.
        self.drop_queued(of_revoked)
        await self._commits.commit(revoked, final=self._final_leases(revoked))
        for tp in revoked:
            self._trackers.pop(tp, None)
            self._never_handled.pop(tp, None)
        self._ownership.forget(revoked)
        self._learning -= gone
        for topic in {tp.topic for tp in revoked}:
            left = [tp for tp in self._by_topic.get(topic, ()) if tp not in gone]
            if left:
                self._by_topic[topic] = left
            else:
                self._by_topic.pop(topic, None)

    async def on_assigned(self, assigned: set[TopicPartition]) -> None:
        if assigned:
            # Nothing is fetched before the start is known; records fetched
            # before this pause are dropped by the dispatch loop (see _run).
            self._consumer.pause(*assigned)
            self._learning |= assigned
            for tp in assigned:
                self._by_topic.setdefault(tp.topic, []).append(tp)
            if not await self._learn(assigned):
                # Not in this callback, whose length holds up the whole group.
                self._relearning = asyncio.create_task(self._relearn(assigned, self._epoch))
                return
        self._ready.set()

    async def _learn(self, partitions: set[TopicPartition]) -> bool:
        # Bounded well inside the session timeout: partitions created a moment
        # ago answer only once their leader loaded them (seconds for thousands).
        attempt = self._settings.session_timeout_ms / 3000
        try:
            if not await asyncio.wait_for(self._ownership.learn(partitions), attempt):
                return False
        except TimeoutError:
            log.info("group %s: partitions not ready yet, trying again", self.group)
            return False
        self._learning -= partitions
        for target in {self._routing.target(tp.topic) for tp in partitions}:
            if target is not None:
                self._sync_fetching(target)
        return True

    async def _relearn(self, partitions: set[TopicPartition], epoch: int) -> None:
        while self._epoch == epoch:
            await asyncio.sleep(RETRY_DELAY)
            if self._epoch == epoch and await self._learn(partitions):
                self._ready.set()
                return

    def drop_queued(self, which: Which) -> None:
        """Drop the records queued behind a running record that ``which`` picks:
        they never reached a handler, and the next owner fetches them again."""
        for handling in self._runs.drop_queued(which):
            handling.target.release(1)
            if self._trackers.get(handling.tp) is handling.tracker:
                self._never_handled.setdefault(handling.tp, set()).add(handling.record.offset)

    def _final_leases(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """The lease to commit for partitions this member hands out nothing more
        from: one past the last record it handed to a handler (dropped queued
        records left aside), and no less than the bound it inherited (records
        the previous owner may have handed out and this member did not reach
        stay flagged for the next)."""
        final: dict[TopicPartition, int] = {}
        for tp in partitions:
            tracker = self._trackers.get(tp)
            if tracker is None:
                continue
            end = tracker.handed_out_end(self._never_handled.get(tp, ())) or 0
            final[tp] = max(end, self._redelivery_bound.get(tp, 0))
        return final

    # -- dispatch -------------------------------------------------------------------

    async def _run(self) -> None:
        route = self._routing.target
        while not self._closing:
            try:
                batches = await self._consumer.getmany(timeout_ms=1000)
            except ConsumerStoppedError:
                return
            except KafkaError as exc:
                log.warning("group %s: fetch failed: %s", self.group, exc)
                await asyncio.sleep(RETRY_DELAY)
                continue
            if not batches:
                continue
            epoch = self._epoch
            bound = self._redelivery_bound
            # A partition not learned when this fetch returned was fetched before
            # it was sought to its start: that fetches its records again.
            learned = [(tp, records) for tp, records in batches.items() if tp in bound]
            for tp, records in learned:
                if self._epoch != epoch:
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
        backlog's own task).
        The common case is synchronous (a free slot, the offset well inside the
        committed lease); only the rest awaits.
        """
        for index, record in enumerate(records):
            if target.paused or target.in_flight >= target.max_in_flight:
                if spill:
                    self._spill(target, tp, records[index:], epoch)
                    return
                await target.wait_for_slot()
            if self._epoch != epoch:
                return  # revoked: the new owner fetches from the commit
            offset = record.offset
            tracker = self._trackers.get(tp)
            if tracker is None or not self._commits.covers(tracker, offset):
                tracker = await self._prepare(tp, offset, epoch)
                if tracker is None:
                    if self._epoch == epoch and tp in self._redelivery_bound:
                        self._rewind(tp, offset, target)  # no lease yet: fetch it again later
                    return
            self._start(tp, record, tracker, target)

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
            self._sync_fetching(target)

    async def _drain_backlog(self, target: Target) -> None:
        try:
            while target.backlog and not self._closing:
                tp, records, epoch = target.backlog.popleft()
                target.backlog_records -= len(records)
                if target.fetching:
                    self._sync_fetching(target)  # fetch more while these are handed out
                await self._hand_out(tp, records, epoch, target, spill=False)
        finally:
            target.draining = None
            self._sync_fetching(target)

    async def _prepare(
        self, tp: TopicPartition, offset: int, epoch: int
    ) -> PartitionTracker | None:
        """Before handing out ``offset``: hold a lease covering it. None if it must
        not be handed out now."""
        if self._epoch != epoch or tp not in self._redelivery_bound:
            return None  # dropped on purpose: the partition was revoked
        tracker = self._trackers.get(tp)
        if tracker is None:
            lease = self._ownership.previous_lease.get(tp, 0)
            tracker = self._trackers[tp] = PartitionTracker(offset, lease=lease)
        if not await self._commits.hold_lease(tp, tracker, offset):
            await asyncio.sleep(RETRY_DELAY)  # the lease commit failed: retry shortly
            return None
        return tracker if self._epoch == epoch else None

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

    def _start(
        self, tp: TopicPartition, record: ConsumerRecord, tracker: PartitionTracker, target: Target
    ) -> None:
        """Decode ``record``, count it in flight and start handling it (or queue it
        behind the running record of its key)."""
        decoded = decode_record(
            self._transport.adaptor,
            tp.topic,
            tp.partition,
            record.offset,
            record.value,
            record.headers,
            record.key,
        )
        tracker.add(record.offset)
        target.in_flight += 1
        redelivered = record.offset < self._redelivery_bound[tp]
        self._runs.start(
            Handling(
                self._runs, target, tp, record, decoded, tracker, redelivered, self._commit_wanted
            )
        )
