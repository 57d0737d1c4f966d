"""What a card must hold before a directory takes it.

The registry topic is open to any producer that may write to it, so a card read
from it is checked before routing, ``methods/list``, ``GET /agents`` or the A2A
cards read it: every field they read has the type they expect, the agent id can
name a topic, each method name is one an agent may declare, and the card nests
no deeper than the JSON writers of the answers that carry it can go. A card this
process builds from its own agents passes; what else a field holds (an unknown
field, a description) is the agent's own business.
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard

from a2a_bus.protocol.jsonrpc import RESERVED_METHOD_PREFIX
from a2a_bus.transport.base import MAX_TOPIC_CHARS, TOPIC_NAME_CHARS

#: Methods the bus answers itself (from its directory) when a request names no agent.
BUILTIN_METHODS = frozenset({"methods/list", "agent/card/get"})

#: The longest agent id whose topic (``<prefix>.agent.<id>``) fits, for a
#: one-character prefix; a longer prefix makes routing refuse long ids (-32600).
MAX_AGENT_ID_CHARS = MAX_TOPIC_CHARS - len("a.agent.")
#: How deep a card may nest (the card itself is level 1). Answers carry a card a few
#: levels down (an event's data, a JSON-RPC result, a list), and orjson writes no
#: more than 254 levels: a deeper card would fail every listing that holds it.
MAX_DEPTH = 64
_OPTIONAL_TEXT = ("description", "version", "node", "status", "failure")
_OPTIONAL_METHOD_TEXT = ("description", "streaming", "streamParam")
_OPTIONAL_SCHEMAS = ("params", "result")


def card_problem(card: Any, agent_id: str | None) -> str | None:
    """Why ``card``, read for the registry key ``agent_id``, is no card a directory
    may hold (None: it may)."""
    if not isinstance(card, dict):
        return f"the card is a JSON {_kind(card)}, not an object"
    card_id = card.get("id")
    if not isinstance(card_id, str) or not TOPIC_NAME_CHARS.fullmatch(card_id):
        return f"its id {_shown(card_id)} is no agent id (one or more of [A-Za-z0-9._-])"
    if len(card_id) > MAX_AGENT_ID_CHARS:
        return f"its id has {len(card_id)} characters, more than {MAX_AGENT_ID_CHARS}"
    if card_id != agent_id:
        key = "no key that is text" if agent_id is None else f"the key {_shown(agent_id)}"
        return f"its id {card_id!r} is not its record's key: the record has {key}"
    problem = heartbeat_problem(card) or _fields(card, _OPTIONAL_TEXT)
    problem = problem or _methods(card.get("methods"))
    if problem is not None:
        return problem
    subscriptions = card.get("subscriptions", [])
    if not isinstance(subscriptions, list) or not all(isinstance(s, str) for s in subscriptions):
        return f"its subscriptions {_shown(subscriptions)} are no list of strings"
    replicas = card.get("replicas", 0)
    if type(replicas) is not int or replicas < 0:
        return f"its replicas {_shown(replicas)} are no whole number from 0"
    if _deeper_than(card, MAX_DEPTH):
        return f"it nests deeper than {MAX_DEPTH} levels"
    return None


def heartbeat_problem(card: dict[str, Any]) -> str | None:
    """Why the card's ``heartbeatAt`` is no moment (None: it is one)."""
    seen = card.get("heartbeatAt")
    if not isinstance(seen, int | float) or isinstance(seen, bool) or not math.isfinite(seen):
        return f"its heartbeatAt {_shown(seen)} is no finite number of seconds"
    return None


def renewed(card: Any, held: dict[str, Any]) -> TypeGuard[dict[str, Any]]:
    """True when ``card`` is ``held`` (a card already taken) but for its heartbeat:
    a heartbeat's card, whose other fields need no checking again. Every card is
    read again each heartbeat, so this keeps a thousand idle agents cheap."""
    if type(card) is not dict or len(card) != len(held):
        return False
    return all(key == "heartbeatAt" or card.get(key) == value for key, value in held.items())


def _methods(methods: Any) -> str | None:
    if not isinstance(methods, list):
        return f"its methods {_shown(methods)} are no list"
    for entry in methods:
        if not isinstance(entry, dict):
            return f"a method {_shown(entry)} is no object"
        name = entry.get("name")
        problem = method_name_problem(name)
        if problem is not None:
            return f"a method's name {_shown(name)} {problem}"
        problem = _fields(entry, _OPTIONAL_METHOD_TEXT, f"method {name!r}: ")
        if problem is not None:
            return problem
        for field in _OPTIONAL_SCHEMAS:
            schema = entry.get(field, {})
            if not isinstance(schema, dict) or not isinstance(schema.get("properties", {}), dict):
                return f"method {name!r}: its {field} {_shown(schema)} are no JSON Schema object"
    return None


def method_name_problem(name: Any) -> str | None:
    """Why ``name`` is no method an agent may declare, else None: what no caller could
    call as one method (a space or a control character: a description, most
    likely), what JSON-RPC reserves, or what the bus answers for every agent."""
    if not isinstance(name, str) or not name:
        return "is no non-empty string"
    if name.startswith(RESERVED_METHOD_PREFIX):
        return f"begins with {RESERVED_METHOD_PREFIX!r}, which JSON-RPC reserves"
    if name in BUILTIN_METHODS:
        return "is one the bus answers for every agent"
    if any(char.isspace() or not char.isprintable() for char in name):
        return "holds a space or a control character"
    return None


def _fields(holder: dict[str, Any], names: tuple[str, ...], where: str = "") -> str | None:
    """Why one of the optional text fields ``names`` of ``holder`` is no string."""
    for name in names:
        value = holder.get(name)
        if value is not None and not isinstance(value, str):
            return f"{where}its {name} {_shown(value)} is no string"
    return None


def _deeper_than(value: Any, limit: int) -> bool:
    """True when ``value`` nests more than ``limit`` levels (without recursion)."""
    level: list[Any] = [value]
    for _ in range(limit):
        deeper: list[Any] = []
        for item in level:
            if isinstance(item, dict):
                deeper.extend(item.values())
            elif isinstance(item, list):
                deeper.extend(item)
        if not deeper:
            return False
        level = deeper
    return any(isinstance(item, dict | list) for item in level)


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if value is None:
        return "null"
    return "string" if isinstance(value, str) else type(value).__name__


def _shown(value: Any) -> str:
    """``value`` for a one-line reason: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
