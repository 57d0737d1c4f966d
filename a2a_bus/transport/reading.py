"""Turning retained records of a topic's partitions into one :class:`ReadBatch`.

Both transports collect records per partition (decoded with the same helper
the subscriptions use) and hand them here to be merged: partitions are
interleaved by record time with :func:`heapq.merge`, which keeps each
partition's own order even where its times go backwards.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol import Adaptor
from a2a_bus.transport.base import ReadBatch
from a2a_bus.transport.positions import Position, check_limit
from a2a_bus.transport.records import decode_record


class Retained(NamedTuple):
    """One retained record, decoded."""

    #: Orders partitions against each other: record time (Kafka) or append order (memory).
    stamp: int
    partition: int
    offset: int
    events: list[CloudEvent]
    #: True when (part of) the record could not be decoded.
    failed: bool = False


def check_request(limit: int, position: Position | None, newest: bool) -> None:
    """The checks every transport's ``read`` starts with."""
    check_limit(limit)
    if newest and position is not None:
        raise ValueError("newest reads the last events: it takes no cursor")


def decoded(
    adaptor: Adaptor,
    topic: str,
    partition: int,
    offset: int,
    stamp: int,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes]],
    key: bytes | None,
) -> Retained:
    """A stored record decoded as a subscription would decode it (never raises)."""
    record = decode_record(adaptor, topic, partition, offset, value, headers, key)
    events = [item.event for item in record.events]
    return Retained(stamp, partition, offset, events, bool(record.failures))


def take(records: Iterable[Retained], limit: int) -> Iterator[Retained]:
    """``records`` up to and including the one that brings the events to ``limit``:
    all a partition can contribute to an oldest-first batch."""
    count = 0
    for record in records:
        yield record
        count += len(record.events)
        if count >= limit:
            return


def oldest_first(
    partitions: Iterable[Sequence[Retained]], start: Position, limit: int
) -> ReadBatch:
    """The first ``limit`` events after ``start``; the position covers exactly the
    records consumed (undecodable ones among them are counted)."""
    position = dict(start)
    events: list[CloudEvent] = []
    undecodable = 0
    for record in heapq.merge(*partitions, key=_stamp):
        if events and len(events) + len(record.events) > limit:
            break  # a record is never split
        events.extend(record.events)
        undecodable += record.failed
        position[record.partition] = record.offset + 1
        if len(events) >= limit:
            break
    return ReadBatch(events, position, undecodable)


def newest_last(partitions: Iterable[Sequence[Retained]], ends: Position, limit: int) -> ReadBatch:
    """The events of the last ``limit`` records; the position is the ``ends`` read to."""
    tail = list(heapq.merge(*partitions, key=_stamp))[-limit:]
    events = [event for record in tail for event in record.events][-limit:]
    return ReadBatch(events, dict(ends), sum(record.failed for record in tail))


def _stamp(record: Retained) -> int:
    return record.stamp
