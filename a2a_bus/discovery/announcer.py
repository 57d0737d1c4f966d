"""The writing side of the agent registry: the record of a card, and the
:class:`Announcer` that publishes this process's cards (at start, every heartbeat,
and "gone" at stop). The reading side is :mod:`a2a_bus.discovery.directory` and
:mod:`a2a_bus.discovery.registry`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.discovery.cards import card_problem
from a2a_bus.protocol import Adaptor, ext, new_event
from a2a_bus.runtime.loops import stop_task
from a2a_bus.transport.base import Transport

# The directory's logger, as before the announcer left a2a_bus.discovery.directory.
log = logging.getLogger("a2a_bus.discovery.directory")

#: The type suffixes of the registry's records: a card, and an agent's goodbye.
CARD_SUFFIX = ".agent.card"
GONE_SUFFIX = ".agent.gone"


def card_event(adaptor: Adaptor, card: dict[str, Any], *, gone: bool = False) -> CloudEvent:
    """The registry record for ``card`` (keyed by agent id)."""
    suffix = GONE_SUFFIX if gone else CARD_SUFFIX
    attributes: dict[str, Any] = {
        "source": adaptor.source,
        "type": adaptor.prefix + suffix,
        "datacontenttype": "application/json",
        ext.PARTITION_KEY: card["id"],
    }
    return new_event(attributes, None if gone else card)


class Announcer:
    """Publishes the cards of this process's agents on the registry: when one
    starts, every ``interval`` seconds for all of them, and "gone" when one stops."""

    def __init__(
        self,
        transport: Transport,
        topic: str,
        adaptor: Adaptor,
        interval: float,
        cards: Callable[[], list[dict[str, Any]]],
    ) -> None:
        self._transport = transport
        self._topic = topic
        self._adaptor = adaptor
        self.interval = interval
        self._cards = cards
        self._task: asyncio.Task[None] | None = None
        self._sending: set[asyncio.Task[None]] = set()

    async def announce(self, card: dict[str, Any], *, gone: bool = False) -> None:
        await self._publish(card, gone=gone)

    def _publish(self, card: dict[str, Any], *, gone: bool = False) -> Awaitable[None]:
        """The acknowledgement of ``card``'s record, written now; a publish that fails
        at once (a card too large, say) gives a failed future, so that a heartbeat
        still sends the other cards."""
        try:
            problem = None if gone else card_problem(card, card["id"])
            if problem is not None:  # every other bus would skip it: said here instead
                raise ValueError(f"the card of {card['id']!r} is not valid: {problem}")
            event = card_event(self._adaptor, card, gone=gone)
            return self._transport.publish(self._topic, event, key=card["id"].encode())
        except Exception as exc:
            failed = asyncio.get_running_loop().create_future()
            failed.set_exception(exc)
            return failed

    def announce_soon(self, card: dict[str, Any]) -> None:
        """Publish ``card`` now, in the background (from the loop); a failure is logged
        and the next heartbeat carries the card anyway."""
        task = asyncio.get_running_loop().create_task(self.announce(card))
        self._sending.add(task)
        task.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("the card of an agent was not published: %s", task.exception())

    async def renew(self, agent_id: str) -> None:
        """Publish the card of ``agent_id`` now (its key was just deleted)."""
        for card in self._cards():
            if card["id"] == agent_id:
                await self.announce(card)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        await stop_task(task)
        if self._sending:  # said before the goodbye that follows the stop
            await asyncio.gather(*self._sending, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.beat()

    async def beat(self) -> None:
        """Publish every card at once, then wait for them all: on Kafka the heartbeat
        is one record batch per registry partition, not one produce request (and one
        wake-up of every registry reader) per agent, so an idle process's cost grows
        little with its agents. A failure is logged once per beat; the next beat
        carries the cards again."""
        cards = self._cards()
        sent = [self._publish(card) for card in cards]
        failed: list[str] = []
        first: BaseException | None = None
        for card, acknowledged in zip(cards, sent, strict=True):
            try:
                await acknowledged
            except Exception as exc:
                failed.append(card["id"])
                first = first or exc
        if failed:
            log.warning(
                "heartbeat: %d of %d cards not published (%s first): %s",
                len(failed),
                len(cards),
                failed[0],
                first,
            )
