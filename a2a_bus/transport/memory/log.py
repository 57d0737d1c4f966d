"""The in-memory transport's storage: partitions with a bounded history, a
group's progress on a partition, and reads of what is retained."""

from __future__ import annotations

import bisect
import itertools
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol import Adaptor
from a2a_bus.transport.base import ReadBatch
from a2a_bus.transport.positions import Position, check_partitions
from a2a_bus.transport.reading import Retained, decoded, newest_last, oldest_first, take

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

    __slots__ = (
        "compacted",
        "latest",
        "log",
        "next_offset",
        "readers",
        "retention",
        "tp",
        "trim_at",
    )

    def __init__(self, tp: TP, retention: int, compacted: bool) -> None:
        #: (topic, index): where it is.
        self.tp = tp
        #: The group members reading it, one per group (set by the transport).
        self.readers: list[Reader] = []
        self.log: list[Record] = []
        self.next_offset = 0
        self.retention = retention
        # Trim in chunks so appends stay amortised O(1).
        self.trim_at = int(retention * 1.25) + 16
        self.compacted = compacted
        self.latest: dict[bytes | None, int] = {}

    def append(self, record: Record) -> None:
        record.offset = offset = self.next_offset
        record.stamp = next(_APPENDS)
        self.next_offset = offset + 1
        log_ = self.log
        log_.append(record)
        if self.compacted and record.key is not None:
            self.latest[record.key] = offset
            if len(log_) > 2 * len(self.latest) + 64:
                log_ = self.log = [r for r in log_ if self.latest.get(r.key) == r.offset]
        if len(log_) > self.trim_at:
            del log_[: len(log_) - self.retention]

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


class Reader(Protocol):
    """A group member reading a partition."""

    @property
    def group_seq(self) -> int:
        """Its group's creation order: a record reaches groups in this order."""

    def pump_partition(self, partition: Partition) -> None:
        """Take the partition's records while there is capacity."""


class Handed(Protocol):
    """A record handed out to a group member, until it is done."""

    #: Its offset, and whether its handling finished (commit is up to contiguous done ones).
    offset: int
    done: bool

    def start(self) -> None:
        """Start handling it (when the records of its key before it are done)."""


@dataclass(slots=True)
class Progress:
    """A group's progress on one partition."""

    #: The partition: (topic, index).
    tp: TP
    position: int
    committed: int
    #: Records handed out, in offset order.
    outstanding: deque[Handed] = field(default_factory=deque)
    #: The keys being handled, each with the records of that key waiting behind it.
    busy_keys: dict[bytes, deque[Handed]] = field(default_factory=dict)

    def finish(self, handed: Handed) -> None:
        handed.done = True
        outstanding = self.outstanding
        while outstanding and outstanding[0].done:
            self.committed = outstanding.popleft().offset + 1


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
