"""Records of one Kafka group member run concurrently across keys, in order within a key.

A record with a key waits behind the running record of that key on its
partition and starts as soon as it finishes, so the records of a key are
handled one at a time in offset order; records without a key start at once.
Each record's handling coroutine runs eagerly (:class:`~a2a_bus.transport.eager.EagerRun`):
its first step at once, later steps from the callbacks of the futures it
awaits, with no task per record.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Collection, Coroutine
from typing import Any, NamedTuple

from aiokafka import ConsumerRecord, TopicPartition

from a2a_bus.transport.eager import EagerRun
from a2a_bus.transport.kafka_commits import PartitionTracker
from a2a_bus.transport.kafka_records import DecodedRecord

log = logging.getLogger(__name__)


class Pending(NamedTuple):
    """A record handed out for handling, with what its handling needs."""

    tp: TopicPartition
    record: ConsumerRecord
    decoded: DecodedRecord
    tracker: PartitionTracker
    redelivered: bool


#: Makes the coroutine that handles one record (the subscription's ``_handle``).
Handle = Callable[[Pending], Coroutine[Any, Any, None]]

#: Records started inside one another's completion (a key's queued records that
#: finish at once) at most this deep; deeper ones start from the loop.
_MAX_DEPTH = 4


class Handling(EagerRun):
    """One record being handled: its coroutine, run eagerly (cancellable like a task)."""

    __slots__ = ("_runs", "pending", "queue")

    def __init__(
        self,
        runs: KeyedRuns,
        pending: Pending,
        queue: deque[Pending] | None,
        coro: Coroutine[Any, Any, None],
    ) -> None:
        super().__init__(coro, runs._loop)
        self._runs = runs
        self.pending = pending
        #: The queue of its key (records waiting behind it), None without a key.
        self.queue = queue

    def finished(self, error: BaseException | None) -> None:
        self._runs._finished(self, error)


class KeyedRuns:
    """The records of one member being handled or waiting behind their key."""

    def __init__(self, loop: asyncio.AbstractEventLoop, handle: Handle, group: str) -> None:
        self._loop = loop
        self._handle = handle
        self._group = group
        #: Records waiting behind the running record of their key, per busy key.
        self._queues: dict[tuple[TopicPartition, bytes], deque[Pending]] = {}
        self._running: set[Handling] = set()
        #: Set when a handling finishes while :meth:`drain` waits.
        self._finished_one: asyncio.Future[None] | None = None
        self._depth = 0

    def start(self, pending: Pending) -> None:
        """Start handling ``pending``, or queue it behind the running record of its key."""
        queue = None
        key = pending.record.key
        if key is not None:
            queue = self._queues.get((pending.tp, key))
            if queue is not None:
                queue.append(pending)  # strictly after the records of its key before it
                return
            queue = self._queues[pending.tp, key] = deque()
        self._begin(pending, queue)

    def drop_queued(self, partitions: Collection[TopicPartition] | None) -> int:
        """Forget the records of ``partitions`` (None: all) waiting behind their key,
        which were never handed to a handler; how many there were."""
        dropped = 0
        for key in [k for k in self._queues if partitions is None or k[0] in partitions]:
            # Emptied as well as removed: the running handling of the key still
            # holds the queue and must start nothing more from it.
            queue = self._queues.pop(key)
            dropped += len(queue)
            queue.clear()
        return dropped

    async def drain(
        self, partitions: Collection[TopicPartition] | None, timeout: float | None
    ) -> list[Handling]:
        """Wait up to ``timeout`` seconds (None: no limit) until no record of
        ``partitions`` (None: all) is being handled, queued records of a key
        included; the handlings still running then."""
        deadline = None if timeout is None else self._loop.time() + timeout
        while True:
            running = [h for h in self._running if partitions is None or h.pending.tp in partitions]
            left = None if deadline is None else deadline - self._loop.time()
            if not running or (left is not None and left <= 0):
                return running
            if self._finished_one is None or self._finished_one.done():
                self._finished_one = self._loop.create_future()
            await asyncio.wait([self._finished_one], timeout=left)

    def _begin(self, pending: Pending, queue: deque[Pending] | None) -> None:
        handling = Handling(self, pending, queue, self._handle(pending))
        self._running.add(handling)
        handling.step()

    def _finished(self, handling: Handling, error: BaseException | None) -> None:
        """A handling ended: start the next record of its key, wake :meth:`drain`."""
        self._running.discard(handling)
        if error is not None and not isinstance(error, asyncio.CancelledError):
            log.error("group %s: handling a record failed", self._group, exc_info=error)
        queue = handling.queue
        if queue is not None:
            if queue:  # emptied instead if the partition was revoked meanwhile
                following = queue.popleft()
                if self._depth < _MAX_DEPTH:
                    self._depth += 1
                    try:
                        self._begin(following, queue)
                    finally:
                        self._depth -= 1
                else:
                    self._loop.call_soon(self._begin, following, queue)
            else:
                key = (handling.pending.tp, handling.pending.record.key)
                if self._queues.get(key) is queue:  # not a new owner's queue of that key
                    del self._queues[key]
        finished = self._finished_one
        if finished is not None and not finished.done():
            finished.set_result(None)
