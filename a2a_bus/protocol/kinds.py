"""What an event is: a request, a notification or a response (PROTOCOL.md section 3).

One answer for every part of the bus that must tell them apart (routing, waiting for
an answer, answering on the ingress, the gateway), so no part reads ``mcptype`` alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol.constants import (
    REQUEST_SUFFIX,
    RESPONSE_TYPE_SUFFIX,
    STREAM_SUFFIX,
    ext,
    mcptype,
)
from a2a_bus.protocol.jsonrpc import Kind

_BY_MCPTYPE: dict[object, Kind] = {
    mcptype.REQUEST: Kind.REQUEST,
    mcptype.NOTIFICATION: Kind.NOTIFICATION,
    mcptype.RESPONSE: Kind.RESPONSE,
}
_REQUEST_SUFFIXES = (REQUEST_SUFFIX, STREAM_SUFFIX)
_MCPTYPE = ext.MCPTYPE


def event_kind(event: CloudEvent) -> Kind:
    """``mcptype`` when it holds one of its three values; else the type decides: a
    type ending in ``.req`` or ``.stream`` is a request (a ``.stream`` request is
    answered by a stream), one ending in ``.common.response`` a response, any other
    a notification."""
    return kind_of(event.get_attributes())


def kind_of(attributes: Mapping[str, Any]) -> Kind:
    """:func:`event_kind` of an event's attributes (for code that holds them already)."""
    kind = _BY_MCPTYPE.get(attributes.get(_MCPTYPE))
    if kind is not None:
        return kind
    type_ = attributes.get("type")
    if not isinstance(type_, str):
        return Kind.NOTIFICATION
    if type_.endswith(_REQUEST_SUFFIXES):
        return Kind.REQUEST
    if type_.endswith(RESPONSE_TYPE_SUFFIX):
        return Kind.RESPONSE
    return Kind.NOTIFICATION
