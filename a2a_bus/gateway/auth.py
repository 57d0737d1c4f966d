"""Bearer tokens and per-token allow-lists of agents, methods and topics."""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from typing import Any

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.core.routing import RoutingError, is_wildcard, subject_matches, validate_subject
from a2a_bus.protocol import ext

Patterns = tuple[str, ...] | None

#: Beyond this many expansions a wildcard request is refused rather than checked.
_MAX_EXPANSIONS = 4096


def _patterns(value: Any, what: str) -> Patterns:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ValueError(f"{what} must be a list of names or glob patterns")
    return tuple(str(item) for item in value)


def _allowed(patterns: Patterns, name: str) -> bool:
    return patterns is None or any(fnmatchcase(name, p) for p in patterns)


def _check_topic_patterns(patterns: Patterns) -> None:
    for pattern in patterns or ():
        try:
            validate_subject(pattern, wildcards=True)
        except RoutingError as exc:
            raise ValueError(
                f"topics: {exc.message} (patterns are subjects where '*' is one segment "
                "and '#' one or more)"
            ) from None


def covers(pattern: str, subject: str) -> bool:
    """True when ``pattern`` matches every subject that ``subject`` selects.

    A plain subject is matched with the bus's own subject matcher. A wildcard one is
    expanded into the subjects that decide the answer: each ``*`` becomes a segment
    no literal of the pattern equals (any other segment can only match more), each
    ``#`` a run of 1 to len(pattern)+1 such segments (a longer run matches exactly
    when that one does, since the pattern can only absorb it with a ``#``).
    """
    if not is_wildcard(subject):
        return subject_matches(pattern, subject)
    literals = pattern.split(".")
    fresh = "-" * (max(map(len, literals)) + 1)
    runs = [".".join([fresh] * n) for n in range(1, len(literals) + 2)]
    choices = [[fresh] if s == "*" else runs if s == "#" else [s] for s in subject.split(".")]
    if math.prod(map(len, choices)) > _MAX_EXPANSIONS:
        return False
    return all(subject_matches(pattern, ".".join(parts)) for parts in itertools.product(*choices))


@dataclass(frozen=True)
class Access:
    """What one token may reach. ``None`` allows all.

    Agent and method patterns are shell globs (``billing-*``, ``orders/*``); topic
    patterns are subjects with the bus's wildcards (``orders.*`` one segment,
    ``orders.#`` one or more), checked at construction.
    """

    name: str = "anonymous"
    agents: Patterns = None
    methods: Patterns = None
    topics: Patterns = None
    #: Who holds the token, unique per token (set by :class:`Authenticator`); what a
    #: token owns (A2A tasks, conversations) is keyed by it, not by the shared ``name``.
    owner: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        _check_topic_patterns(self.topics)

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any], fallback_name: str = "token") -> Access:
        unknown = set(entry) - {"name", "agents", "methods", "topics"}
        if unknown:
            raise ValueError(f"unknown allow-list keys: {', '.join(sorted(unknown))}")
        return cls(
            name=str(entry.get("name") or fallback_name),
            agents=_patterns(entry.get("agents"), "agents"),
            methods=_patterns(entry.get("methods"), "methods"),
            topics=_patterns(entry.get("topics"), "topics"),
        )

    @property
    def identity(self) -> str:
        """The owner key of what this token makes: ``owner``, else its ``name``."""
        return self.owner or self.name

    @property
    def unrestricted(self) -> bool:
        return self.agents is None and self.methods is None and self.topics is None

    def may_see_agent(self, agent_id: str) -> bool:
        return _allowed(self.agents, agent_id)

    def may_see_topic(self, subject: str) -> bool:
        """True when the token's topic patterns cover ``subject`` (wildcards allowed)."""
        return self.topics is None or any(covers(p, subject) for p in self.topics)

    def denies(self, event: CloudEvent, agent: str | None) -> str | None:
        """Why this token may not send ``event`` (routed to ``agent``), or None."""
        if self.unrestricted:
            return None
        # Methods are those of JSON-RPC calls; native events are held to topics and agents.
        method = event.get_extension(ext.METHOD)
        if isinstance(method, str) and not _allowed(self.methods, method):
            return f"method {method!r} is not allowed for this token"
        subject = event.get_subject()
        if subject is not None and not self.may_see_topic(subject):
            return f"topic {subject!r} is not allowed for this token"
        # An event that no agent receives (unknown method) reaches nobody: the bus
        # answers it, so only a resolved agent is checked.
        if agent is not None and not _allowed(self.agents, agent):
            return f"agent {agent!r} is not allowed for this token"
        return None


#: The access of every caller when no tokens are configured.
OPEN = Access(name="open")


class Authenticator:
    """Resolves ``Authorization: Bearer <token>`` to an :class:`Access`.

    Tokens are kept as SHA-256 digests, so lookups do not compare secrets
    character by character.
    """

    def __init__(self, tokens: Mapping[str, Access]) -> None:
        self._by_digest = {
            digest: replace(access, owner=digest.hex()[:32])
            for digest, access in ((_digest(token), access) for token, access in tokens.items())
        }

    @property
    def enabled(self) -> bool:
        return bool(self._by_digest)

    def authenticate(self, authorization: str | None) -> Access | None:
        """The caller's access, or None when a valid token is required and missing."""
        if not self._by_digest:
            return OPEN
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self._by_digest.get(_digest(token.strip()))


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()
