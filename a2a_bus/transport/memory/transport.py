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
import itertools
import logging
import re
import zlib
from collections import deque
from collections.abc import Awaitable, Coroutine, Iterable, Sequence
from types import CoroutineType
from typing import Any

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol import Adaptor
from a2a_bus.transport.base import (
    Consumed,
    DeadLetter,
    Delivery,
    Handler,
    ReadBatch,
    Subscription,
    TopicPattern,
    Transport,
    UndecodableHandler,
    checked_topics,
    new_delivery,
    report_undecodable,
)
from a2a_bus.transport.dead_letters import dead_letter_headers, delivered_letter, read_from
from a2a_bus.transport.dedup import DedupWindow
from a2a_bus.transport.eager import EagerRun
from a2a_bus.transport.memory.log import (
    TP,
    Partition,
    Progress,
    Reader,
    Record,
    read_partitions,
)
from a2a_bus.transport.positions import Position
from a2a_bus.transport.reading import check_request
from a2a_bus.transport.records import decode_record, failure_reason

log = logging.getLogger(__name__)

TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]+$")
#: Handlers started eagerly inside one another (a handler that publishes) at
#: most this deep; deeper ones start from the loop, so the stack stays short.
MAX_EAGER_DEPTH = 4


class _Handling(EagerRun):
    """One record in a member's hands: its handler runs eagerly (the first step at
    once, the rest from the callbacks of what it awaits), then the record is
    committed. It is also the record's place in its partition's commit order."""

    __slots__ = ("dedup_key", "delivery", "done", "member", "offset", "progress", "record")

    def __init__(self, member: MemorySubscription, progress: Progress, record: Record) -> None:
        self.member = member
        self.progress = progress
        self.record = record
        self.offset = record.offset
        self.done = False
        #: Set when the event was handed to the handler here (not decoded, not a
        #: duplicate): its de-duplication entry is released at the end.
        self.dedup_key: Any = None
        self.delivery: Delivery | None = None

    def start(self) -> None:
        self.member._start(self)

    def finished(self, error: BaseException | None) -> None:
        self.member._finished(self, error)


async def _awaiting(awaitable: Awaitable[None]) -> None:
    """A handler's awaitable that is no coroutine, as one (to be run eagerly)."""
    await awaitable


async def _raising(exc: Exception) -> None:
    raise exc


async def _after(original: asyncio.Future[None]) -> None:
    """A duplicate's handling: wait for the original's, so that the duplicate is
    not committed over it while it runs."""
    await asyncio.shield(original)


class Group:
    """A consumer group: its members, what each reads, and its progress."""

    def __init__(self, name: str, seq: int = 0) -> None:
        self.name = name
        #: Creation order among the transport's groups: a record reaches groups in it.
        self.seq = seq
        self.members: list[MemorySubscription] = []
        self.progress: dict[TP, Progress] = {}
        self.assignment: dict[TP, MemorySubscription] = {}


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
        self._loop = asyncio.get_running_loop()
        #: Set by stop() while it waits for in-flight handlers (no Event set and
        #: cleared per record: this is on every delivery's path).
        self._drained: asyncio.Future[None] | None = None
        self.assigned: list[TP] = []
        #: False: the group's progress is dropped when its last member leaves.
        self.durable = True
        #: False: undecodable records go to ``on_undecodable`` only.
        self.dead_letter = True

    @property
    def group(self) -> Group:
        return self._group

    @property
    def group_seq(self) -> int:
        return self._group.seq

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
        partition = self._transport._partition
        for tp in tuple(self.assigned):
            self.pump_partition(partition(tp))

    def pump_partition(self, partition: Partition) -> None:
        """Take records from one assigned partition while there is capacity."""
        if self.paused or self._stopping:
            return
        progress = self._group.progress[partition.tp]
        limit = self.max_in_flight
        # Attributes are read afresh each turn: a handler started here may publish
        # to this partition, and take records, before it returns.
        while self.in_flight < limit and progress.position < partition.next_offset:
            record = partition.read(progress.position)
            if record is None:
                break
            progress.position = record.offset + 1
            self.in_flight += 1
            handling = _Handling(self, progress, record)
            progress.outstanding.append(handling)
            key = record.key
            if key is not None:
                waiting = progress.busy_keys.get(key)
                if waiting is not None:  # its key is busy: it starts after the one before
                    waiting.append(handling)
                    continue
                progress.busy_keys[key] = deque()
            self._start(handling)

    def _start(self, handling: _Handling) -> None:
        transport = self._transport
        record = handling.record
        event = record.event
        run: Coroutine[Any, Any, None]
        if event is None:
            run = transport._deliver(self, handling.progress.tp, record)
        else:  # stored as an event: nothing to decode
            attributes = event.get_attributes()
            dedup_key = (attributes["source"], attributes["id"])
            original = self._dedup.claim(dedup_key)
            if original is None:
                topic, partition = handling.progress.tp
                fields = (event, topic, partition, record.offset, record.key, False, False, ())
                delivery = new_delivery(Delivery, fields)
                handling.dedup_key, handling.delivery = dedup_key, delivery
                try:
                    awaitable = self._handler(delivery)
                except Exception as exc:  # raised before it returned: a failed handling too
                    awaitable = _raising(exc)
                run = awaitable if type(awaitable) is CoroutineType else _awaiting(awaitable)
            else:
                transport.duplicates += 1
                run = _after(original)
        loop = self._loop
        EagerRun.__init__(handling, run, loop)
        if transport._eager_depth >= MAX_EAGER_DEPTH:
            loop.call_soon(handling.step)
            return
        # Fast path: the handler's first step runs now (it usually hands the
        # event to an actor and waits), not one loop iteration later.
        transport._eager_depth += 1
        try:
            handling.step()
        finally:
            transport._eager_depth -= 1

    def _finished(self, handling: _Handling, error: BaseException | None) -> None:
        dedup_key = handling.dedup_key
        if dedup_key is not None:  # its handler ran here: what _handle does for decoded ones
            if error is not None and isinstance(error, Exception):
                assert handling.delivery is not None
                self._failed(handling.delivery, None, error)
                error = None
            self._dedup.done(dedup_key)
        progress = handling.progress
        if error is not None:
            log.error(
                "group %s: delivery of %s/%d/%d failed",
                self._group.name,
                *progress.tp,
                handling.offset,
                exc_info=error,
            )
        # Done: commit, hand the key on, take more if it was full.
        progress.finish(handling)
        in_flight = self.in_flight
        self.in_flight = in_flight - 1
        key = handling.record.key
        if key is not None:
            waiting = progress.busy_keys.get(key)
            if waiting:
                waiting.popleft().start()
            else:
                progress.busy_keys.pop(key, None)
        if in_flight == 1 and self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        if in_flight >= self.max_in_flight:  # otherwise every record was taken when appended
            self.pump()

    def _failed(self, delivery: Delivery, value: bytes | None, exc: Exception) -> None:
        """The handler raised: log it and dead-letter the record."""
        log.error(
            "group %s: handler failed on %s",
            self._group.name,
            delivery.event.get_id(),
            exc_info=exc,
        )
        reason = f"handler-error: {type(exc).__name__}: {exc}"
        if value is None:  # stored as an event: set aside as a structured CloudEvent
            letter = delivered_letter(delivery, reason)
        else:
            letter = DeadLetter(
                delivery.topic,
                delivery.partition,
                delivery.offset,
                value,
                delivery.key,
                delivery.headers,
                reason,
            )
        self._transport.write_dead_letter(letter)

    async def _handle(self, delivery: Delivery, dedup_key: Any, value: bytes | None) -> None:
        """Handle one event decoded from a record (several may come from one); as
        :meth:`_start` and :meth:`_finished` do for an event stored as one."""
        original = self._dedup.claim(dedup_key)
        if original is not None:
            self._transport.duplicates += 1
            await asyncio.shield(original)
            return
        try:
            await self._handler(delivery)
        except Exception as exc:
            self._failed(delivery, value, exc)
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
        self._round_robin = itertools.count()
        self._group_seq = itertools.count()
        #: Members subscribed by pattern: the only ones a new topic can concern.
        self._by_pattern: list[MemorySubscription] = []
        self._eager_depth = 0
        self._started = False

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

    async def publish(
        self,
        topic: str,
        event: CloudEvent,
        *,
        key: bytes | None = None,
        answering: Consumed | None = None,
    ) -> None:
        self._append(topic, Record(-1, key, event))

    async def publish_raw(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes]] = (),
        answering: Consumed | None = None,
    ) -> None:
        self._append_raw(topic, value, key, headers)

    def _append_raw(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        headers: Sequence[tuple[str, bytes]],
    ) -> None:
        raw = None if value is None else bytes(value)
        self._append(topic, Record(-1, key, None, raw, tuple(headers)))
        if topic == self.dlq_topic:  # the bus's own dead letters come this way too
            self._dead_lettered += 1

    def _append(self, topic: str, record: Record) -> None:
        if not self._started:
            raise RuntimeError("transport not started")
        partitions = self._topics.get(topic) or self._topic(topic)
        if record.key is None:
            index = next(self._round_robin) % len(partitions)
        else:
            index = zlib.crc32(record.key) % len(partitions)
        partition = partitions[index]
        partition.append(record)
        for member in partition.readers:
            member.pump_partition(partition)

    def _topic(self, topic: str) -> list[Partition]:
        partitions = self._topics.get(topic)
        if partitions is None:
            if not TOPIC_RE.match(topic):
                raise ValueError(f"invalid topic name {topic!r}: must match {TOPIC_RE.pattern}")
            compacted = topic in self.compacted
            partitions = [
                Partition((topic, index), self.retention, compacted)
                for index in range(self.partitions)
            ]
            self._topics[topic] = partitions
            # Groups already subscribed to a matching pattern read it from the start
            # (only pattern members can want a topic they did not name).
            wanting = {m.group.seq: m.group for m in self._by_pattern if m.wants(topic)}
            for _, group in sorted(wanting.items()):
                for partition in partitions:
                    tp = partition.tp
                    group.progress.setdefault(tp, Progress(tp, 0, 0))
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
            for partition in self._topics[topic]:
                start = partition.start_offset if from_beginning else partition.next_offset
                tp = partition.tp
                state.progress.setdefault(tp, Progress(tp, start, start))
        state.members.append(member)
        self._rebalance(state)
        return member

    def _leave(self, member: MemorySubscription) -> None:
        group = member.group
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
        # Each partition lists its readers (one member per group, in group creation
        # order): an append pumps them. Only this group's readers change, so a join or
        # a leave costs the same however many groups there are. Each list is replaced,
        # never changed in place: a handler run while one is iterated may join or leave.
        for tp, member in before.items():
            if group.assignment.get(tp) is not member:
                partition = self._topics[tp[0]][tp[1]]
                partition.readers = [r for r in partition.readers if r is not member]
        for tp, member in group.assignment.items():
            if before.get(tp) is not member:
                partition = self._topics[tp[0]][tp[1]]
                readers = [*partition.readers, member]
                readers.sort(key=_creation_order)
                partition.readers = readers
        for member in group.members:
            member.pump()

    async def _deliver(self, member: MemorySubscription, tp: TP, record: Record) -> None:
        """Decode a raw record and hand its events to ``member`` (dead-letter it if
        it holds none)."""
        topic, partition = tp
        decoded = decode_record(
            self.adaptor, topic, partition, record.offset, record.value, record.headers, record.key
        )
        if decoded.failures:
            if member.dead_letter:
                self.write_dead_letter(
                    DeadLetter(
                        topic,
                        partition,
                        record.offset,
                        record.value,
                        record.key,
                        record.headers,
                        failure_reason(decoded.failures),
                        decoded.failures,
                    )
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

    async def dead_letter(self, letter: DeadLetter) -> None:
        self.write_dead_letter(letter)

    def write_dead_letter(self, letter: DeadLetter) -> None:
        """:meth:`dead_letter`, from code that cannot await (appending never waits)."""
        if read_from(letter, self.dlq_topic):
            return
        headers = dead_letter_headers(letter)
        self._append_raw(self.dlq_topic, letter.value or b"", letter.key, headers)
        log.warning(
            "dead letter %s/%d/%d: %s", letter.topic, letter.partition, letter.offset, letter.reason
        )

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
    def writes(self) -> dict[str, int]:
        """Records written so far, per topic written to (tests check "one write per
        publish"): offsets are dense, so a partition's next offset counts them."""
        counts = {t: sum(p.next_offset for p in ps) for t, ps in self._topics.items()}
        return {topic: count for topic, count in counts.items() if count}

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


def _creation_order(reader: Reader) -> int:
    return reader.group_seq
