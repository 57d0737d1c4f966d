"""A member of an in-memory consumer group: the records of its partitions handed
to its handler, in order per key, at most ``max_in_flight`` at once.

Each record in the member's hands is one :class:`_Handling`: it runs the handler
eagerly (the first step at once, the rest from the callbacks of what it awaits),
releases the event's de-duplication key, and is the record's place in its
partition's commit order. A record stored raw (bytes from a producer outside the
bus) is decoded here first, and dead-lettered when it holds no event.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import deque
from collections.abc import Awaitable, Coroutine, Sequence
from types import CoroutineType
from typing import Any, Protocol

from a2a_bus.protocol import Adaptor
from a2a_bus.runtime.tuples import build
from a2a_bus.transport.base import (
    DeadLetter,
    Delivery,
    Handler,
    Subscription,
    TopicPattern,
    UndecodableHandler,
    report_undecodable,
)
from a2a_bus.transport.dead_letters import (
    delivered_letter,
    failed_letter,
    handler_failure,
    undecodable_letter,
)
from a2a_bus.transport.dedup import DedupWindow
from a2a_bus.transport.eager import EagerRun
from a2a_bus.transport.memory.log import TP, Partition, Progress, Record
from a2a_bus.transport.records import decode_record

log = logging.getLogger(__name__)

#: Handlers started eagerly inside one another (a handler that publishes) at
#: most this deep; deeper ones start from the loop, so the stack stays short.
MAX_EAGER_DEPTH = 4


class Owner(Protocol):
    """What a member needs of the transport that owns its group."""

    adaptor: Adaptor
    dedup_window: int
    #: Copies of an event skipped by de-duplication (counted by the members).
    duplicates: int
    #: How deep handlers now run started inside one another (counted by the members).
    eager_depth: int

    def partition(self, tp: TP) -> Partition:
        """The partition ``tp``."""

    def leave(self, member: MemorySubscription) -> None:
        """``member`` stopped: its group's partitions go to the members left."""

    def write_dead_letter(self, letter: DeadLetter) -> None:
        """Set ``letter`` aside on the dead-letter topic."""


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
        transport: Owner,
        group: Group,
        topics: Sequence[str] | TopicPattern,
        handler: Handler,
        max_in_flight: int,
        on_undecodable: UndecodableHandler | None = None,
        *,
        dedup: bool = True,
    ) -> None:
        self._transport = transport
        self._group = group
        self._topics = topics
        self._regex = re.compile(topics.regex) if isinstance(topics, TopicPattern) else None
        self._handler = handler
        self.on_undecodable = on_undecodable
        # A window of none hands every copy over (see Transport.subscribe).
        self._dedup = DedupWindow(transport.dedup_window if dedup else 0)
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
        self._transport.leave(self)

    # -- delivery -----------------------------------------------------------

    def pump(self) -> None:
        """Take records from the assigned partitions while there is capacity."""
        partition = self._transport.partition
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
            run = self._deliver(handling.progress.tp, record)
        else:  # stored as an event: nothing to decode
            attributes = event.get_attributes()
            dedup_key = (attributes["source"], attributes["id"])
            original = self._dedup.claim(dedup_key)
            if original is None:
                topic, partition = handling.progress.tp
                fields = (event, topic, partition, record.offset, record.key, False, False, ())
                delivery = build(Delivery, fields)
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
        if transport.eager_depth >= MAX_EAGER_DEPTH:
            loop.call_soon(handling.step)
            return
        # Fast path: the handler's first step runs now (it usually hands the
        # event to an actor and waits), not one loop iteration later.
        transport.eager_depth += 1
        try:
            handling.step()
        finally:
            transport.eager_depth -= 1

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
        if value is None:  # stored as an event: set aside as a structured CloudEvent
            letter = delivered_letter(delivery, handler_failure(exc))
        else:
            letter = failed_letter(delivery, value, delivery.event.get_id(), exc)
        self._transport.write_dead_letter(letter)

    async def _deliver(self, tp: TP, record: Record) -> None:
        """Decode a raw record and handle its events (dead-letter it if it holds none)."""
        topic, partition = tp
        decoded = decode_record(
            self._transport.adaptor,
            topic,
            partition,
            record.offset,
            record.value,
            record.headers,
            record.key,
        )
        if decoded.failures:
            if self.dead_letter:
                self._transport.write_dead_letter(
                    undecodable_letter(
                        topic,
                        partition,
                        record.offset,
                        record.value,
                        record.key,
                        record.headers,
                        decoded.failures,
                    )
                )
            if self.on_undecodable is not None:
                await report_undecodable(
                    self.on_undecodable,
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
            await self._handle(delivery, item.dedup_key, record.value)

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
