"""Discovery: agent cards on the compacted registry topic, heartbeats, expiry.

Every hosted agent publishes its card (keyed by agent id) when it starts and
every ``heartbeat`` seconds, and a "gone" event when it stops
(:class:`~a2a_bus.discovery.announcer.Announcer`). Every bus reads
the registry from the beginning into a :class:`Directory`, and starts only once
it has read up to the registry's end as of its start
(:func:`a2a_bus.discovery.registry.follow_registry`),
so its first request routed by method already sees every live agent. A card
not renewed within ``ttl`` seconds is expired (its process died without saying
so). The bus answers ``methods/list`` and ``agent/card/get`` from that view,
and refuses messages to agents it does not know (:meth:`Directory.known`).

Anyone who may write to the registry can write anything on it: a card is
checked before the view takes it (:mod:`a2a_bus.discovery.cards`), and the view
holds a bounded number of agents. Reading the registry topic into the view, and
reporting what on it is no card, is :mod:`a2a_bus.discovery.registry`'s.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, cast

from a2a_bus.discovery.announcer import CARD_SUFFIX, GONE_SUFFIX
from a2a_bus.discovery.cards import (
    BUILTIN_METHODS,
    card_problem,
    heartbeat_problem,
    renewed,
)
from a2a_bus.protocol import Adaptor, ErrorCode, error_response, ext, result_response
from a2a_bus.runtime.rate_limited import RateLimitedLog
from a2a_bus.transport.base import Delivery

log = logging.getLogger(__name__)

#: A card's ``status``: every replica runs; some do not run (a start failed, they are
#: restarted, or they gave up starting); all gave up (``failure`` says why).
RUNNING = "running"
DEGRADED = "degraded"
FAILED = "failed"
REQUIRE_KNOWN_ENV = "A2A_REQUIRE_KNOWN_AGENTS"


class Remote(NamedTuple):
    """A card read from the registry, with the names of its methods."""

    card: dict[str, Any]
    methods: frozenset[str]


class Directory:
    """The live agent cards this process knows, local ones first.

    Cards read from the registry (:meth:`apply`) are checked first
    (:func:`~a2a_bus.discovery.cards.card_problem`). At most :attr:`max_agents`
    of them are held: an agent is forgotten two TTLs after its last heartbeat, and
    while the directory is full a card of a new agent is skipped (logged), so its
    memory stays bounded however many agent ids are written to the registry.
    """

    #: Agents read from the registry held at most (those seen within two TTLs).
    max_agents = 10_000

    def __init__(self, adaptor: Adaptor, ttl: float, clock: Callable[[], float] = time.time):
        self._adaptor = adaptor
        self.ttl = ttl
        self._clock = clock
        self._remote: dict[str, Remote] = {}
        #: Method -> the agents whose card read from the registry declares it.
        self._claims: dict[str, set[str]] = {}
        self._local: dict[str, dict[str, Any]] = {}
        #: Agents hosted here that are starting (known before their first card).
        self._starting: set[str] = set()
        #: Last heartbeat seen per agent on the registry (never later than when its
        #: card was read), kept when it says goodbye (see known()).
        self._seen: dict[str, float] = {}
        self._next_prune = -math.inf
        #: The warning of a full directory: once, then a count a minute while it lasts.
        self._full = RateLimitedLog(
            log, "%d more cards skipped: the %s is still full (since %s)", burst=1, interval=60.0
        )
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

    def apply(self, delivery: Delivery) -> str | None:
        """Apply a card or "gone" event read from the registry. Why it is no valid
        one (nothing is applied then), else None; other events are ignored."""
        event = delivery.event
        kind = event.get_type()
        gone = kind.endswith(GONE_SUFFIX)
        if not gone and not kind.endswith(CARD_SUFFIX):
            return None
        agent_id = _agent_of(delivery)
        if gone:
            if agent_id is None:
                return "a goodbye that names no agent"
            self._drop(agent_id)
            return None
        card = event.get_data()
        held = self._remote.get(agent_id) if agent_id is not None else None
        if held is not None and renewed(card, held.card):
            problem = heartbeat_problem(card)
        else:
            problem = card_problem(card, agent_id)
        if problem is None:
            self._put(cast("dict[str, Any]", card))  # an object: card_problem says so
        return problem

    def count_read(self, partition: int, offset: int) -> None:
        """The registry record at ``offset`` of ``partition`` was read (applied, or
        no card at all): a start waits for this up to the registry's end."""
        if offset >= self._applied.get(partition, 0):
            self._applied[partition] = offset + 1
        if self._reached is not None and self._has_reached():
            self._reached.set()

    def _put(self, card: dict[str, Any]) -> None:
        agent_id: str = card["id"]
        now = self._clock()
        if now >= self._next_prune:
            self._prune(now)
        seen = card["heartbeatAt"]
        if now - seen > 2 * self.ttl:
            return  # no longer known (a card of an agent long gone, kept by compaction)
        if agent_id not in self._seen and len(self._seen) >= self.max_agents:
            self._full.log(
                "agent directory",
                "agent directory full (%d agents seen on the registry within two TTLs): "
                "the card of %r is skipped until some of them expire",
                len(self._seen),
                agent_id,
            )
            return
        if seen > now:  # a clock ahead, or a card that claims to live for ever
            seen = now
            card = {**card, "heartbeatAt": now}
        names = frozenset(entry["name"] for entry in card["methods"])
        old = self._remote.get(agent_id)
        if old is None or old.methods != names:
            self._drop(agent_id)
            for name in names:
                self._claims.setdefault(name, set()).add(agent_id)
        self._remote[agent_id] = Remote(card, names)
        self._seen[agent_id] = seen

    def _drop(self, agent_id: str) -> None:
        """Forget the card of ``agent_id`` (not when it was seen)."""
        remote = self._remote.pop(agent_id, None)
        if remote is None:
            return
        for name in remote.methods:
            claims = self._claims[name]
            claims.discard(agent_id)
            if not claims:
                del self._claims[name]

    def _prune(self, now: float) -> None:
        """Forget the agents not seen within two TTLs (no longer known); at most once
        a TTL, so that a flood of cards costs no scan each."""
        self._next_prune = now + self.ttl
        horizon = now - 2 * self.ttl
        for agent_id in [a for a, seen in self._seen.items() if seen < horizon]:
            del self._seen[agent_id]
            self._drop(agent_id)

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

    def _alive(self, agent_id: str) -> bool:
        seen = self._seen.get(agent_id)
        return seen is not None and self._clock() - seen <= self.ttl

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
        if method in BUILTIN_METHODS:
            return False
        local = self._local.get(agent_id)
        if local is not None:
            return all(entry.get("name") != method for entry in local.get("methods", ()))
        remote = self._remote.get(agent_id)
        return remote is not None and self._alive(agent_id) and method not in remote.methods

    def card(self, agent_id: str) -> dict[str, Any] | None:
        """The card of a live agent, or None (unknown or expired)."""
        local = self._local.get(agent_id)
        if local is not None:
            return local
        remote = self._remote.get(agent_id)
        return remote.card if remote is not None and self._alive(agent_id) else None

    def cards(self) -> list[dict[str, Any]]:
        """Every live card, local first, then by id."""
        remote = [
            self._remote[agent_id].card
            for agent_id in sorted(self._remote)
            if agent_id not in self._local and self._alive(agent_id)
        ]
        return [*self._local.values(), *remote]

    def method_owner(self, method: str) -> str | None:
        """The agent that declares ``method`` (local agents first, then by id)."""
        for card in self._local.values():
            if any(entry.get("name") == method for entry in card.get("methods", ())):
                return str(card["id"])
        claims = self._claims.get(method, ())
        return min((a for a in claims if a not in self._local and self._alive(a)), default=None)

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


def _agent_of(delivery: Delivery) -> str | None:
    """The agent id a registry record is for: its key (the compacted identity), or
    without one (in memory only) the event's partition key."""
    if delivery.key is not None:
        try:
            return delivery.key.decode()
        except UnicodeDecodeError:
            return None
    agent_id = delivery.event.get_extension(ext.PARTITION_KEY)
    return agent_id if isinstance(agent_id, str) else None
