"""Records handed out by Kafka group members run concurrently across keys, in order within a key.

A record with a key waits behind the running record of that key on its
partition and starts as soon as it finishes, so the records of a key are
handled one at a time in offset order; records without a key start at once.
Each record's handling coroutine (its target's
:meth:`~a2a_bus.transport.kafka.target.Target.handle`) runs eagerly
(:class:`~a2a_bus.transport.eager.EagerRun`): its first step at once, later
steps from the callbacks of the futures it awaits, with no task per record.

The inboxes of a process share one :class:`KeyedRuns` across their successive
group members, so a record fetched again by the next member waits behind the
original that the previous member's handler is still running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractContextManager
from typing import Any, Protocol

from aiokafka import ConsumerRecord, TopicPartition

from a2a_bus.transport.eager import EagerRun
from a2a_bus.transport.kafka.commits import PartitionTracker
from a2a_bus.transport.records import DecodedRecord

log = logging.getLogger(__name__)


class Handler(Protocol):
    """What handles a record (a :class:`~a2a_bus.transport.kafka.target.Target`)."""

    def handle(self, handling: Handling) -> Coroutine[Any, Any, None]:
        """The coroutine that handles ``handling``'s record."""

    def release(self, records: int) -> None:
        """``records`` left the in-flight count."""


#: Picks handlings (None: all of them).
Which = Callable[["Handling"], bool] | None

#: Records started inside one another's completion (a key's queued records that
#: finish at once) at most this deep; deeper ones start from the loop.
_MAX_DEPTH = 4


class Handling(EagerRun):
    """One record handed out for handling, with what its handling needs; once
    started, its coroutine run eagerly (cancellable like a task).

    The coroutine is made when the record starts, not when it is queued behind
    its key: a queued record that is dropped has none (one never started warns).
    """

    __slots__ = (
        "_runs",
        "commit_wanted",
        "decoded",
        "record",
        "redelivered",
        "started",
        "target",
        "tp",
        "tracker",
        "waiting",
    )

    def __init__(
        self,
        runs: KeyedRuns,
        target: Handler,
        tp: TopicPartition,
        record: ConsumerRecord,
        decoded: DecodedRecord,
        tracker: PartitionTracker,
        redelivered: bool,
        commit_wanted: asyncio.Event,
        started: Awaitable[None] | None = None,
    ) -> None:
        self._runs = runs
        self.target = target
        self.tp = tp
        self.record = record
        self.decoded = decoded
        self.tracker = tracker
        self.redelivered = redelivered
        #: Set once the record finished: its member's committer commits soon.
        self.commit_wanted = commit_wanted
        #: The handler's run of its one event, begun already and not finished (see
        #: :meth:`~a2a_bus.transport.kafka.target.Target.run_at_once`).
        self.started = started
        #: Records of its key queued behind it while it runs (made for the first).
        self.waiting: deque[Handling] | None = None

    def begin(self) -> None:
        """Make the coroutine and run its first step."""
        EagerRun.__init__(self, self.target.handle(self), self._runs._loop)
        self.step()

    def finished(self, error: BaseException | None) -> None:
        self._runs._finished(self, error)


class KeyedRuns:
    """The records being handled or waiting behind their key."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        name: str,
        acks_at_once: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext,
    ) -> None:
        self._loop = loop
        self._name = name
        #: While :meth:`drain` waits, or records wait behind their key, the
        #: acknowledgements that finish records are not held
        #: (:meth:`~a2a_bus.transport.kafka.batches.Batches.acks_at_once`).
        self._acks_at_once = acks_at_once
        #: Records queued behind their key, and the hold lifted while there are any.
        self._queued = 0
        self._lifted = contextlib.ExitStack()
        #: The running record of each busy key; the records queued behind it are its ``waiting``.
        self._busy: dict[tuple[TopicPartition, bytes], Handling] = {}
        self._running: set[Handling] = set()
        #: Set when a handling finishes while :meth:`drain` waits.
        self._finished_one: asyncio.Future[None] | None = None
        self._depth = 0

    def start(self, handling: Handling) -> None:
        """Start handling a record, or queue it behind the running record of its key."""
        key = handling.record.key
        if key is not None:
            running = self._busy.get((handling.tp, key))
            if running is not None:
                # strictly after the records of its key before it
                if running.waiting is None:
                    running.waiting = deque()
                running.waiting.append(handling)
                if not self._queued:  # it waits for its key's record to finish, at once
                    self._lifted.enter_context(self._acks_at_once())
                self._queued += 1
                return
            self._busy[handling.tp, key] = handling
        # (_begin, spelled out: this runs for every record)
        self._running.add(handling)
        handling.begin()

    def idle(self, tp: TopicPartition, key: bytes) -> bool:
        """Whether no record of ``key`` on ``tp`` is running (or queued)."""
        return (tp, key) not in self._busy

    def drop_queued(self, which: Which) -> list[Handling]:
        """Forget the records waiting behind a running record that ``which``
        picks; they were never handed to a handler. The dropped handlings."""
        dropped: list[Handling] = []
        for key in [k for k, h in self._busy.items() if which is None or which(h)]:
            # Emptied as well as forgotten: the running handling of the key
            # must start nothing more from it.
            waiting = self._busy.pop(key).waiting
            if waiting:
                dropped.extend(waiting)
                waiting.clear()
        self._dequeued(len(dropped))
        return dropped

    def _dequeued(self, records: int) -> None:
        """``records`` queued behind their key started or were dropped."""
        if records:
            self._queued -= records
            if not self._queued:
                self._lifted.close()

    def running(self, which: Which) -> list[Handling]:
        """The handlings running now that ``which`` picks."""
        return [h for h in self._running if which is None or which(h)]

    async def drain(self, which: Which, timeout: float | None) -> list[Handling]:
        """Wait up to ``timeout`` seconds (None: no limit) until no handling that
        ``which`` picks is running, the records queued behind them included; the
        handlings still running then."""
        deadline = None if timeout is None else self._loop.time() + timeout
        with self._acks_at_once():
            while True:
                running = self.running(which)
                left = None if deadline is None else deadline - self._loop.time()
                if not running or (left is not None and left <= 0):
                    return running
                if self._finished_one is None or self._finished_one.done():
                    self._finished_one = self._loop.create_future()
                await asyncio.wait([self._finished_one], timeout=left)

    def _begin(self, handling: Handling) -> None:
        self._running.add(handling)
        handling.begin()

    def _finished(self, handling: Handling, error: BaseException | None) -> None:
        """A handling ended: start the next record of its key, wake :meth:`drain`."""
        self._running.discard(handling)
        if error is not None and not isinstance(error, asyncio.CancelledError):
            log.error("%s: handling a record failed", self._name, exc_info=error)
        key = handling.record.key
        if key is not None and self._busy.get((handling.tp, key)) is handling:
            # (not so if the partition was revoked meanwhile: nothing more starts)
            waiting = handling.waiting
            if waiting:
                following = waiting.popleft()
                following.waiting = waiting
                self._dequeued(1)
                self._busy[handling.tp, key] = following
                if self._depth < _MAX_DEPTH:
                    self._depth += 1
                    try:
                        self._begin(following)
                    finally:
                        self._depth -= 1
                else:
                    self._loop.call_soon(self._begin, following)
            else:
                del self._busy[handling.tp, key]
        finished = self._finished_one
        if finished is not None and not finished.done():
            finished.set_result(None)
