"""The in-process transport: the Kafka semantics, without a broker.

Topics have partitions (records placed by key hash, round-robin without a
key) and keep a bounded history (``retention`` records per partition, or the
latest record per key for compacted topics), so a late subscriber can replay
it. Consumer groups share a topic's partitions among their members; every
group gets every record (fan-out is by group, one stored copy). Within a
partition, records with the same key are handed over one at a time, in order;
at most ``max_in_flight`` records are in a member's hands at once. Progress
is tracked per group, so a member that leaves after draining hands its
partitions over without a repeat. Records are decoded, de-duplicated by
(source, id) and dead-lettered exactly as the Kafka transport does (shared
helpers), so both behave the same behind the bus.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import re
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol import Adaptor, to_kafka
from a2a_bus.transport.base import (
    Delivery,
    Handler,
    ReadBatch,
    Subscription,
    TopicPattern,
    Transport,
    UndecodableHandler,
    checked_topics,
    report_undecodable,
)
from a2a_bus.transport.dedup import DedupWindow
from a2a_bus.transport.eager import run_eagerly
from a2a_bus.transport.kafka.records import dead_letter_headers, decode_record, failure_reason
from a2a_bus.transport.memory.log import TP, Group, Partition, Progress, Record, read_partitions
from a2a_bus.transport.positions import Position
from a2a_bus.transport.reading import check_request

log = logging.getLogger(__name__)

TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]+$")
#: Handlers started eagerly inside one another (a handler that publishes) at
#: most this deep; deeper ones get a task, so the stack stays short.
MAX_EAGER_DEPTH = 4


class MemorySubscription(Subscription):
    def __init__(
        self,
        transport: MemoryTransport,
        group: Group,
        topics: Sequence[str] | TopicPattern,
        handler: Handler,
        max_in_flight: int,
        on_undecodable: UndecodableHandler | None = None,
    ) -> None:
        self._transport = transport
        self._group = group
        self._topics = topics
        self._regex = re.compile(topics.regex) if isinstance(topics, TopicPattern) else None
        self._handler = handler
        self.on_undecodable = on_undecodable
        self._dedup = DedupWindow(transport.dedup_window)
        self.max_in_flight = max(1, max_in_flight)
        self.in_flight = 0
        self.paused = False
        self._stopping = False
        self._tasks: set[asyncio.Task[None]] = set()
        #: Set by stop() while it waits for in-flight handlers (no Event set and
        #: cleared per record: this is on every delivery's path).
        self._drained: asyncio.Future[None] | None = None
        self.assigned: list[TP] = []
        #: False: the group's progress is dropped when its last member leaves.
        self.durable = True
        #: False: undecodable records go to ``on_undecodable`` only.
        self.dead_letter = True

    def wants(self, topic: str) -> bool:
        if self._regex is not None:
            return self._regex.match(topic) is not None
        assert not isinstance(self._topics, TopicPattern)
        return topic in self._topics

    # -- Subscription -------------------------------------------------------

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            self.pump()

    async def stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        while self.in_flight:
            self._drained = asyncio.get_running_loop().create_future()
            await self._drained
        self._drained = None
        self._transport._leave(self)

    # -- delivery -----------------------------------------------------------

    def pump(self) -> None:
        """Take records from the assigned partitions while there is capacity."""
        for tp in tuple(self.assigned):
            self.pump_partition(tp, self._transport._topics[tp[0]][tp[1]])

    def pump_partition(self, tp: TP, partition: Partition) -> None:
        """Take records from one assigned partition while there is capacity."""
        if self.paused or self._stopping:
            return
        progress = self._group.progress[tp]
        while self.in_flight < self.max_in_flight and progress.position < partition.next_offset:
            record = partition.read(progress.position)
            if record is None:
                break
            progress.position = record.offset + 1
            self.in_flight += 1
            entry = [record.offset, False]
            progress.outstanding.append(entry)
            if record.key is not None:
                waiting = progress.busy_keys.get(record.key)
                if waiting is not None:  # its key is busy: it starts after the one before
                    waiting.append((self, record, entry))
                    continue
                progress.busy_keys[record.key] = deque()
            self._start(tp, progress, record, entry)

    def _start(self, tp: TP, progress: Progress, record: Record, entry: list[Any]) -> None:
        transport = self._transport
        event = record.event
        if event is not None:  # stored as an event: nothing to decode
            delivery = Delivery(event, tp[0], tp[1], record.offset, record.key)
            attributes = event.get_attributes()
            run = self._handle(delivery, (attributes["source"], attributes["id"]), None)
        else:
            run = transport._deliver(self, tp, record)
        done = functools.partial(self._finished, tp, progress, record, entry)
        loop = asyncio.get_running_loop()
        if transport._eager_depth >= MAX_EAGER_DEPTH:
            task = loop.create_task(run)
            self._tasks.add(task)
            task.add_done_callback(functools.partial(self._task_finished, done))
            return
        # Fast path: the handler's first step runs now (it usually hands the
        # event to an actor and waits), not one loop iteration later in a task.
        transport._eager_depth += 1
        try:
            run_eagerly(run, done, loop)
        finally:
            transport._eager_depth -= 1

    def _task_finished(
        self, done: Callable[[BaseException | None], None], task: asyncio.Task[None]
    ) -> None:
        self._tasks.discard(task)
        done(None if task.cancelled() else task.exception())

    def _finished(
        self,
        tp: TP,
        progress: Progress,
        record: Record,
        entry: list[Any],
        error: BaseException | None,
    ) -> None:
        if error is not None:
            log.error(
                "group %s: delivery of %s/%d/%d failed",
                self._group.name,
                *tp,
                record.offset,
                exc_info=error,
            )
        # Done: commit, hand the key on, take more if it was full.
        progress.finish(entry)
        was_full = self.in_flight >= self.max_in_flight
        self.in_flight -= 1
        if record.key is not None:
            waiting = progress.busy_keys.get(record.key)
            if waiting:
                owner, following, following_entry = waiting.popleft()
                owner._start(tp, progress, following, following_entry)
            else:
                progress.busy_keys.pop(record.key, None)
        if self.in_flight == 0 and self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        if was_full:  # otherwise every record was taken when it was appended
            self.pump()

    async def _handle(self, delivery: Delivery, dedup_key: Any, value: bytes | None) -> None:
        original = self._dedup.claim(dedup_key)
        if original is not None:
            self._transport.duplicates += 1
            await asyncio.shield(original)
            return
        try:
            await self._handler(delivery)
        except Exception as exc:
            log.exception(
                "group %s: handler failed on %s", self._group.name, delivery.event.get_id()
            )
            await self._transport._dead_letter(
                delivery, value, f"handler-error: {type(exc).__name__}: {exc}"
            )
        finally:
            self._dedup.done(dedup_key)


class MemoryTransport(Transport):
    """In-process topics, partitions and consumer groups; see the module docstring."""

    def __init__(
        self,
        *,
        partitions: int = 4,
        retention: int = 100_000,
        compacted: Iterable[str] = (),
        dlq_topic: str = "a2a.dlq",
        dedup_window: int = 10_000,
        adaptor: Adaptor | None = None,
    ) -> None:
        self.partitions = partitions
        self.retention = retention
        self.compacted = set(compacted)
        self.dlq_topic = dlq_topic
        self.dedup_window = dedup_window
        self.adaptor = adaptor or Adaptor()
        #: Copies of an event skipped by de-duplication.
        self.duplicates = 0
        self._dead_lettered = 0
        self._topics: dict[str, list[Partition]] = {}
        self._groups: dict[str, Group] = {}
        self._group_seq = itertools.count()
        self._round_robin = itertools.count()
        self._eager_depth = 0
        #: The member of each group that reads a partition (from the assignments),
        #: in group creation order. Each list is replaced, never changed in place: a
        #: handler run while one is iterated may join or leave a group.
        self._readers: dict[TP, list[MemorySubscription]] = {}
        #: Members subscribed by pattern: the only ones a new topic can concern.
        self._by_pattern: list[MemorySubscription] = []
        self._started = False
        #: Records written, per topic (tests check "one write per publish").
        self.writes: dict[str, int] = {}

    @property
    def in_process(self) -> bool:
        return True

    @property
    def ready(self) -> bool:
        return self._started

    async def start(self) -> None:
        self._started = True

    async def stop(self) -> None:
        members = [m for g in self._groups.values() for m in g.members]
        await asyncio.gather(*(m.stop() for m in members))
        self._started = False

    # -- writing ------------------------------------------------------------

    async def publish(self, topic: str, event: CloudEvent, *, key: bytes | None = None) -> None:
        self._append(topic, Record(-1, key, event))

    async def publish_raw(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes]] = (),
    ) -> None:
        raw = None if value is None else bytes(value)
        self._append(topic, Record(-1, key, None, raw, tuple(headers)))
        if topic == self.dlq_topic:  # the bus's own dead letters come this way too
            self._dead_lettered += 1

    def _append(self, topic: str, record: Record) -> None:
        if not self._started:
            raise RuntimeError("transport not started")
        partitions = self._topic(topic)
        if record.key is None:
            index = next(self._round_robin) % len(partitions)
        else:
            index = zlib.crc32(record.key) % len(partitions)
        partition = partitions[index]
        partition.append(record)
        self.writes[topic] = self.writes.get(topic, 0) + 1
        tp = (topic, index)
        for member in self._readers.get(tp, ()):
            member.pump_partition(tp, partition)

    def _topic(self, topic: str) -> list[Partition]:
        partitions = self._topics.get(topic)
        if partitions is None:
            if not TOPIC_RE.match(topic):
                raise ValueError(f"invalid topic name {topic!r}: must match {TOPIC_RE.pattern}")
            compacted = topic in self.compacted
            partitions = [Partition(self.retention, compacted) for _ in range(self.partitions)]
            self._topics[topic] = partitions
            # Groups already subscribed to a matching pattern read it from the start.
            wanting = {m._group.seq: m._group for m in self._by_pattern if m.wants(topic)}
            for _, group in sorted(wanting.items()):
                for index in range(len(partitions)):
                    group.progress.setdefault((topic, index), Progress(0, 0))
                self._rebalance(group)
        return partitions

    def declare_compacted(self, topic: str) -> None:
        if topic in self._topics and topic not in self.compacted:
            raise RuntimeError(f"topic {topic!r} is in use: declare it compacted before")
        self.compacted.add(topic)

    def _partition(self, tp: TP) -> Partition:
        return self._topics[tp[0]][tp[1]]

    # -- reading ------------------------------------------------------------

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
    ) -> Subscription:
        if not self._started:
            raise RuntimeError("transport not started")
        checked_topics(topics)
        state = self._groups.get(group)
        if state is None:
            state = self._groups[group] = Group(group, next(self._group_seq))
        member = MemorySubscription(self, state, topics, handler, max_in_flight, on_undecodable)
        member.durable = durable
        member.dead_letter = dead_letter
        if isinstance(topics, TopicPattern):
            wanted = [topic for topic in self._topics if member.wants(topic)]
            self._by_pattern.append(member)
        else:
            wanted = list(dict.fromkeys(topics))
            for topic in wanted:
                self._topic(topic)
        for topic in wanted:
            for index, partition in enumerate(self._topics[topic]):
                start = partition.start_offset if from_beginning else partition.next_offset
                state.progress.setdefault((topic, index), Progress(start, start))
        state.members.append(member)
        self._rebalance(state)
        return member

    def _leave(self, member: MemorySubscription) -> None:
        group = member._group
        if member in self._by_pattern:
            self._by_pattern.remove(member)
        if member in group.members:
            group.members.remove(member)
            self._rebalance(group)
            if not group.members and not member.durable:
                self._groups.pop(group.name, None)  # its progress is not kept

    def _rebalance(self, group: Group) -> None:
        for member in group.members:
            member.assigned = []
        before, group.assignment = group.assignment, {}
        for index, tp in enumerate(sorted(group.progress)):
            candidates = [m for m in group.members if m.wants(tp[0])]
            if candidates:
                owner = candidates[index % len(candidates)]
                owner.assigned.append(tp)
                group.assignment[tp] = owner
        # Only this group's readers change: the cost of a join or a leave does not
        # grow with the number of groups.
        for tp, member in before.items():
            if group.assignment.get(tp) is not member:
                self._stop_reading(tp, member)
        for tp, member in group.assignment.items():
            if before.get(tp) is not member:
                self._start_reading(tp, member)
        for member in group.members:
            member.pump()

    def _start_reading(self, tp: TP, member: MemorySubscription) -> None:
        readers = [*self._readers.get(tp, ()), member]
        readers.sort(key=lambda reader: reader._group.seq)
        self._readers[tp] = readers

    def _stop_reading(self, tp: TP, member: MemorySubscription) -> None:
        readers = [reader for reader in self._readers.get(tp, ()) if reader is not member]
        if readers:
            self._readers[tp] = readers
        else:
            self._readers.pop(tp, None)

    async def _deliver(self, member: MemorySubscription, tp: TP, record: Record) -> None:
        topic, partition = tp
        event = record.event
        if event is not None:
            delivery = Delivery(event, topic, partition, record.offset, record.key)
            await member._handle(delivery, (event.get_source(), event.get_id()), None)
            return
        decoded = decode_record(
            self.adaptor, topic, partition, record.offset, record.value, record.headers, record.key
        )
        if decoded.failures:
            reason = failure_reason(decoded.failures)
            if topic == self.dlq_topic:
                log.error(
                    "dropped an undecodable dead letter %s/%d/%d: %s", *tp, record.offset, reason
                )
            else:
                if member.dead_letter:
                    await self._write_dead_letter(
                        topic, partition, record, reason, decoded.failures
                    )
                if member.on_undecodable is not None:
                    await report_undecodable(
                        member.on_undecodable,
                        topic,
                        partition,
                        record.offset,
                        record.key,
                        record.headers,
                        decoded.failures,
                        record.value,
                    )
        for item in decoded.events:
            delivery = Delivery(
                item.event,
                topic,
                partition,
                record.offset,
                record.key,
                raw=item.raw,
                headers=record.headers,
            )
            await member._handle(delivery, item.dedup_key, record.value)

    async def _dead_letter(self, delivery: Delivery, value: bytes | None, reason: str) -> None:
        record = Record(delivery.offset, delivery.key, delivery.event, value, delivery.headers)
        if delivery.topic == self.dlq_topic:
            log.error("dropped a failed dead letter %s: %s", delivery.event.get_id(), reason)
            return
        await self._write_dead_letter(delivery.topic, delivery.partition, record, reason, ())

    async def _write_dead_letter(
        self, topic: str, partition: int, record: Record, reason: str, failures: Sequence[Any]
    ) -> None:
        headers = dead_letter_headers(
            record.headers, reason, topic, partition, record.offset, failures
        )
        if record.value is None and record.event is not None:
            # Stored as an event: dead-letter it as a structured CloudEvent.
            encoded = to_kafka(record.event, "structured")
            await self.publish_raw(
                self.dlq_topic, encoded.value, key=record.key, headers=[*encoded.headers, *headers]
            )
        else:
            await self.publish_raw(
                self.dlq_topic, record.value or b"", key=record.key, headers=headers
            )
        log.warning("dead letter %s/%d/%d: %s", topic, partition, record.offset, reason)

    # -- reading retained records (no group) -----------------------------------

    async def read(
        self, topic: str, *, limit: int, position: Position | None = None, newest: bool = False
    ) -> ReadBatch:
        check_request(limit, position, newest)
        if not self._started:
            raise RuntimeError("transport not started")
        partitions = self._topics.get(topic, [])
        return read_partitions(self.adaptor, topic, partitions, limit, position, newest)

    # -- introspection (tests, metrics) ---------------------------------------

    @property
    def dead_lettered(self) -> int:
        """Records written to the dead-letter topic through this transport (its own
        and the bus's)."""
        return self._dead_lettered

    def lag(self) -> dict[str, int]:
        """Records not handled yet per consumer group (end offset minus committed)."""
        lags: dict[str, int] = {}
        for name, group in self._groups.items():
            if group.members:
                lags[name] = sum(
                    max(0, self._partition(tp).next_offset - progress.committed)
                    for tp, progress in group.progress.items()
                )
        return lags

    def committed(self, group: str, topic: str) -> int:
        """Records of ``topic`` whose handling finished in ``group`` (summed over partitions)."""
        state = self._groups.get(group)
        if state is None:
            return 0
        return sum(p.committed for (t, _), p in state.progress.items() if t == topic)

    def end_offsets(self, topic: str) -> int:
        with contextlib.suppress(KeyError):
            return sum(p.next_offset for p in self._topics[topic])
        return 0
