"""Where a consumed record goes: one subscription's handler and its bounds.

A group member hands each record to the :class:`Target` of its topic: a
single-group subscription has one target for all its topics, the inboxes of a
process one target per inbox topic. The target keeps what belongs to the
subscription rather than to a consumer: its handler, its de-duplication window,
the records it has in flight (at most ``max_in_flight``), whether its
subscriber paused it, and the records fetched while it was full or paused (its
backlog, handed out in order as it takes records again, while the consumer
fetches the other targets' records).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Hashable, Iterable
from types import CoroutineType
from typing import Protocol

from aiokafka import ConsumerRecord, TopicPartition
from cloudevents.core.v1.event import CloudEvent

from a2a_bus.runtime.tuples import build
from a2a_bus.transport.base import (
    Delivery,
    Handler,
    UndecodableHandler,
    report_undecodable,
)
from a2a_bus.transport.dead_letters import failed_letter, undecodable_letter
from a2a_bus.transport.dedup import DedupWindow
from a2a_bus.transport.eager import Started
from a2a_bus.transport.kafka.broker import Broker
from a2a_bus.transport.kafka.keys import Handling
from a2a_bus.transport.records import DecodedRecord

log = logging.getLogger(__name__)


class Target:
    """One subscription's handling of records; see the module docstring."""

    def __init__(
        self,
        transport: Broker,
        handler: Handler,
        name: str,
        *,
        topic: str | None = None,
        max_in_flight: int = 64,
        on_undecodable: UndecodableHandler | None = None,
        dead_letter: bool = True,
        dedup: bool = True,
        at_once: bool = False,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        self._transport = transport
        self._handler = handler
        #: For logs: the group, or the inbox topic.
        self.name = name
        #: The one topic it serves, or None for every topic of its member.
        self.topic = topic
        self.max_in_flight = max_in_flight
        self._on_undecodable = on_undecodable
        self._dead_letter = dead_letter
        # A window of none hands every copy over (see Transport.subscribe).
        self._dedup = DedupWindow(transport.settings.dedup_window if dedup else 0)
        #: exactly_once: answers go out with the commit, and one may be dropped.
        self._transactional = transport.settings.exactly_once
        #: Its records are run at once where they can be (:meth:`run_at_once`).
        self.at_once = at_once and not self._transactional
        #: Records handed out and not finished (queued behind their key or running).
        self.in_flight = 0
        self._slot_freed: asyncio.Future[None] | None = None
        #: Paused by its subscriber.
        self.paused = False
        #: Stopping: its records are no longer handed out.
        self.stopping = False
        #: Fetched records waiting for a free slot: (partition, records, epoch).
        self.backlog: deque[tuple[TopicPartition, list[ConsumerRecord], int]] = deque()
        self.backlog_records = 0
        #: The task handing the backlog out, while there is one.
        self.draining: asyncio.Task[None] | None = None

    @property
    def fetching(self) -> bool:
        """Whether its partitions should be fetched now: not stopping, and less
        than ``max_in_flight`` records waiting in the backlog.

        A paused target takes no records, but its partitions are fetched until
        its backlog is that long: on resume those are handed out at once while
        the consumer fetches again (which may take its whole idle wait).
        """
        return not (self.stopping or self.backlog_records >= self.max_in_flight)

    @property
    def full(self) -> bool:
        """Whether it takes no record now (paused, or ``max_in_flight`` in flight)."""
        return self.paused or self.in_flight >= self.max_in_flight

    def pause(self, paused: bool) -> None:
        self.paused = paused
        if not paused:
            self._wake()

    async def wait_for_slot(self) -> None:
        if not self.full:
            return
        # Its records may be done but for their answers' acknowledgements: while
        # it waits, those are not held for a hand-over that may not come.
        with self._transport.acks_at_once():
            while self.full:
                self._slot_freed = asyncio.get_running_loop().create_future()
                await self._slot_freed

    def release(self, records: int) -> None:
        """``records`` left the in-flight count (finished or dropped)."""
        self.in_flight -= records
        if self._slot_freed is not None:  # rarely: only while the dispatch loop waits
            self._wake()

    def _wake(self) -> None:
        waiter, self._slot_freed = self._slot_freed, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def drop_backlog(self) -> None:
        """Forget the fetched records not handed out (the next owner fetches them)."""
        self.backlog.clear()
        self.backlog_records = 0

    async def handle(self, handling: Handling) -> None:
        """Dead-letter what did not decode, hand each event to the handler (once
        per de-duplication key), then count the record finished."""
        # Only what the common record needs is read up front: this runs for every record.
        record = handling.record
        decoded = handling.decoded
        dedup = self._dedup
        finished = False
        try:
            if decoded.failures:
                await self._set_aside(handling)
            for event, dedup_key, raw in decoded.events:
                started = handling.started
                if started is None:
                    original = dedup.claim(dedup_key)
                    if original is not None and not await self._after_original(
                        handling, dedup_key, original
                    ):
                        continue
                    started = self._handler(
                        _delivery(handling.tp, record, event, handling.redelivered, raw)
                    )
                else:  # claimed and begun by run_at_once
                    handling.started = None
                try:
                    await started
                except asyncio.CancelledError:
                    dedup.forget(dedup_key)
                    raise
                except Exception as exc:
                    await self._failed(record, event, exc)
                else:
                    metrics = self._transport.metrics
                    metrics.delivered += 1
                    if handling.redelivered:
                        metrics.redelivered += 1
                    if self._transactional and self._answer_dropped(handling):
                        # Handled, but its answer went nowhere: a copy fetched again
                        # is handled again, not skipped.
                        dedup.forget(dedup_key)
                finally:
                    dedup.done(dedup_key)
            finished = True
        finally:
            if self._transactional:
                tp = handling.tp
                self._transport.answer_routes.settled(tp.topic, tp.partition, record.offset)
            # (release, spelled out)
            self.in_flight -= 1
            if self._slot_freed is not None:  # rarely: only while the dispatch loop waits
                self._wake()
            if finished:
                handling.tracker.finish(record.offset)
                handling.commit_wanted.set()

    def run_at_once(
        self, tp: TopicPartition, record: ConsumerRecord, decoded: DecodedRecord, redelivered: bool
    ) -> Awaitable[None] | bool:
        """Handle a record of one event now, if its handler finishes without waiting.

        True: handled and finished. False: nothing was done (a record to set
        aside, of several events, or a copy of one claimed before), so it is handed
        out as usual. Otherwise the handler waits: the rest of its run, to hand out
        as the record's ``started`` handling, which ends the record as usual.
        """
        if decoded.failures or len(decoded.events) != 1:
            return False
        event, dedup_key, raw = decoded.events[0]
        dedup = self._dedup
        if dedup.claim(dedup_key) is not None:
            return False  # a copy: the usual handling waits for its original
        run = self._handler(_delivery(tp, record, event, redelivered, raw))
        if type(run) is not CoroutineType:
            return run  # an awaitable of another kind: awaited as usual
        try:
            waiting = run.send(None)
        except StopIteration:
            dedup.done(dedup_key)
            metrics = self._transport.metrics
            metrics.delivered += 1
            if redelivered:
                metrics.redelivered += 1
            return True
        except BaseException as exc:
            return _raising(exc)  # the usual handling deals with it
        return Started(run, waiting)

    async def _set_aside(self, handling: Handling) -> None:
        """Dead-letter (and report) what did not decode of ``handling``'s record."""
        tp, record, failures = handling.tp, handling.record, handling.decoded.failures
        if self._dead_letter:
            await self._transport.dead_letter(
                undecodable_letter(
                    record.topic,
                    record.partition,
                    record.offset,
                    record.value,
                    record.key,
                    record.headers,
                    failures,
                )
            )
        if self._on_undecodable is not None:
            await report_undecodable(
                self._on_undecodable,
                tp.topic,
                tp.partition,
                record.offset,
                record.key,
                record.headers,
                failures,
                record.value,
            )

    async def _after_original(
        self, handling: Handling, dedup_key: Hashable, original: asyncio.Future[None]
    ) -> bool:
        """Wait for the handling of the copy claimed first; whether this one is to
        be handled after all (claimed again) or skipped as a duplicate."""
        await asyncio.shield(original)
        dedup = self._dedup
        if dedup_key in dedup:
            if not (self._transactional and self._answer_dropped(handling)):
                self._transport.metrics.duplicates += 1  # the original counts: this is a copy
                return False
            # This very record was handled here, but its answer was dropped with
            # its uncommitted transaction: it comes back to be handled.
            dedup.forget(dedup_key)
        # Forgotten: the original was cancelled, or its answer dropped.
        dedup.claim(dedup_key)
        return True

    async def _failed(self, record: ConsumerRecord, event: CloudEvent, exc: Exception) -> None:
        """The handler raised on ``event``: dead-letter ``record`` with the reason."""
        self._transport.metrics.handler_errors += 1
        log.error("%s: handler failed on %s", self.name, event.get_id(), exc_info=exc)
        await self._transport.dead_letter(failed_letter(record, record.value, event.get_id(), exc))

    def _answer_dropped(self, handling: Handling) -> bool:
        """exactly_once: the answer to ``handling``'s record went with an aborted
        transaction (see :mod:`a2a_bus.transport.kafka.answers`)."""
        tp = handling.tp
        return self._transport.answer_routes.was_dropped(
            tp.topic, tp.partition, handling.record.offset
        )


class Routing(Protocol):
    """The targets of a group member's topics."""

    def target(self, topic: str) -> Target | None:
        """The target of ``topic``'s records; None: hand none out."""

    def targets(self) -> Iterable[Target]:
        """Every target."""


class OneTarget:
    """Routing of a single-group subscription: one target for every topic."""

    def __init__(self, target: Target) -> None:
        self._target = target

    def target(self, topic: str) -> Target | None:
        return self._target

    def targets(self) -> Iterable[Target]:
        return (self._target,)


def _delivery(
    tp: TopicPartition, record: ConsumerRecord, event: CloudEvent, redelivered: bool, raw: bool
) -> Delivery:
    """What the handler is given for ``event`` of ``record``."""
    fields = (
        event,
        tp.topic,
        tp.partition,
        record.offset,
        record.key,
        redelivered,
        raw,
        tuple(record.headers),
    )
    return build(Delivery, fields)


async def _raising(exc: BaseException) -> None:
    """What the first step of a handler raised, raised where it is awaited."""
    raise exc
