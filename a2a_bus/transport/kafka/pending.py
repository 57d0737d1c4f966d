"""One record batch of :class:`~a2a_bus.transport.kafka.batches.Batches` not
acknowledged yet: its builder, the publishers waiting for it, and its records,
kept to build it again should it fail without being written.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaProducer, TopicPartition

from a2a_bus.transport.kafka.producing import publisher_error


class Pending:
    """One batch not handed to the producer yet, and who waits for its delivery
    (with the size of each one's value, for the broker's size refusal), and its
    records, to build it again if it fails without being written."""

    __slots__ = (
        "builder",
        "deadline",
        "error",
        "later",
        "producer",
        "records",
        "sizes",
        "tp",
        "waiters",
    )

    def __init__(self, builder: Any, tp: TopicPartition, deadline: float) -> None:
        self.builder = builder
        self.tp = tp
        #: Loop time after which its publishers get NotDelivered.
        self.deadline = deadline
        self.waiters: list[asyncio.Future[None]] = []
        self.sizes: list[int] = []
        #: Per waiter: whether its acknowledgement may wait (``ack_later``).
        self.later: list[bool] = []
        self.records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = []
        #: The producer it was handed to.
        self.producer: AIOKafkaProducer | None = None
        #: Why the last hand-over failed (for NotDelivered's message).
        self.error: BaseException | None = None

    def settle(self, error: BaseException | None) -> None:
        """Tell every publisher still waiting: acknowledged, or what it gets for ``error``."""
        for waiter, size in zip(self.waiters, self.sizes, strict=True):
            if waiter.done():
                continue  # its publisher was cancelled
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(publisher_error(error, size))
