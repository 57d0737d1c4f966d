"""Discovery: agent cards on the compacted registry topic, heartbeats, expiry.

Every hosted agent publishes its card (keyed by agent id) when it starts and
every ``heartbeat`` seconds, and a "gone" event when it stops. Every bus reads
the registry from the beginning into a :class:`Directory`, and starts only once
it has read up to the registry's end as of its start
(:func:`a2a_bus.discovery.registry.follow_registry`),
so its first request routed by method already sees every live agent. A card
not renewed within ``ttl`` seconds is expired (its process died without saying
so). The bus answers ``methods/list`` and ``agent/card/get`` from that view,
and refuses messages to agents it does not know (:meth:`Directory.known`).

Reading the registry topic into the view, and reporting what on it is no
card, is :mod:`a2a_bus.discovery.registry`'s.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol import Adaptor, ErrorCode, error_response, ext, new_event, result_response
from a2a_bus.runtime.loops import stop_task
from a2a_bus.transport.base import Delivery, Transport, Undecodable

log = logging.getLogger(__name__)

CARD_SUFFIX = ".agent.card"
#: A card's ``status``: every replica runs; some do not run (a start failed, they are
#: restarted, or they gave up starting); all gave up (``failure`` says why).
RUNNING = "running"
DEGRADED = "degraded"
FAILED = "failed"
GONE_SUFFIX = ".agent.gone"
#: Methods the bus answers itself (from its directory) when a request names no agent.
BUILTIN_METHODS = frozenset({"methods/list", "agent/card/get"})
REQUIRE_KNOWN_ENV = "A2A_REQUIRE_KNOWN_AGENTS"


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


class Directory:
    """The live agent cards this process knows, local ones first."""

    def __init__(self, adaptor: Adaptor, ttl: float, clock: Callable[[], float] = time.time):
        self._adaptor = adaptor
        self.ttl = ttl
        self._clock = clock
        self._remote: dict[str, dict[str, Any]] = {}
        self._local: dict[str, dict[str, Any]] = {}
        #: Agents hosted here that are starting (known before their first card).
        self._starting: set[str] = set()
        #: Last heartbeat seen per agent, kept when it says goodbye (see known()).
        self._seen: dict[str, float] = {}
        #: Next registry offset to apply per partition, and the ends awaited.
        self._applied: dict[int, int] = {}
        self._wanted: dict[int, int] = {}
        self._reached: asyncio.Event | None = None

    def add_local(self, card: dict[str, Any]) -> None:
        self._local[card["id"]] = card
        self._starting.discard(card["id"])

    def expect_local(self, agent_id: str) -> None:
        """``agent_id`` is starting in this process: known already."""
        self._starting.add(agent_id)

    def remove_local(self, agent_id: str) -> None:
        self._local.pop(agent_id, None)
        self._starting.discard(agent_id)

    def hosts(self, agent_id: str) -> bool:
        """True when ``agent_id`` runs in this process."""
        return agent_id in self._local

    def failed_here(self) -> dict[str, str]:
        """The agents hosted here whose card says they failed, with why."""
        return {
            agent_id: str(card.get("failure", "failed"))
            for agent_id, card in self._local.items()
            if card.get("status") == FAILED
        }

    # -- the registry topic ---------------------------------------------------------

    async def on_registry(self, delivery: Delivery) -> None:
        """Handler of the registry topic."""
        event = delivery.event
        kind = event.get_type()
        if kind.endswith(GONE_SUFFIX):
            key = event.get_extension(ext.PARTITION_KEY)
            if isinstance(key, str):
                self._remote.pop(key, None)
        elif kind.endswith(CARD_SUFFIX):
            card = event.get_data()
            if isinstance(card, dict) and isinstance(card.get("id"), str):
                self._remote[card["id"]] = card
                seen = card.get("heartbeatAt")
                if isinstance(seen, int | float):
                    self._seen[card["id"]] = seen
        self._applied_up_to(delivery.partition, delivery.offset)

    async def on_undecodable(self, record: Undecodable) -> None:
        """A registry record that held no card (or a tombstone) still counts as read."""
        self._applied_up_to(record.partition, record.offset)

    def _applied_up_to(self, partition: int, offset: int) -> None:
        if offset >= self._applied.get(partition, 0):
            self._applied[partition] = offset + 1
        if self._reached is not None and self._has_reached():
            self._reached.set()

    def _has_reached(self) -> bool:
        applied = self._applied
        return all(applied.get(p, 0) >= end for p, end in self._wanted.items())

    async def reach(self, ends: Mapping[int, int]) -> None:
        """Return once the registry was applied up to ``ends`` (next offset per
        partition, as a read's position gives them)."""
        self._wanted = {p: end for p, end in ends.items() if end > 0}
        self._reached = asyncio.Event()
        if self._has_reached():
            return
        await self._reached.wait()

    # -- views ----------------------------------------------------------------------

    def _alive(self, card: dict[str, Any]) -> bool:
        seen = card.get("heartbeatAt")
        return isinstance(seen, int | float) and self._clock() - seen <= self.ttl

    def known(self, agent_id: str) -> bool:
        """True for an agent hosted here (also while it starts) and for one whose
        card was renewed within two TTLs: a live card, or one that expired or said
        goodbye a moment ago (a restarting agent, or one replica of several
        stopping), so its messages wait in its topic rather than being refused."""
        if agent_id in self._local or agent_id in self._starting:
            return True
        seen = self._seen.get(agent_id)
        return seen is not None and self._clock() - seen <= 2 * self.ttl

    def lacks(self, agent_id: str, method: str) -> bool:
        """True when the live card of ``agent_id`` says it has no ``method`` (the
        built-in methods every agent answers aside); False when no card says so."""
        card = self.card(agent_id)
        if card is None or method in BUILTIN_METHODS:
            return False
        return all(entry.get("name") != method for entry in card.get("methods", ()))

    def card(self, agent_id: str) -> dict[str, Any] | None:
        """The card of a live agent, or None (unknown or expired)."""
        local = self._local.get(agent_id)
        if local is not None:
            return local
        card = self._remote.get(agent_id)
        return card if card is not None and self._alive(card) else None

    def cards(self) -> list[dict[str, Any]]:
        """Every live card, local first, then by id."""
        remote = [
            card
            for agent_id, card in sorted(self._remote.items())
            if agent_id not in self._local and self._alive(card)
        ]
        return [*self._local.values(), *remote]

    def method_owner(self, method: str) -> str | None:
        """The agent that declares ``method`` (local agents first, then by id)."""
        for card in self.cards():
            if any(m.get("name") == method for m in card.get("methods", ())):
                return str(card["id"])
        return None

    def methods(self) -> list[dict[str, Any]]:
        """``methods/list``: every method of every live agent, with its schemas."""
        return [
            {"agent": card["id"], **entry}
            for card in self.cards()
            for entry in card.get("methods", ())
        ]

    def answer(self, method: str, params: Any, id: Any) -> dict[str, Any]:
        """The response to a request of one of the :data:`BUILTIN_METHODS`."""
        if method == "methods/list":
            return result_response({"methods": self.methods()}, id)
        agent_id = None
        if isinstance(params, dict):
            agent_id = params.get("agentId", params.get("agent_id", params.get("id")))
        elif isinstance(params, list) and params:
            agent_id = params[0]
        if not isinstance(agent_id, str):
            return error_response(
                ErrorCode.INVALID_PARAMS, "Invalid params", id, "agentId required"
            )
        card = self.card(agent_id)
        if card is None:
            return error_response(ErrorCode.AGENT_UNAVAILABLE, "Agent not found", id, agent_id)
        return result_response(card, id)
