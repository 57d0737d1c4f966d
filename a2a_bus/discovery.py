"""Discovery: agent cards on the compacted registry topic, heartbeats, expiry.

Every hosted agent publishes its card (keyed by agent id) when it starts and
every ``heartbeat`` seconds, and a "gone" event when it stops. Every bus reads
the registry from the beginning into a :class:`Directory`; a card not renewed
within ``ttl`` seconds is expired (its process died without saying so). The
bus answers ``methods/list`` and ``agent/card/get`` from that view.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol import Adaptor, ext, new_event
from a2a_bus.transport.base import Delivery

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


class Directory:
    """The live agent cards this process knows, local ones first."""

    def __init__(self, adaptor: Adaptor, ttl: float, clock: Callable[[], float] = time.time):
        self._adaptor = adaptor
        self.ttl = ttl
        self._clock = clock
        self._remote: dict[str, dict[str, Any]] = {}
        self._local: dict[str, dict[str, Any]] = {}

    def add_local(self, card: dict[str, Any]) -> None:
        self._local[card["id"]] = card

    def remove_local(self, agent_id: str) -> None:
        self._local.pop(agent_id, None)

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

    def _alive(self, card: dict[str, Any]) -> bool:
        seen = card.get("heartbeatAt")
        return isinstance(seen, int | float) and self._clock() - seen <= self.ttl

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
