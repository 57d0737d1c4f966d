"""A new producer taking over from one whose sequence numbers went out of step
with the broker's.

A batch the broker refuses (for its size, say), or that fails otherwise, leaves
an idempotent producer's sequence numbers for its partition ahead of the
broker's: aiokafka does not resynchronise them, so every later batch of that
partition would fail with OutOfOrderSequenceNumber. :class:`Renewal` therefore
has a started producer with the same settings take over, under a new producer
id; hand-overs wait for it. The batches the old producer still holds may come
back unwritten (refused, or out of sequence after the refusal) and go again:
their partitions' later batches wait for them (:class:`Returning`), and the old
producer is stopped once they all came back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from aiokafka import AIOKafkaProducer, TopicPartition

from a2a_bus.transport.kafka.pending import Pending

# The batches' logger, as before the renewal left a2a_bus.transport.kafka.batches.
log = logging.getLogger("a2a_bus.transport.kafka.batches")

#: Makes a new producer the one batches go to; gives the old one back, and the
#: batches it still holds.
Swap = Callable[[AIOKafkaProducer], tuple[AIOKafkaProducer, list[Pending]]]


class Returning(dict[TopicPartition, "asyncio.Future[None]"]):
    """The partitions whose batches a replaced producer still holds, each with a
    future done once they all came back (written, failed, or given up on): until
    then none of the partition's later batches goes to the new producer, as those
    that come back unwritten go again before them."""

    def __init__(self) -> None:
        super().__init__()
        self._held: dict[TopicPartition, set[Pending]] = {}

    def hold(self, handed: Iterable[Pending]) -> list[asyncio.Future[None]]:
        """Hold back the partitions of ``handed``; the futures done once every
        partition held back (by this call or an earlier one) is let go."""
        for pending in handed:
            held = self._held.get(pending.tp)
            if held is None:
                held = self._held[pending.tp] = set()
                self[pending.tp] = asyncio.get_running_loop().create_future()
            held.add(pending)
        return [asyncio.shield(back) for back in self.values()]

    def came_back(self, pending: Pending) -> None:
        """``pending`` left a replaced producer: written, failed, or given up on."""
        held = self._held.get(pending.tp)
        if held is not None and pending in held:
            held.discard(pending)
            if not held:
                del self._held[pending.tp]
                self.pop(pending.tp).set_result(None)


class Renewal:
    """Replaces the producer after a failure that may have put it out of step.

    ``renew`` starts a producer with the same settings (None: the producer is
    never replaced); ``swap`` makes it the one batches go to.
    """

    def __init__(self, renew: Callable[[], Awaitable[AIOKafkaProducer]] | None, swap: Swap) -> None:
        self.renew = renew
        self._swap = swap
        #: While a new producer is being started: hand-overs wait for it.
        self.starting: asyncio.Future[None] | None = None
        self._renewing: asyncio.Task[None] | None = None
        #: The batches replaced producers still hold.
        self.returning = Returning()

    def start(self, error: BaseException) -> None:
        """Have a new producer take over, unless one is being started already."""
        if self.renew is None or self.starting is not None:
            return
        log.warning(
            "a batch failed (%s): a new producer takes over, so that no partition's "
            "sequence numbers stay out of step with the broker's",
            error,
        )
        loop = asyncio.get_running_loop()
        self.starting = loop.create_future()
        self._renewing = loop.create_task(self._take_over(self.renew, self.starting))

    async def aclose(self) -> None:
        """Start no new producer; wait for one being started, and the old one's stop."""
        self.renew = None
        if self._renewing is not None:
            try:
                await self._renewing
            except Exception as exc:  # its old producer's stop: nothing more to do
                log.warning("stopping a replaced producer failed: %s", exc)

    async def _take_over(
        self, renew: Callable[[], Awaitable[AIOKafkaProducer]], starting: asyncio.Future[None]
    ) -> None:
        back: list[asyncio.Future[None]] = []
        try:
            new = await renew()
        except Exception as exc:  # the broker is unreachable, say: try again at the next failure
            log.warning("starting a new producer failed (%s); the old one goes on", exc)
            return
        else:
            old, handed = self._swap(new)
            back = self.returning.hold(handed)
        finally:
            self.starting = None
            starting.set_result(None)
        # Still running meanwhile, so that what it holds comes back (a batch handed
        # to it after its stop began would be neither sent nor failed).
        await asyncio.gather(*back)
        await old.stop()
