"""Produce batching: the publishes of one loop iteration go to aiokafka as one
record batch per partition.

``AIOKafkaProducer.send`` costs a few coroutine layers, a metadata lookup, the
partitioner, a future and a ``RecordMetadata`` per record. Under load the bus
publishes in waves (every handler woken by one fetch publishes in the same loop
iteration), so :class:`Batches` appends each record to an open batch of its
partition at once and hands the batches to the producer (``send_batch``) at the
next loop iteration. A partition's batches are handed over one at a time, in
order, so per-key order and the idempotent producer's sequence numbers are those
of ``send``; while the producer still holds an undrained batch of a partition
(its node has a request in flight) the next one keeps filling, which is what
``send`` does too.

An answer's acknowledgement waits for the next hand-over to be written. What it sets
off (finishing the record the answer answers: its commit, its dedup claim, its slot)
is needed by nothing urgent, while the same wake of the loop usually brings the
records that make the next wave of requests. So a record added with ``ack_later``
has its acknowledgement held until the produce request of the next hand-over is on
the wire, and settled while the broker works on it; or after :data:`ACK_WAIT`
seconds when nothing is handed over. None is held while a record waits for another
to finish (:meth:`Batches.acks_at_once`: a full subscription, a key with records
queued behind it, a drain). Other publishers, and every failure, are settled as the
acknowledgement arrives.

Records are assigned to partitions as aiokafka's default partitioner does
(:mod:`a2a_bus.transport.kafka.partitioning`), so keys land where they did.

While the broker is away (restarting, a leader moving), aiokafka fails a batch
that never left it: one that waited too long for its partition's earlier batch
to be sent, or for a leader. Such a batch was never written, so it is handed
over again, with the same records, after a short pause, until it is acknowledged
or its ``delivery_timeout`` runs out; then its publishers get
:class:`~a2a_bus.transport.kafka.producing.KafkaNotDelivered`. Batches aiokafka did
send are retried by the idempotent producer itself (no duplicates, order kept).

The broker refuses a batch over the topic's ``max.message.bytes`` as a whole, so a
batch of several records that each fit is not refused for their sake: its records
go again, one batch each, in its place, and only a record too large alone is
refused as too large. A refused batch was never written, nor were the batches of
its partition handed to the same producer after it (the broker refuses them as out
of sequence): they go again too, to the new producer, in order (see
:class:`Batches` on renewal).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from typing import Any

from aiokafka import AIOKafkaProducer, TopicPartition

from a2a_bus.transport.eager import run_eagerly
from a2a_bus.transport.kafka.pending import ORDINAL_STEP, Pending, put_back, refused_again
from a2a_bus.transport.kafka.producing import KafkaNotDelivered, check_size, transient
from a2a_bus.transport.kafka.renewal import Renewal

log = logging.getLogger(__name__)

#: Seconds between two hand-overs of a batch that failed without being written.
RETRY_BACKOFF = 0.25
#: Seconds between two looks for batches past their delivery timeout.
SWEEP_INTERVAL = 0.5
#: Seconds an ``ack_later`` acknowledgement waits at most for a hand-over.
ACK_WAIT = 0.005
#: Loop iterations from a hand-over to its produce request being written: aiokafka's
#: sender is woken, drains the batches, and writes them from a task of its own.
WRITE_ITERATIONS = 3


class Batches:
    """Open record batches per partition in front of one producer (see the module).

    After a batch failed at the broker, ``renew`` (a started producer with the
    same settings) takes over (see :mod:`~a2a_bus.transport.kafka.renewal`).
    """

    def __init__(
        self,
        producer: AIOKafkaProducer,
        renew: Callable[[], Awaitable[AIOKafkaProducer]] | None = None,
        delivery_timeout: float = 120.0,
    ) -> None:
        self._producer = producer
        self._renewal = Renewal(renew, self._swap)
        #: The batches replaced producers still hold (their partitions wait for them).
        self._returning = self._renewal.returning
        self._delivery_timeout = delivery_timeout
        #: Acknowledged ``ack_later`` publishers not told yet, and the timer that
        #: tells them if no hand-over comes first.
        self._held: list[asyncio.Future[None]] = []
        self._held_until: asyncio.TimerHandle | None = None
        #: Waiters for acknowledgements at once (see :meth:`acks_at_once`).
        self._impatient = 0
        #: Batches not acknowledged yet, oldest (earliest deadline) first.
        self._outstanding: dict[Pending, None] = {}
        self._sweeping: asyncio.TimerHandle | None = None
        self._ordinals = itertools.count(0, ORDINAL_STEP)
        self._loop = asyncio.get_running_loop()
        self._queued: dict[TopicPartition, deque[Pending]] = {}
        self._handing_over: set[TopicPartition] = set()
        self._flush_scheduled = False
        self._idle = asyncio.Event()
        self._idle.set()
        #: Sorted partitions and available partitions per topic, until the metadata changes.
        self._partitions: dict[str, tuple[list[int], list[int]]] = {}
        #: The TopicPartition of each partition written to (not one per record), as long.
        self._tps: dict[str, dict[int, TopicPartition]] = {}
        producer.client.cluster.add_listener(self._metadata_changed)

    @property
    def producer(self) -> AIOKafkaProducer:
        """The producer batches are handed to now."""
        return self._producer

    async def aclose(self) -> None:
        """Hand over what was added, then stop the producer (and any renewal)."""
        await self.wait_handed_over()
        await self._renewal.aclose()  # a batch failing from here on starts no new producer
        await self.wait_handed_over()  # what came back unwritten goes to the new one
        if self._sweeping is not None:
            self._sweeping.cancel()
            self._sweeping = None
        self._producer.client.cluster.remove_listener(self._metadata_changed)
        await self._producer.stop()
        self.settle_acks()

    def _metadata_changed(self, _: object) -> None:
        self._partitions.clear()
        self._tps.clear()

    def partitions(self, topic: str) -> tuple[list[int], list[int]] | None:
        """Every partition of ``topic`` (sorted) and the available ones, or None
        while the metadata does not know the topic."""
        known = self._partitions.get(topic)
        if known is None:
            cluster = self._producer.client.cluster
            every = cluster.partitions_for_topic(topic)
            if not every:
                return None
            available = cluster.available_partitions_for_topic(topic) or ()
            known = self._partitions[topic] = (sorted(every), sorted(available))
        return known

    def add(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]],
        ack_later: bool = False,
    ) -> asyncio.Future[None]:
        """Append a record; the future is done when the broker acknowledged it (a
        broker's size refusal as
        :class:`~a2a_bus.transport.kafka.producing.KafkaRecordTooLarge`). ``ack_later``: the
        acknowledgement may wait for the next hand-over (see the module)."""
        check_size(key, value, headers)
        tps = self._tps.get(topic)
        if tps is None:
            tps = self._tps[topic] = {}
        tp = tps.get(partition)
        if tp is None:
            tp = tps[partition] = TopicPartition(topic, partition)
        queue = self._queued.get(tp)
        if queue is None:
            queue = self._queued[tp] = deque()
            self._idle.clear()
        if (
            not queue
            or queue[-1].builder.append(timestamp=None, key=key, value=value, headers=headers)
            is None
        ):
            pending = Pending(
                self._producer.create_batch(),
                tp,
                self._loop.time() + self._delivery_timeout,
                next(self._ordinals),
            )
            queue.append(pending)
            self._outstanding[pending] = None
            if self._sweeping is None:
                self._sweeping = self._loop.call_later(SWEEP_INTERVAL, self._sweep)
            # An empty batch takes any record below the request size.
            pending.builder.append(timestamp=None, key=key, value=value, headers=headers)
        future = self._loop.create_future()
        last = queue[-1]
        last.waiters.append(future)
        last.sizes.append(0 if value is None else len(value))
        last.later.append(ack_later)
        last.records.append((key, value, headers))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)
        return future

    @property
    def held_acks(self) -> int:
        """Acknowledgements held for the next hand-over."""
        return len(self._held)

    @contextlib.contextmanager
    def acks_at_once(self) -> Iterator[None]:
        """Hold no acknowledgement while inside (those held are settled on entry):
        for a subscription that waits for records to finish."""
        self.settle_acks()
        self._impatient += 1
        try:
            yield
        finally:
            self._impatient -= 1

    def settle_acks(self) -> None:
        """Tell the publishers whose acknowledgements are held, now."""
        if self._held_until is not None:
            self._held_until.cancel()
            self._held_until = None
        held, self._held = self._held, []
        for waiter in held:
            if not waiter.done():
                waiter.set_result(None)

    async def wait_handed_over(self) -> None:
        """Wait until every record added so far is with the producer."""
        await self._idle.wait()

    def _flush(self) -> None:
        self._flush_scheduled = False
        for tp in list(self._queued):
            if tp not in self._handing_over:
                self._handing_over.add(tp)
                run_eagerly(self._hand_over(tp), partial(self._handed_over, tp), self._loop)
        if self._held:
            self._loop.call_soon(self._settle_acks_after, WRITE_ITERATIONS)

    def _settle_acks_after(self, iterations: int) -> None:
        """:meth:`settle_acks` once ``iterations`` more loop iterations ran."""
        if iterations:
            self._loop.call_soon(self._settle_acks_after, iterations - 1)
        else:
            self.settle_acks()

    async def _hand_over(self, tp: TopicPartition) -> None:
        """Hand the batches of ``tp`` to the producer, oldest first; the producer
        makes each wait until the one before it is drained into a request."""
        queue = self._queued[tp]
        while queue:
            if self._renewal.starting is not None:
                await asyncio.shield(self._renewal.starting)
                continue
            if self._returning and tp in self._returning:
                await asyncio.shield(self._returning[tp])  # what comes back goes first
                continue
            pending = queue.popleft()
            producer = pending.producer = self._producer
            try:
                delivered = await producer.send_batch(
                    pending.builder, tp.topic, partition=tp.partition
                )
            except BaseException as exc:
                if self._returning:
                    self._returning.came_back(pending)
                if self._again(pending, exc):
                    put_back(queue, [pending])  # first again: the partition's order holds
                    await asyncio.sleep(RETRY_BACKOFF)
                else:  # its publishers get it, the next batch goes on
                    self._settle(pending, exc)
                continue
            delivered.add_done_callback(partial(self._delivered, pending))

    def _delivered(self, pending: Pending, delivered: asyncio.Future[Any]) -> None:
        if self._returning:
            self._returning.came_back(pending)
        if delivered.cancelled():
            self._settle(pending, asyncio.CancelledError())
            return
        error = delivered.exception()
        if error is not None:
            self._failed(pending, error)
        elif not self._impatient and True in pending.later:
            self._outstanding.pop(pending, None)
            self._hold(pending)
        else:
            self._settle(pending, None)

    def _failed(self, pending: Pending, error: BaseException) -> None:
        """``pending`` failed: it goes again if it was not written, else its publishers hear."""
        if self._again(pending, error):
            self._put_back([pending], RETRY_BACKOFF)
            return
        if pending.producer is self._producer:
            self._renewal.start(error)  # before the publishers hear of it
        again = self._refused_unwritten(pending, error)
        if again:
            self._put_back(again, 0.0)  # after the renewal, which hand-overs wait for
        else:
            self._settle(pending, error)

    def _refused_unwritten(self, pending: Pending, error: BaseException) -> list[Pending]:
        """What goes again of a batch the broker refused unwritten (see
        :func:`~a2a_bus.transport.kafka.pending.refused_again`): only before its
        deadline, and to a producer in step with the broker."""
        if pending not in self._outstanding:
            return []  # past its deadline already
        if self._renewal.renew is None and pending.producer is self._producer:
            return []  # its producer's sequence numbers stay out of step: it would fail again
        again = refused_again(pending, error, self._producer.create_batch)
        if len(again) > 1:  # its records, one batch each, in its place for the sweep
            order = list(self._outstanding)
            at = order.index(pending)
            order[at : at + 1] = again
            self._outstanding = dict.fromkeys(order)
        return again

    def _put_back(self, batches: list[Pending], delay: float) -> None:
        """Put ``batches`` (of one partition, in order) back in their place, and
        hand them over again after ``delay`` seconds."""
        tp = batches[0].tp
        queue = self._queued.get(tp)
        if queue is None:
            queue = self._queued[tp] = deque()
        put_back(queue, batches)
        self._idle.clear()
        self._loop.call_later(delay, self._flush)

    def _hold(self, pending: Pending) -> None:
        """Tell ``pending``'s publishers it was acknowledged: the ``ack_later`` ones
        at the next hand-over's write (or :data:`ACK_WAIT`), the others now."""
        held = self._held
        for waiter, later in zip(pending.waiters, pending.later, strict=True):
            if waiter.done():
                continue  # its publisher was cancelled
            if later:
                held.append(waiter)
            else:
                waiter.set_result(None)
        if held and self._held_until is None:
            self._held_until = self._loop.call_later(ACK_WAIT, self.settle_acks)

    def _again(self, pending: Pending, error: BaseException) -> bool:
        """Whether ``pending`` failed without being written and may go again (then
        it holds a fresh batch of its records)."""
        if pending not in self._outstanding or not transient(error):
            return False  # past its deadline already, or it may have been written
        pending.error = error
        if not pending.rebuild(self._producer.create_batch()):
            return False
        log.info("a batch for %s was not written (%s): it goes again", pending.tp, error)
        return True

    def _settle(self, pending: Pending, error: BaseException | None) -> None:
        self._outstanding.pop(pending, None)
        pending.settle(error)

    def _sweep(self) -> None:
        """Fail the publishers of batches past their deadline; look again later
        while any batch is outstanding."""
        self._sweeping = None
        now = self._loop.time()
        expired = []
        for pending in self._outstanding:
            if pending.deadline > now:
                break  # the rest are younger
            expired.append(pending)
        for pending in expired:
            queue = self._queued.get(pending.tp)
            if queue is not None and pending in queue:
                queue.remove(pending)  # still here: it is never written
                written = "it was not written"
            else:
                written = "it may still be written"
                if self._returning:
                    self._returning.came_back(pending)  # its partition waits no longer
            why = f" (last error: {pending.error})" if pending.error is not None else ""
            detail = (
                f"Kafka did not acknowledge {len(pending.waiters)} record(s) for "
                f"{pending.tp.topic} within {self._delivery_timeout:g} s{why}; {written}"
            )
            log.warning("%s", detail)
            self._settle(pending, KafkaNotDelivered(detail))
        if self._outstanding:
            self._sweeping = self._loop.call_later(SWEEP_INTERVAL, self._sweep)

    def _swap(self, new: AIOKafkaProducer) -> tuple[AIOKafkaProducer, list[Pending]]:
        """Make ``new`` the producer; the old one, and the batches it still holds."""
        old = self._producer
        old.client.cluster.remove_listener(self._metadata_changed)
        new.client.cluster.add_listener(self._metadata_changed)
        self._producer = new
        self._metadata_changed(None)
        return old, [pending for pending in self._outstanding if pending.producer is old]

    def _handed_over(self, tp: TopicPartition, error: BaseException | None) -> None:
        self._handing_over.discard(tp)
        queue = self._queued.get(tp)
        if error is not None and queue:
            # Not expected (send_batch's errors are handled above); fail the rest
            # rather than leave their publishers waiting.
            while queue:
                self._settle(queue.popleft(), error)
        if queue:
            self._handing_over.add(tp)
            run_eagerly(self._hand_over(tp), partial(self._handed_over, tp), self._loop)
            return
        self._queued.pop(tp, None)
        if not self._queued:
            self._idle.set()
