"""One consumer group membership of the Kafka transport.

The dispatch loop fetches records, decodes them and starts a handler for each
(at most ``max_in_flight`` records at once), concurrently across keys and in
offset order within a key (:class:`~a2a_bus.transport.kafka.keys.KeyedRuns`).
Commits follow the
:class:`~a2a_bus.transport.kafka.commits.PartitionTracker` of each partition,
so the committed position never passes an unfinished record; a
:class:`~a2a_bus.transport.kafka.committer.Committer` writes them. What is known
of each owned partition's previous owner (which records may be redeliveries) is
kept by :class:`~a2a_bus.transport.kafka.ownership.Ownership`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, ConsumerRecord, TopicPartition
from aiokafka.errors import ConsumerStoppedError, IllegalStateError, KafkaError

from a2a_bus.transport.base import (
    Delivery,
    Handler,
    Subscription,
    TopicPattern,
    UndecodableHandler,
    report_undecodable,
)
from a2a_bus.transport.dedup import DedupWindow
from a2a_bus.transport.kafka.commits import PartitionTracker
from a2a_bus.transport.kafka.committer import Committer, Uncommitted
from a2a_bus.transport.kafka.keys import Handling, KeyedRuns
from a2a_bus.transport.kafka.ownership import Ownership
from a2a_bus.transport.kafka.records import decode_record, failure_reason

if TYPE_CHECKING:
    from a2a_bus.transport.kafka.transport import KafkaTransport

log = logging.getLogger(__name__)

#: Seconds to wait before fetching again after a failed fetch or lease commit.
_RETRY_DELAY = 0.5


class _Listener(ConsumerRebalanceListener):
    def __init__(self, subscription: KafkaSubscription) -> None:
        self._subscription = subscription

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._subscription._on_revoked(revoked)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        await self._subscription._on_assigned(assigned)


class KafkaSubscription(Subscription):
    """A running consumer group member; see the module docstring."""

    def __init__(
        self,
        transport: KafkaTransport,
        topics: Sequence[str] | TopicPattern,
        group: str,
        handler: Handler,
        *,
        from_beginning: bool = False,
        max_in_flight: int = 64,
        on_undecodable: UndecodableHandler | None = None,
        durable: bool = True,
        dead_letter: bool = True,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        self._transport = transport
        self._settings = settings = transport.settings
        self._topics = topics
        self.group = group
        self._handler = handler
        self._on_undecodable = on_undecodable
        self._dead_letter = dead_letter
        self._from_beginning = from_beginning
        self._is_pattern = isinstance(topics, TopicPattern)
        # A pattern subscription reads topics created after it started from their
        # beginning, so nothing published to a new topic is lost before the
        # metadata refresh finds it; topics that existed follow ``from_beginning``.
        reset = "earliest" if from_beginning or self._is_pattern else "latest"
        self._consumer = AIOKafkaConsumer(
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset=reset,
            fetch_max_wait_ms=settings.fetch_max_wait_ms,
            max_poll_records=settings.max_poll_records,
            session_timeout_ms=settings.session_timeout_ms,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            metadata_max_age_ms=settings.metadata_max_age_ms,
            **settings.client_kwargs(),
        )
        self._loop = asyncio.get_running_loop()
        self._max_in_flight = max_in_flight
        #: Records handed out and not finished (queued behind their key or running).
        self._in_flight = 0
        self._slot_freed: asyncio.Future[None] | None = None
        self._dedup = DedupWindow(settings.dedup_window)
        self._trackers: dict[TopicPartition, PartitionTracker] = {}
        self._runs = KeyedRuns(self._loop, self._handle, group)
        self._epoch = 0
        self._paused = False
        self._closing = False
        self._stopped = False
        self._assigned = asyncio.Event()
        #: Set once the current assignment's previous owners are known; records
        #: fetched earlier wait for it (aiokafka may fetch before the callback).
        self._learned = asyncio.Event()
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
        )
        # Read for every record handed out.
        self._redelivery_bound = self._ownership.redelivery_bound
        self._run_task: asyncio.Task[None] | None = None

    # -- lifecycle ------------------------------------------------------------------

    async def start(self) -> None:
        """Join the group and return once the first assignment is in place."""
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
            await asyncio.wait_for(self._assigned.wait(), self._settings.join_timeout)
        except TimeoutError:
            log.warning(
                "group %s: no partition assignment after %ss",
                self.group,
                self._settings.join_timeout,
            )
            return
        # Resolve start positions now, so that an event published after
        # ``subscribe()`` returns is never skipped by a late "latest" reset.
        for tp in list(self._consumer.assignment()):
            with contextlib.suppress(IllegalStateError):
                await asyncio.wait_for(self._consumer.position(tp), self._settings.join_timeout)

    async def _wait_for_metadata(self, topics: set[str]) -> None:
        """Wait until freshly created topics are in the cluster metadata, so the
        first assignment already covers them."""
        deadline = asyncio.get_running_loop().time() + self._settings.join_timeout
        while not topics <= await self._consumer.topics():
            if asyncio.get_running_loop().time() > deadline:
                log.warning("group %s: topics %s not in metadata yet", self.group, topics)
                return
            await asyncio.sleep(0.05)

    async def stop(self, drain_timeout: float | None = None) -> None:
        """Stop fetching, let in-flight handlers finish (up to ``drain_timeout``
        seconds), commit what finished and leave the group."""
        if self._stopped:
            return
        self._stopped = self._closing = True
        timeout = self._settings.drain_timeout if drain_timeout is None else drain_timeout
        if self._run_task is not None:
            self._run_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._run_task
        unfinished = await self._runs.drain(None, timeout)
        if unfinished:
            # Queued records were not handed to a handler: the next owner handles them.
            self._release(self._runs.drop_queued(None))
            for handling in unfinished:
                handling.cancel()
            log.warning("group %s: %d handlers cancelled at stop", self.group, len(unfinished))
            await self._runs.drain(None, None)
        await self._commits.stop()
        await self._commits.commit(self._trackers, clean=True)
        await self._consumer.stop()
        self._transport._forget(self)

    def pause(self) -> None:
        self._paused = True
        self._consumer.pause(*self._consumer.assignment())

    def resume(self) -> None:
        self._paused = False
        self._consumer.resume(*self._consumer.assignment())

    @property
    def assignment(self) -> set[TopicPartition]:
        """Partitions this member owns now."""
        return set(self._consumer.assignment())

    @property
    def in_flight(self) -> int:
        """Records being handled now."""
        return self._in_flight

    def lag(self) -> int:
        """Records of the assigned partitions not handled yet (in flight or not
        fetched), as of the last fetch response; no request to the broker."""
        return self._ownership.lag(self._trackers)

    # -- rebalance ------------------------------------------------------------------

    async def _on_revoked(self, revoked: set[TopicPartition]) -> None:
        self._epoch += 1  # the dispatch loop drops the rest of its batch
        self._learned.clear()
        await self._runs.drain(revoked, self._settings.drain_timeout)
        await self._commits.commit(revoked, clean=True)
        for tp in revoked:
            self._trackers.pop(tp, None)
        self._ownership.forget(revoked)
        # Queued records were not handed to a handler: the next owner handles them.
        self._release(self._runs.drop_queued(revoked))

    async def _on_assigned(self, assigned: set[TopicPartition]) -> None:
        if assigned:
            await self._ownership.learn(assigned)
            if self._paused:
                self._consumer.pause(*assigned)
        self._learned.set()
        self._assigned.set()

    # -- dispatch -------------------------------------------------------------------

    async def _run(self) -> None:
        first_fetched = self._ownership.first_fetched
        while not self._closing:
            try:
                batches = await self._consumer.getmany(timeout_ms=1000)
            except ConsumerStoppedError:
                return
            except KafkaError as exc:
                log.warning("group %s: fetch failed: %s", self.group, exc)
                await asyncio.sleep(_RETRY_DELAY)
                continue
            epoch = self._epoch
            for tp, records in batches.items():
                if self._epoch != epoch:
                    break  # revoked: the new owner fetches from the commit
                if records and tp not in first_fetched:
                    first_fetched[tp] = records[0].offset
                await self._hand_out(tp, records, epoch)

    async def _hand_out(
        self, tp: TopicPartition, records: list[ConsumerRecord], epoch: int
    ) -> None:
        """Start handling ``records`` of ``tp`` in offset order.

        The common case is synchronous (a free slot, the partition known, the
        offset well inside the committed lease); only the rest awaits.
        """
        if tp not in self._redelivery_bound:
            await self._learned.wait()  # the assignment callback runs after the fetch
        skip_below = self._ownership.skip_below.get(tp)
        if skip_below is not None and records and records[0].offset < skip_below:
            records = [record for record in records if record.offset >= skip_below]
        for record in records:
            if self._in_flight >= self._max_in_flight:
                await self._wait_for_slot()
            if self._epoch != epoch:
                return  # revoked: the new owner fetches from the commit
            offset = record.offset
            tracker = self._trackers.get(tp)
            if tracker is None or not self._commits.covers(tracker, offset):
                tracker = await self._prepare(tp, offset, epoch)
                if tracker is None:
                    if self._epoch == epoch and tp in self._redelivery_bound:
                        self._rewind(tp, offset)  # no lease yet: fetch it again later
                    return
            self._start(tp, record, tracker)

    async def _wait_for_slot(self) -> None:
        while self._in_flight >= self._max_in_flight:
            self._slot_freed = self._loop.create_future()
            await self._slot_freed

    def _release(self, records: int) -> None:
        self._in_flight -= records
        waiter = self._slot_freed
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _prepare(
        self, tp: TopicPartition, offset: int, epoch: int
    ) -> PartitionTracker | None:
        """Before handing out ``offset``: learn the partition's previous owner and
        hold a lease covering it. None if it must not be handed out now."""
        if self._epoch != epoch or tp not in self._redelivery_bound:
            return None  # dropped on purpose: the partition was revoked
        tracker = self._trackers.get(tp)
        if tracker is None:
            lease = self._ownership.previous_lease.get(tp, 0)
            tracker = self._trackers[tp] = PartitionTracker(offset, lease=lease)
        if not await self._commits.hold_lease(tp, tracker, offset):
            await asyncio.sleep(_RETRY_DELAY)  # the lease commit failed: retry shortly
            return None
        return tracker if self._epoch == epoch else None

    def _rewind(self, tp: TopicPartition, offset: int) -> None:
        with contextlib.suppress(IllegalStateError):
            if tp in self._consumer.assignment():
                self._consumer.seek(tp, offset)

    def _start(self, tp: TopicPartition, record: ConsumerRecord, tracker: PartitionTracker) -> None:
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
        self._in_flight += 1
        redelivered = record.offset < self._redelivery_bound[tp]
        self._runs.start(Handling(self._runs, tp, record, decoded, tracker, redelivered))

    async def _handle(self, handling: Handling) -> None:
        """Dead-letter what did not decode, hand each event to the handler (once
        per de-duplication key), then count the record finished."""
        tp = handling.tp
        record = handling.record
        decoded = handling.decoded
        tracker = handling.tracker
        redelivered = handling.redelivered
        metrics = self._transport.metrics
        dedup = self._dedup
        finished = False
        try:
            if decoded.failures:
                if self._dead_letter:
                    reason = failure_reason(decoded.failures)
                    await self._transport.dead_letter(record, reason, failures=decoded.failures)
                if self._on_undecodable is not None:
                    await report_undecodable(
                        self._on_undecodable,
                        tp.topic,
                        tp.partition,
                        record.offset,
                        record.key,
                        record.headers,
                        decoded.failures,
                        record.value,
                    )
            for event, dedup_key, raw in decoded.events:
                original = dedup.claim(dedup_key)
                if original is not None:
                    metrics.duplicates += 1
                    await asyncio.shield(original)
                    continue
                delivery = Delivery(
                    event,
                    tp.topic,
                    tp.partition,
                    record.offset,
                    record.key,
                    redelivered,
                    raw,
                    tuple(record.headers),
                )
                try:
                    await self._handler(delivery)
                except asyncio.CancelledError:
                    dedup.forget(dedup_key)
                    raise
                except Exception as exc:
                    metrics.handler_errors += 1
                    log.exception("group %s: handler failed on %s", self.group, event.get_id())
                    reason = f"handler-error: {type(exc).__name__}: {exc}"
                    await self._transport.dead_letter(record, reason, event_id=event.get_id())
                else:
                    metrics.delivered += 1
                    if redelivered:
                        metrics.redelivered += 1
                finally:
                    dedup.done(dedup_key)
            finished = True
        finally:
            self._release(1)
            if finished:
                tracker.finish(record.offset)
                self._commit_wanted.set()
