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
import itertools
import logging
import re
import zlib
from collections.abc import Iterable, Sequence

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol import Adaptor
from a2a_bus.transport.base import (
    Consumed,
    DeadLetter,
    Handler,
    ReadBatch,
    Subscription,
    TopicPattern,
    Transport,
    UndecodableHandler,
    checked_topics,
)
from a2a_bus.transport.dead_letters import DeadLetterLog, dead_letter_headers, read_from
from a2a_bus.transport.memory.log import (
    TP,
    Partition,
    Progress,
    Reader,
    Record,
    read_partitions,
)
from a2a_bus.transport.memory.subscription import Group, MemorySubscription
from a2a_bus.transport.positions import Position
from a2a_bus.transport.reading import check_request

log = logging.getLogger(__name__)

TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]+$")


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
        for name, value in (("partitions", partitions), ("retention", retention)):
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be a whole number, at least 1, not {value!r}")
        self.partitions = partitions
        self.retention = retention
        self.compacted = set(compacted)
        self.dlq_topic = dlq_topic
        self.dedup_window = dedup_window
        self.adaptor = adaptor or Adaptor()
        #: Copies of an event skipped by de-duplication.
        self.duplicates = 0
        self._dead_lettered = 0
        #: Its line per dead letter, a flood of them summed up (see DeadLetterLog).
        self.dead_letter_log = DeadLetterLog(log)
        self._topics: dict[str, list[Partition]] = {}
        self._groups: dict[str, Group] = {}
        self._round_robin = itertools.count()
        self._group_seq = itertools.count()
        #: Members subscribed by pattern: the only ones a new topic can concern.
        self._by_pattern: list[MemorySubscription] = []
        #: How deep handlers now run started inside one another (see the subscription).
        self.eager_depth = 0
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
        self.dead_letter_log.close()

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

    def declare_private(self, topic: str) -> None:
        pass  # a partition here is a list: more of them cost nothing

    def declare_compacted(self, topic: str) -> None:
        if topic in self._topics and topic not in self.compacted:
            raise RuntimeError(f"topic {topic!r} is in use: declare it compacted before")
        self.compacted.add(topic)

    def partition(self, tp: TP) -> Partition:
        """The partition ``tp`` (of a topic that exists)."""
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
        dedup: bool = True,
    ) -> Subscription:
        if not self._started:
            raise RuntimeError("transport not started")
        checked_topics(topics)
        state = self._groups.get(group)
        if state is None:
            state = self._groups[group] = Group(group, next(self._group_seq))
        member = MemorySubscription(
            self, state, topics, handler, max_in_flight, on_undecodable, dedup=dedup
        )
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

    def leave(self, member: MemorySubscription) -> None:
        """``member`` stopped: its group's partitions go to the members left."""
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

    async def dead_letter(self, letter: DeadLetter) -> None:
        self.write_dead_letter(letter)

    def write_dead_letter(self, letter: DeadLetter) -> None:
        """:meth:`dead_letter`, from code that cannot await (appending never waits)."""
        if read_from(letter, self.dlq_topic):
            return
        headers = dead_letter_headers(letter)
        self._append_raw(self.dlq_topic, letter.value or b"", letter.key, headers)
        self.dead_letter_log.written(letter)

    # -- reading retained records (no group) -----------------------------------

    async def read(
        self, topic: str, *, limit: int, position: Position | None = None, newest: bool = False
    ) -> ReadBatch:
        check_request(limit, position, newest)
        if not self._started:
            raise RuntimeError("transport not started")
        partitions = self._topics.get(topic, [])
        return read_partitions(self.adaptor, topic, partitions, limit, position, newest)

    async def end_offsets(self, topic: str) -> dict[int, int]:
        if not self._started:
            raise RuntimeError("transport not started")
        return {n: p.next_offset for n, p in enumerate(self._topics.get(topic, []))}

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

    @property
    def duplicates_skipped(self) -> int:
        return self.duplicates

    def lag(self) -> dict[str, int]:
        """Records not handled yet per consumer group (end offset minus committed)."""
        lags: dict[str, int] = {}
        for name, group in self._groups.items():
            if group.members:
                lags[name] = sum(
                    max(0, self.partition(tp).next_offset - progress.committed)
                    for tp, progress in group.progress.items()
                )
        return lags

    def committed(self, group: str, topic: str) -> int:
        """Records of ``topic`` whose handling finished in ``group`` (summed over partitions)."""
        state = self._groups.get(group)
        if state is None:
            return 0
        return sum(p.committed for (t, _), p in state.progress.items() if t == topic)


def _creation_order(reader: Reader) -> int:
    return reader.group_seq
