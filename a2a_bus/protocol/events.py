"""CloudEvents as the bus carries them: the SDK's v1 event, built fast when trusted.

Handlers receive :class:`cloudevents.core.v1.event.CloudEvent`. Its constructor
validates every attribute, which costs more than the whole JSON-RPC mapping; the
adaptor builds attributes that are valid by construction, so it uses
:func:`new_event`. Events that arrive from outside go through
:func:`validated_event`, which applies the SDK's rules and turns a violation into
a :class:`ProtocolError`; the HTTP binding adds :func:`check_strings` (CloudEvents
forbids control characters in strings, which the SDK does not check).
"""

from __future__ import annotations

import base64
import binascii
import itertools
import re
import secrets
import uuid
from datetime import datetime
from typing import Any, Final

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol.constants import SPECVERSION, ext
from a2a_bus.protocol.errors import ProtocolError

EventData = dict[str, Any] | list[Any] | str | bytes | int | float | bool | None

_new = object.__new__
# Unique per process start; a counter after it is far cheaper than uuid4 per event.
_ID_PREFIX = uuid.uuid4().hex[:20]
_id_counter = itertools.count(1)


def new_id() -> str:
    """A fresh event id, unique across processes (random prefix) and within one (counter)."""
    return f"{_ID_PREFIX}-{next(_id_counter)}"


def new_session_id() -> str:
    """A fresh stream session id: 128 random bits, 22 URL-safe characters.

    Not :func:`new_id`, which is unique but guessable: an agent knows a caller's
    stream by its session id and method alone, so whoever knew the id could feed,
    end or abort someone else's stream.
    """
    return secrets.token_urlsafe(16)


def new_event(attributes: dict[str, Any], data: Any = None) -> CloudEvent:
    """Build an event from attributes known to be valid, without re-validating them.

    ``specversion`` and ``id`` are filled in when missing. The dict is adopted, not copied.
    """
    if "specversion" not in attributes:
        attributes["specversion"] = SPECVERSION
    if "id" not in attributes:
        attributes["id"] = new_id()
    return adopt_event(attributes, data)


def adopt_event(attributes: dict[str, Any], data: Any = None) -> CloudEvent:
    """Wrap complete, valid attributes as an event: no defaults, no checks, no copy."""
    event = _new(CloudEvent)
    event._attributes = attributes
    event._data = data
    return event


_REQUIRED = ("id", "source", "type")
_OPTIONAL_TEXT = ("subject", "datacontenttype", "dataschema")
_CONTEXT = frozenset({"specversion", "time", *_REQUIRED, *_OPTIONAL_TEXT})
_EXTENSION_NAME = re.compile(r"[a-z0-9]+")
# The context attribute names and the extension names seen valid before, so that
# the names of an event are checked at once; the set stays small (names, not values).
_known_names: set[str] = set(_CONTEXT)
_MAX_KNOWN_NAMES = len(_CONTEXT) + 1024


#: Attributes no publisher sets as an extension: the event's origin, its place and
#: its content, and what the bus itself routes and answers by (``id`` it may set).
PUBLISHER_RESERVED: Final = frozenset(
    {
        "specversion", "source", "type", "subject", "datacontenttype", "data",
        "data_base64", ext.TARGET_AGENT, ext.REPLY_TO, ext.MCPTYPE, ext.METHOD,
        ext.SEQ, ext.SESSION, ext.PROTOCOL, ext.CALLDEPTH, ext.CALLCHAIN, ext.TASK_ID,
    }
)  # fmt: skip
_INT_RANGE = range(-(2**63), 2**64)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# RFC 3339's date-time (section 5.6; ABNF strings are case-insensitive): ASCII digits only.
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})"
)


def extension_problem(name: str, value: Any) -> str | None:
    """Why an event published on a subject may not carry extension ``name`` =
    ``value`` (None: it may): a name CloudEvents refuses, one the bus sets itself
    (``targetagent`` would take the event off its subject to an agent), or a value
    that is no string, integer or boolean (a dict would arrive as its repr)."""
    if type(name) is not str or not _EXTENSION_NAME.fullmatch(name):
        return f"invalid extension attribute name {name!r}: lowercase a-z and 0-9 only"
    if name in PUBLISHER_RESERVED:
        return f"{name!r} is the bus's to set, not a publisher's"
    if name == "id":  # a publisher's own id: copies of one event are then skipped as one
        return None if type(value) is str and value else "id must be a non-empty string"
    if type(value) is str or type(value) is bool or (type(value) is int and value in _INT_RANGE):
        return None
    return f"extension {name!r} must be a string, a 64-bit integer or a boolean, not {value!r:.60}"


def check_attributes(attributes: dict[str, Any]) -> None:
    """Raise :class:`ProtocolError` unless ``attributes`` make a valid CloudEvent 1.0.

    The rules are the SDK's (``CloudEvent._validate_attribute``); they are checked
    here because the SDK gathers every error into exception objects first, which
    costs more than decoding the whole record on the bus's hot path. A property
    test keeps the two in agreement.
    """
    if attributes.get("specversion") != SPECVERSION:
        raise ProtocolError.invalid(
            f"unsupported specversion {attributes.get('specversion')!r}; expected {SPECVERSION!r}"
        )
    for name in _REQUIRED:
        value = attributes.get(name)
        if type(value) is not str or not value:
            raise ProtocolError.invalid(f"attribute {name!r} must be a non-empty string")
    for name in _OPTIONAL_TEXT:
        if name in attributes:
            value = attributes[name]
            if type(value) is not str or not value:
                raise ProtocolError.invalid(f"attribute {name!r} must be a non-empty string")
    if "time" in attributes:
        value = attributes["time"]
        if not isinstance(value, datetime) or value.tzinfo is None:
            raise ProtocolError.invalid("attribute 'time' must be a timestamp with a time zone")
    if _known_names.issuperset(attributes):
        return
    for name in attributes:
        if name in _known_names:
            continue
        if name == "data" or not _EXTENSION_NAME.fullmatch(name):
            raise ProtocolError.invalid(
                f"invalid extension attribute name {name!r}: lowercase a-z and 0-9 only"
            )
        if len(_known_names) < _MAX_KNOWN_NAMES:
            _known_names.add(name)


def control_character(attributes: dict[str, Any]) -> str | None:
    """Why a string attribute may not be sent as is (it holds a control character),
    else None.

    CloudEvents 1.0 (Type System, String) forbids U+0000-U+001F and U+007F-U+009F;
    the SDK does not check it. Events from outside are checked where they come in
    (the HTTP binding, the Kafka ingress), so that a newline or NUL never reaches a
    log line or a header.
    """
    for name, value in attributes.items():
        if isinstance(value, str):
            found = _CONTROL.search(value)
            if found is not None:
                return (
                    f"attribute {name!r} holds the control character {found.group()!r}, "
                    "which CloudEvents strings may not"
                )
    return None


def check_strings(attributes: dict[str, Any]) -> None:
    """Raise :class:`ProtocolError` if a string attribute holds a control character
    (see :func:`control_character`)."""
    problem = control_character(attributes)
    if problem is not None:
        raise ProtocolError.invalid(problem)


def validated_event(attributes: dict[str, Any], data: Any = None) -> CloudEvent:
    """Build an event from untrusted attributes, checked as the SDK would check them.

    Unlike the SDK's constructor this stamps no ``time`` the sender never set:
    pass-through keeps attributes as they came.
    """
    if "time" in attributes and isinstance(attributes["time"], str):
        attributes["time"] = parse_time(attributes["time"])
    check_attributes(attributes)
    return adopt_event(attributes, data)  # checked: specversion and id are there


def parse_time(value: str) -> datetime:
    """Parse an RFC 3339 timestamp: date ``T`` time, fractional seconds optional,
    ``Z`` or an offset (``T`` and ``Z`` in either case, as RFC 3339 allows).

    ``datetime.fromisoformat`` alone takes more of ISO 8601 (a bare date, the basic
    form ``20261205T000000Z``, no offset), which CloudEvents does not.
    """
    if _RFC3339.fullmatch(value) is None:
        raise ProtocolError.invalid(f"attribute 'time' is not an RFC 3339 timestamp: {value!r:.80}")
    try:
        return datetime.fromisoformat(value.upper())
    except ValueError:  # the form is right, a field is out of range (month 13, second 60)
        detail = f"attribute 'time' is not a valid timestamp: {value!r:.80}"
        raise ProtocolError.invalid(detail) from None


def format_time(value: datetime) -> str:
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def decode_base64(value: Any) -> bytes:
    if not isinstance(value, str):
        raise ProtocolError.invalid("'data_base64' must be a string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ProtocolError.invalid("'data_base64' is not valid base64") from None


def events_equal(a: CloudEvent, b: CloudEvent) -> bool:
    """True when both events have the same attributes and data."""
    return a.get_attributes() == b.get_attributes() and a.get_data() == b.get_data()
