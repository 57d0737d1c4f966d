"""CloudEvents as the bus carries them: the SDK's v1 event, built fast when trusted.

Handlers receive :class:`cloudevents.core.v1.event.CloudEvent`. Its constructor
validates every attribute, which costs more than the whole JSON-RPC mapping; the
adaptor builds attributes that are valid by construction, so it uses
:func:`new_event`. Events that arrive from outside go through
:func:`validated_event`, which keeps the SDK's checks and turns their failures
into a :class:`ProtocolError`.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import uuid
from datetime import datetime
from typing import Any

from cloudevents.core.exceptions import BaseCloudEventException
from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol.constants import SPECVERSION
from a2a_bus.protocol.errors import ProtocolError

EventData = dict[str, Any] | list[Any] | str | bytes | int | float | bool | None

_new = object.__new__
# Unique per process start; a counter after it is far cheaper than uuid4 per event.
_ID_PREFIX = uuid.uuid4().hex[:20]
_id_counter = itertools.count(1)


def new_id() -> str:
    """A fresh event id, unique across processes (random prefix) and within one (counter)."""
    return f"{_ID_PREFIX}-{next(_id_counter)}"


def new_event(attributes: dict[str, Any], data: Any = None) -> CloudEvent:
    """Build an event from attributes known to be valid, without re-validating them.

    ``specversion`` and ``id`` are filled in when missing. The dict is adopted, not copied.
    """
    if "specversion" not in attributes:
        attributes["specversion"] = SPECVERSION
    if "id" not in attributes:
        attributes["id"] = new_id()
    event = _new(CloudEvent)
    event._attributes = attributes
    event._data = data
    return event


def validated_event(attributes: dict[str, Any], data: Any = None) -> CloudEvent:
    """Build an event from untrusted attributes with the SDK's full validation."""
    if attributes.get("specversion") != SPECVERSION:
        raise ProtocolError.invalid(
            f"unsupported specversion {attributes.get('specversion')!r}; expected {SPECVERSION!r}"
        )
    for name in ("id", "source", "type"):
        if name not in attributes:
            raise ProtocolError.invalid(f"missing required attribute {name!r}")
    if "time" in attributes and isinstance(attributes["time"], str):
        attributes["time"] = parse_time(attributes["time"])
    try:
        # The SDK's own checks; its constructor would also stamp a ``time`` the
        # sender never set, and pass-through must keep attributes as they came.
        CloudEvent._validate_attribute(attributes)
    except BaseCloudEventException as exc:
        raise ProtocolError.invalid(f"invalid CloudEvent: {exc}") from None
    return new_event(attributes, data)


def parse_time(value: str) -> datetime:
    """Parse an RFC 3339 timestamp (``Z`` or an offset)."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        detail = f"attribute 'time' is not an RFC 3339 timestamp: {value!r}"
        raise ProtocolError.invalid(detail) from None
    if parsed.tzinfo is None:
        raise ProtocolError.invalid("attribute 'time' must carry a time zone")
    return parsed


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
