"""One consumer group membership of the Kafka transport: a consumer in a group.

The member joins the group, learns each assignment (where every partition
starts and which records may be redeliveries:
:class:`~a2a_bus.transport.kafka.ownership.Ownership`), lets its
:class:`~a2a_bus.transport.kafka.dispatch.Dispatch` hand the records out, and at
a revocation or stop commits what finished with a lease exact to what it handed
out. Commits follow the :class:`~a2a_bus.transport.kafka.commits.PartitionTracker`
of each partition, so the committed position never passes an unfinished
record; a :class:`~a2a_bus.transport.kafka.committer.Committer` writes them.

A single-group subscription is one member with one target; the inboxes of a
process are one member (per composition) with a target per inbox.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Collection, Sequence

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

from a2a_bus.runtime.loops import stop_task
from a2a_bus.transport.base import TopicPattern
from a2a_bus.transport.kafka.broker import Broker
from a2a_bus.transport.kafka.commits import PartitionTracker
from a2a_bus.transport.kafka.committer import Committer, Uncommitted
from a2a_bus.transport.kafka.consumers import stop_consumer
from a2a_bus.transport.kafka.dispatch import RETRY_DELAY, Dispatch
from a2a_bus.transport.kafka.keys import Handling, KeyedRuns, Which
from a2a_bus.transport.kafka.ownership import Handover, Ownership
from a2a_bus.transport.kafka.target import Routing, Target
from a2a_bus.transport.kafka.transactions import TransactionalCommitter

log = logging.getLogger(__name__)

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
        #: How long the broker may hold an idle fetch of this member's consumer.
        self.fetch_max_wait_ms = wait
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
            # exactly_once: records of transactions aborted or still open stay unseen.
            isolation_level="read_committed" if settings.exactly_once else "read_uncommitted",
            **settings.client_kwargs(),
        )
        self._trackers: dict[TopicPartition, PartitionTracker] = {}
        self._stopped = False
        #: Set once an assignment's partitions are all sought to their start.
        self._ready = asyncio.Event()
        self._relearning: asyncio.Task[None] | None = None
        #: Offsets of records dropped from the key queues, never handed out.
        self._never_handled: dict[TopicPartition, set[int]] = {}
        self._commits: Committer
        if durable and settings.exactly_once:
            self._commits = TransactionalCommitter(
                self._consumer,
                group,
                self._trackers,
                settings=settings,
                routes=transport.answer_routes,
                metrics=transport.metrics,
            )
        else:
            self._commits = (Committer if durable else Uncommitted)(
                self._consumer,
                group,
                self._trackers,
                interval_ms=settings.commit_interval_ms,
                lease_size=settings.redelivery_lease,
                metrics=transport.metrics,
            )
        self._ownership = Ownership(
            transport,
            self._consumer,
            self._commits,
            group,
            is_pattern=self._is_pattern,
            from_beginning=from_beginning,
            handover=handover,
        )
        self._redelivery_bound = self._ownership.redelivery_bound
        self._dispatch = Dispatch(
            self._consumer,
            routing,
            runs,
            self._trackers,
            self._commits,
            self._ownership,
            transport.adaptor,
            transport.metrics,
            f"group {group}",
        )
        self._run_task: asyncio.Task[None] | None = None

    # -- lifecycle ------------------------------------------------------------------

    async def start(self) -> None:
        """Join the group and return once the first assignment is in place (every
        assigned partition sought to its start), or after ``join_timeout``."""
        await self._commits.open()
        try:
            await self._consumer.start()
        except BaseException:
            await self._commits.close()
            raise
        listener = _Listener(self)
        if isinstance(self._topics, TopicPattern):
            regex = re.compile(self._topics.regex)
            topics = await self._transport.list_topics()
            self._ownership.existing_topics = {t for t in topics if regex.fullmatch(t)}
            self._consumer.subscribe(pattern=self._topics.regex, listener=listener)
        else:
            await self._wait_for_metadata(set(self._topics))
            self._consumer.subscribe(topics=list(self._topics), listener=listener)
        self._run_task = asyncio.create_task(
            self._dispatch.run(), name=f"kafka-dispatch-{self.group}"
        )
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
        self._stopped = True
        self._dispatch.close()
        for task in (self._run_task, self._relearning):
            await stop_task(task)
        for target in list(self._routing.targets()):
            await self._dispatch.withdraw(target)
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
        self._commits.release(list(self._trackers))
        await self._commits.close()
        await stop_consumer(self._consumer)

    async def withdraw(self, target: Target) -> None:
        """Hand out nothing more from ``target``'s backlog (dropped: the next
        owner fetches those records from the commit)."""
        await self._dispatch.withdraw(target)

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
        self._dispatch.revoked(revoked)
        gone = set(revoked)

        def of_revoked(handling: Handling) -> bool:
            return handling.tp in gone

        await self._runs.drain(of_revoked, self._settings.drain_timeout)
        # Queued records were not handed to a handler: the next owner handles them.
        self.drop_queued(of_revoked)
        await self._commits.commit(revoked, final=self._final_leases(revoked))
        self._commits.release(revoked)
        positions = {}
        for tp in revoked:
            tracker = self._trackers.pop(tp, None)
            positions[tp] = tracker.position if tracker is not None else None
            self._never_handled.pop(tp, None)
        self._ownership.forget(revoked, positions)

    async def on_assigned(self, assigned: set[TopicPartition]) -> None:
        if assigned:
            # Nothing is fetched before the start is known; records fetched
            # before this pause are dropped by the dispatch loop.
            self._dispatch.assigned(assigned)
            self._commits.claim(assigned)
            # Within a third of the session timeout in this callback: partitions
            # created a moment ago answer only once their leader loaded them
            # (tens of seconds for thousands).
            if not await self._learn(assigned, self._settings.session_timeout_ms / 3000):
                # Not in this callback, whose length holds up the whole group.
                epoch = self._dispatch.epoch
                self._relearning = asyncio.create_task(self._relearn(assigned, epoch))
                return
        self._ready.set()

    async def _learn(self, partitions: set[TopicPartition], within: float | None = None) -> bool:
        try:
            if not await asyncio.wait_for(self._ownership.learn(partitions), within):
                return False
        except TimeoutError:
            log.info("group %s: partitions not ready yet, trying again", self.group)
            return False
        starts = self._ownership.committed_at_assignment
        self._commits.reading_from({tp: starts[tp] for tp in partitions if tp in starts})
        self._dispatch.learned(partitions)
        return True

    async def _relearn(self, partitions: set[TopicPartition], epoch: int) -> None:
        while self._dispatch.epoch == epoch:
            await asyncio.sleep(RETRY_DELAY)
            if self._dispatch.epoch == epoch and await self._learn(partitions):
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
