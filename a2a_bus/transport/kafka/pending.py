"""One record batch of :class:`~a2a_bus.transport.kafka.batches.Batches` not
acknowledged yet: its builder, the publishers waiting for it, and its records,
kept to build it again should it fail without being written (as it was, or one
batch per record when the broker refused it for its size).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import MessageSizeTooLargeError, OutOfOrderSequenceNumber

from a2a_bus.transport.kafka.producing import publisher_error

log = logging.getLogger(__name__)

#: A record as a batch takes it: key, value, headers.
Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]
#: Between the ordinals of two batches made one after the other: room for the
#: ordinals of the batches one is split into (one per record; a batch holds far fewer).
ORDINAL_STEP = 1 << 32


class Pending:
    """One batch not handed to the producer yet, and who waits for its delivery
    (with the size of each one's value, for the broker's size refusal), and its
    records, to build it again if it fails without being written."""

    __slots__ = (
        "builder",
        "deadline",
        "error",
        "later",
        "ordinal",
        "producer",
        "records",
        "sizes",
        "tp",
        "waiters",
    )

    def __init__(self, builder: Any, tp: TopicPartition, deadline: float, ordinal: int) -> None:
        self.builder = builder
        self.tp = tp
        #: Loop time after which its publishers get NotDelivered.
        self.deadline = deadline
        #: Its place among the batches made: a partition's are written in this order.
        self.ordinal = ordinal
        self.waiters: list[asyncio.Future[None]] = []
        self.sizes: list[int] = []
        #: Per waiter: whether its acknowledgement may wait (``ack_later``).
        self.later: list[bool] = []
        self.records: list[Record] = []
        #: The producer it was handed to (None while it waits in its partition's queue).
        self.producer: AIOKafkaProducer | None = None
        #: Why the last hand-over failed (for NotDelivered's message).
        self.error: BaseException | None = None

    def rebuild(self, builder: Any) -> bool:
        """Put its records in ``builder``, to go again (a built batch cannot be
        sent twice); False if they do not fit (not expected: they fitted one before)."""
        for key, value, headers in self.records:
            if builder.append(timestamp=None, key=key, value=value, headers=headers) is None:
                return False
        self.builder = builder
        return True

    def split(self, new_builder: Callable[[], Any]) -> list[Pending]:
        """One batch per record, in order, each in this one's place (the ordinals
        after its own, up to the next batch's: see :data:`ORDINAL_STEP`), with its
        deadline and last error."""
        singles = []
        for n, (key, value, headers) in enumerate(self.records):
            single = Pending(new_builder(), self.tp, self.deadline, self.ordinal + n)
            # An empty batch takes any record below the request size.
            single.builder.append(timestamp=None, key=key, value=value, headers=headers)
            single.records.append((key, value, headers))
            single.waiters.append(self.waiters[n])
            single.sizes.append(self.sizes[n])
            single.later.append(self.later[n])
            single.error = self.error
            singles.append(single)
        return singles

    def settle(self, error: BaseException | None) -> None:
        """Tell every publisher still waiting: acknowledged, or what it gets for ``error``."""
        for waiter, size in zip(self.waiters, self.sizes, strict=True):
            if waiter.done():
                continue  # its publisher was cancelled
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(publisher_error(error, size))


def put_back(queue: deque[Pending], batches: list[Pending]) -> None:
    """Put ``batches`` (in ``ordinal`` order, with none of ``queue`` between two of
    them) back in their partition's ``queue``, in their place: before every batch
    made after them."""
    ordinal = batches[0].ordinal
    at = 0
    for queued in queue:  # those put back earlier are near the front
        if queued.ordinal > ordinal:
            break
        at += 1
    for n, pending in enumerate(batches):
        pending.producer = None
        queue.insert(at + n, pending)


def refused_again(
    pending: Pending, error: BaseException, new_builder: Callable[[], Any]
) -> list[Pending]:
    """What goes again of ``pending``, refused by the broker with ``error`` and so
    never written: its records one batch each if it was refused for its size (which
    applies to the whole batch) and they were several; the batch itself if it was
    out of sequence (it followed a refused batch of its producer); else nothing."""
    if isinstance(error, MessageSizeTooLargeError) and len(pending.records) > 1:
        pending.error = error
        log.info(
            "the broker refused a batch of %d records for %s as too large: they go "
            "again one per batch",
            len(pending.records),
            pending.tp,
        )
        return pending.split(new_builder)
    if isinstance(error, OutOfOrderSequenceNumber) and pending.rebuild(new_builder()):
        pending.error = error
        log.info("a batch for %s was out of sequence, not written: it goes again", pending.tp)
        return [pending]
    return []
