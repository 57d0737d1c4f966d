"""Topic naming and route decisions. Pure: no I/O, no threads.

Topic scheme (the ``a2a`` prefix is configurable):

===================  ====================  =========================================
pattern              topic                 consumers
===================  ====================  =========================================
P2P to agent X       ``a2a.agent.X``       group per agent id (replicas share load)
pub/sub subject S    ``a2a.topic.S``       group per subscribing agent (fan-out)
reply to a caller    ``a2a.reply.<node>``  the calling process only
discovery            ``a2a.registry``      compacted, keyed by agent id
raw ingress          ``a2a.ingress``       raw JSON-RPC / CloudEvents from anywhere
dead letters         ``a2a.dlq``           what could not be parsed, routed, handled
===================  ====================  =========================================
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol import (
    ErrorCode,
    JsonRpcError,
    Kind,
    control_character,
    event_kind,
    ext,
    key_of,
    kind_of,
)
from a2a_bus.transport.base import MAX_TOPIC_CHARS, TOPIC_NAME_CHARS, TopicPattern

_SEGMENT = r"[A-Za-z0-9_-]+"
INVALID_REQUEST = ErrorCode.INVALID_REQUEST


class RoutingError(ValueError):
    """An event or a name that cannot be routed; carries a JSON-RPC error code.

    ``message`` reads on its own (``invalid subject 'a b': ...``) for Python callers
    and logs; :meth:`json_rpc_error` is the form to answer with.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def json_rpc_error(self) -> JsonRpcError:
        """The JSON-RPC error: -32600 is ``"Invalid Request"`` with the detail in
        ``data``, as everywhere else; other codes carry their own message and data."""
        if self.code == INVALID_REQUEST and self.data is None:
            return JsonRpcError(INVALID_REQUEST, "Invalid Request", self.message)
        return JsonRpcError(self.code, self.message, self.data)


def validate_name(value: Any, what: str = "agent id") -> str:
    """Return ``value`` if it is a valid agent id / topic name part, else raise."""
    if not isinstance(value, str) or not TOPIC_NAME_CHARS.fullmatch(value):
        raise RoutingError(
            INVALID_REQUEST, f"invalid {what} {value!r}: must match ^{TOPIC_NAME_CHARS.pattern}$"
        )
    return value


def validate_subject(subject: Any, *, wildcards: bool = False) -> str:
    """A dot-separated subject; ``*`` (one segment) and ``#`` (one or more)
    are allowed only when ``wildcards`` is true (subscriptions)."""
    if not isinstance(subject, str) or not subject:
        raise RoutingError(INVALID_REQUEST, f"invalid subject {subject!r}")
    for segment in subject.split("."):
        if wildcards and segment in ("*", "#"):
            continue
        if not re.fullmatch(_SEGMENT, segment):
            raise RoutingError(
                INVALID_REQUEST,
                f"invalid subject {subject!r}: segments are [A-Za-z0-9_-]+"
                + (", '*' or '#'" if wildcards else ""),
            )
    return subject


def is_wildcard(subject: str) -> bool:
    return any(segment in ("*", "#") for segment in subject.split("."))


@dataclass(frozen=True, slots=True)
class Topics:
    """Topic names for one prefix."""

    prefix: str = "a2a"

    def __post_init__(self) -> None:
        validate_name(self.prefix, "topic prefix")

    def agent(self, agent_id: str) -> str:
        return _agent_topic(self.prefix, agent_id)

    def subject(self, subject: str) -> str:
        return bounded(f"{self.prefix}.topic.{validate_subject(subject)}", "subject")

    def reply(self, node: str) -> str:
        return bounded(f"{self.prefix}.reply.{validate_name(node, 'node id')}", "node id")

    @property
    def registry(self) -> str:
        return f"{self.prefix}.registry"

    @property
    def ingress(self) -> str:
        return f"{self.prefix}.ingress"

    @property
    def ingress_reply(self) -> str:
        """Where raw JSON-RPC answers go when the request named no ``reply-to``."""
        return f"{self.prefix}.ingress.reply"

    @property
    def dlq(self) -> str:
        return f"{self.prefix}.dlq"

    @property
    def tasks(self) -> str:
        """The task log: every A2A task's life, keyed by task id (see docs/gateway.md)."""
        return f"{self.prefix}.tasks"

    def subscription(self, subject: str) -> str | TopicPattern:
        """The topic, or the topic pattern for a wildcard subject (``#`` in at most
        :data:`MAX_OPEN_RUNS` places, so that matching a topic stays cheap)."""
        validate_subject(subject, wildcards=True)
        if not is_wildcard(subject):
            return self.subject(subject)
        pattern = bounded(f"{self.prefix}.topic.{subject}", "subject")
        if len(_wildcard_runs(subject.split("."), open_only=True)) > MAX_OPEN_RUNS:
            raise RoutingError(
                INVALID_REQUEST,
                f"invalid subject {subject!r}: '#' may stand in at most {MAX_OPEN_RUNS} "
                "places (wildcards side by side count as one)",
            )
        return TopicPattern(subject_regex(pattern))


@functools.lru_cache(maxsize=4096)
def _agent_topic(prefix: str, agent_id: str) -> str:
    # Cached: every request is routed to an agent's topic.
    return bounded(f"{prefix}.agent.{validate_name(agent_id)}", "agent id")


def bounded(topic: str, what: str) -> str:
    """``topic``, unless it is longer than :data:`MAX_TOPIC_CHARS` (the ``what`` it
    names is then too long: -32600)."""
    if len(topic) > MAX_TOPIC_CHARS:
        raise RoutingError(
            INVALID_REQUEST,
            f"{what} too long: its topic {topic[:40]}... would have {len(topic)} characters, "
            f"more than the {MAX_TOPIC_CHARS} a topic name may have",
        )
    return topic


#: Places a subscription's ``#`` may stand in: each one more multiplies the ways a
#: regex engine tries to split a long topic that does not match (backtracking), and
#: every topic is matched when a subscription starts, and again as topics appear.
MAX_OPEN_RUNS = 2


def _wildcard_runs(segments: list[str], *, open_only: bool = False) -> list[tuple[int, int]]:
    """(start, end) of each run of wildcard segments side by side; with ``open_only``,
    of the runs holding a ``#``."""
    runs, start = [], None
    for index, segment in enumerate([*segments, ""]):
        if segment in ("*", "#"):
            start = index if start is None else start
        elif start is not None:
            if not open_only or "#" in segments[start:index]:
                runs.append((start, index))
            start = None
    return runs


def subject_regex(pattern: str) -> str:
    """``orders.*`` -> a regex matching ``orders.eu`` but not ``orders.eu.x``;
    ``#`` matches one or more segments.

    Wildcards side by side become one count (``#.*.#``: three segments or more), so
    ``#.#.#`` costs no more to match than ``#``."""
    segments = pattern.split(".")
    runs = dict(_wildcard_runs(segments))
    parts, index = [], 0
    while index < len(segments):
        end = runs.get(index)
        if end is None:
            parts.append(re.escape(segments[index]))
            index += 1
            continue
        width = end - index
        if "#" in segments[index:end]:
            parts.append(rf"{_SEGMENT}(?:\.{_SEGMENT}){{{width - 1},}}")
        else:
            parts.extend([_SEGMENT] * width)
        index = end
    return "^" + r"\.".join(parts) + "$"


def subject_matches(pattern: str, subject: str) -> bool:
    return re.match(subject_regex(pattern), subject) is not None


class RouteKind(StrEnum):
    P2P = "p2p"
    PUBSUB = "pubsub"
    BY_METHOD = "by-method"
    REPLY = "reply"


# A member read off its enum class goes through the metaclass's __getattr__ hook
# (about 0.1 us on Python 3.11): the paths every message takes use these.
_RESPONSE, _P2P = Kind.RESPONSE, RouteKind.P2P


class Route(NamedTuple):
    """Where one event goes: the topic and the record key."""

    kind: RouteKind
    topic: str
    key: bytes | None
    agent_id: str | None = None
    subject: str | None = None


def outside_refusal(event: CloudEvent) -> str | None:
    """Why an event from outside the bus may not go on it as sent, else None.

    The bus's outside doors (``POST /events`` and the Kafka ingress) both ask this
    before routing. Only the bus answers requests and says where answers go: an
    outside event that is a response (``event_kind``: ``mcptype`` ``response``, or
    a ``.common.response`` type) would reach a reply topic and answer another
    caller's pending request with a result of its choosing; one that names a
    ``replyto`` would have its answer written on any topic it names (a subject, the
    registry, an agent's inbox, a new topic). A string attribute holding a control
    character (which CloudEvents forbids) would reach log lines and headers as sent.
    """
    if event_kind(event) is Kind.RESPONSE:
        return (
            "a response cannot enter the bus from outside: an agent outside the bus "
            "answers the requests it consumes by producing to Kafka directly"
        )
    attributes = event.get_attributes()
    if ext.REPLY_TO in attributes:
        return (
            f"{ext.REPLY_TO} is set by the bus, not by the sender: ask over POST /rpc, "
            "or over the Kafka ingress with a reply-to header, to get an answer"
        )
    return control_character(attributes)


def decide(
    event: CloudEvent,
    topics: Topics,
    method_owner: Callable[[str], str | None] | None = None,
    kind: Kind | None = None,
) -> Route:
    """Route ``event``: reply, P2P (``targetagent``), pub/sub (``subject``), or
    by method to the agent that declares it (``method_owner``). The record key
    is the protocol's ``record_key``. ``kind``: the event's
    :func:`~a2a_bus.protocol.event_kind`, when the caller knows it already."""
    attributes = event.get_attributes()  # read once: every event is routed
    key = key_of(attributes)
    if (kind_of(attributes) if kind is None else kind) is _RESPONSE:
        reply_to = attributes.get(ext.REPLY_TO)
        if reply_to is None:
            raise RoutingError(INVALID_REQUEST, "response event without a reply topic")
        return Route(RouteKind.REPLY, validate_name(reply_to, "reply topic"), key)
    target = attributes.get(ext.TARGET_AGENT)
    if target is not None:
        if key is None:
            return _unkeyed_p2p(topics.prefix, target)
        return Route(RouteKind.P2P, _agent_topic(topics.prefix, target), key, target)
    subject = attributes.get("subject")
    if subject is not None:
        return Route(RouteKind.PUBSUB, topics.subject(subject), key, subject=subject)
    method = attributes.get(ext.METHOD)
    if not isinstance(method, str):
        raise RoutingError(
            INVALID_REQUEST, "cannot route: no targetagent, subject or method on the event"
        )
    owner = method_owner(method) if method_owner is not None else None
    if owner is None:
        # The JSON-RPC spec's own wording; the method goes in ``data``.
        raise RoutingError(ErrorCode.METHOD_NOT_FOUND, "Method not found", method)
    return Route(RouteKind.BY_METHOD, topics.agent(owner), key, agent_id=owner)


@functools.lru_cache(maxsize=4096)
def _unkeyed_p2p(prefix: str, agent_id: str) -> Route:
    # Cached (a route is immutable): most requests go to an agent without a key.
    return Route(_P2P, _agent_topic(prefix, agent_id), None, agent_id)
