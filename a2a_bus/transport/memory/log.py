"""The in-memory transport's storage: partitions with a bounded history,
consumer groups with their progress per partition, and reads of what is retained."""

from __future__ import annotations

import bisect
import itertools
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol import Adaptor
from a2a_bus.transport.base import ReadBatch
from a2a_bus.transport.positions import Position, check_partitions
from a2a_bus.transport.reading import Retained, decoded, newest_last, oldest_first, take

if TYPE_CHECKING:
    from a2a_bus.transport.memory.transport import MemorySubscription

TP = tuple[str, int]

#: Append order over every partition: a read merges partitions by it.
_APPENDS = itertools.count()


@dataclass(slots=True)
class Record:
    """One stored record: an event, or raw bytes that are decoded on delivery."""

    offset: int
    key: bytes | None
    event: CloudEvent | None
    value: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()
    #: When it was appended, in append order across all partitions.
    stamp: int = 0


class Partition:
    """A partition's log: offsets, retention, and compaction by key."""

    __slots__ = ("compacted", "latest", "log", "next_offset", "retention", "trim_at")

    def __init__(self, retention: int, compacted: bool) -> None:
        self.log: list[Record] = []
        self.next_offset = 0
        self.retention = retention
        # Trim in chunks so appends stay amortised O(1).
        self.trim_at = int(retention * 1.25) + 16
        self.compacted = compacted
        self.latest: dict[bytes | None, int] = {}

    def append(self, record: Record) -> None:
        record.offset = self.next_offset
        record.stamp = next(_APPENDS)
        self.next_offset += 1
        self.log.append(record)
        if self.compacted and record.key is not None:
            self.latest[record.key] = record.offset
            if len(self.log) > 2 * len(self.latest) + 64:
                self.log = [r for r in self.log if self.latest.get(r.key) == r.offset]
        if len(self.log) > self.trim_at:
            del self.log[: len(self.log) - self.retention]

    @property
    def start_offset(self) -> int:
        return self.log[0].offset if self.log else self.next_offset

    def read(self, offset: int) -> Record | None:
        """The first live record at or after ``offset``."""
        log_ = self.log
        if offset >= self.next_offset or not log_:
            return None
        index = offset - log_[0].offset
        if index >= 0 and not self.compacted:  # offsets are dense: the index is exact
            return log_[index]
        if not (0 <= index < len(log_) and log_[index].offset == offset):
            index = bisect.bisect_left(log_, offset, key=lambda r: r.offset)
        while index < len(log_):
            record = log_[index]
            if (
                not self.compacted
                or record.key is None
                or self.latest.get(record.key) == record.offset
            ):
                return record
            index += 1
        return None

    def live(self, record: Record) -> bool:
        """False for a record of a compacted topic that a later one of its key replaced."""
        return (
            not self.compacted or record.key is None or self.latest.get(record.key) == record.offset
        )

    def records_from(self, offset: int) -> Iterator[Record]:
        """The live records at or after ``offset``, in order (consume before appending)."""
        log_ = self.log
        first = bisect.bisect_left(log_, offset, key=lambda r: r.offset)
        for index in range(first, len(log_)):
            if self.live(record := log_[index]):
                yield record

    def last(self, count: int) -> list[Record]:
        """The last ``count`` live records, in order."""
        found: list[Record] = []
        for record in reversed(self.log):
            if len(found) == count:
                break
            if self.live(record):
                found.append(record)
        found.reverse()
        return found


@dataclass(slots=True)
class Progress:
    """A group's progress on one partition."""

    position: int
    committed: int
    #: Offsets handed out, in order, with a done flag (commit = contiguous done).
    outstanding: deque[list[Any]] = field(default_factory=deque)
    busy_keys: dict[bytes, deque[tuple[MemorySubscription, Record, list[Any]]]] = field(
        default_factory=dict
    )

    def finish(self, entry: list[Any]) -> None:
        entry[1] = True
        while self.outstanding and self.outstanding[0][1]:
            self.committed = self.outstanding.popleft()[0] + 1


class Group:
    """A consumer group: its members, what each reads, and its progress."""

    def __init__(self, name: str, seq: int = 0) -> None:
        self.name = name
        #: Creation order among the transport's groups: a record reaches groups in it.
        self.seq = seq
        self.members: list[MemorySubscription] = []
        self.progress: dict[TP, Progress] = {}
        self.assignment: dict[TP, MemorySubscription] = {}


def read_partitions(
    adaptor: Adaptor,
    topic: str,
    partitions: list[Partition],
    limit: int,
    position: Position | None,
    newest: bool,
) -> ReadBatch:
    """A :meth:`Transport.read` batch of a topic's partitions (retention and
    compaction apply: trimmed and replaced records are gone)."""
    if position is not None:
        check_partitions(position, len(partitions), topic)

    def retained(index: int, record: Record) -> Retained:
        if record.event is not None:  # stored as an event: nothing to decode
            return Retained(record.stamp, index, record.offset, [record.event])
        return decoded(
            adaptor,
            topic,
            index,
            record.offset,
            record.stamp,
            record.value,
            record.headers,
            record.key,
        )

    if newest:
        tails = [[retained(i, r) for r in p.last(limit)] for i, p in enumerate(partitions)]
        return newest_last(tails, {i: p.next_offset for i, p in enumerate(partitions)}, limit)
    given = position or {}
    start = {i: max(given.get(i, 0), p.start_offset) for i, p in enumerate(partitions)}
    heads = [
        list(take((retained(i, r) for r in p.records_from(start[i])), limit))
        for i, p in enumerate(partitions)
    ]
    return oldest_first(heads, start, limit)
