"""The CloudEvents JSON event format, and event data encoding by content type.

orjson does the JSON work; the rules for ``data``/``data_base64`` and for
attribute value types follow the CloudEvents JSON format specification.
"""

from __future__ import annotations

import base64
import re
from datetime import datetime
from typing import Any

import orjson
from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol.errors import ErrorCode, ProtocolError
from a2a_bus.protocol.events import decode_base64, format_time, validated_event
from a2a_bus.protocol.parsing import parse_json

_JSON_CONTENT_TYPE = re.compile(r"^(application|text)/([A-Za-z0-9.+-]+\+)?json(\s*;.*)?$", re.I)
_ATTRIBUTE_TYPES = (str, int, bool)
_BINARY = (bytes, bytearray)


def is_json_content_type(content_type: str | None) -> bool:
    """Absent content type means JSON, as the event format specifies."""
    return content_type is None or _JSON_CONTENT_TYPE.match(content_type) is not None


def encode_data(data: Any, content_type: str | None) -> bytes:
    """Event data as the bytes of a binary-mode message body."""
    if data is None:
        return b""
    if isinstance(data, bytes | bytearray):
        return bytes(data)
    if isinstance(data, str) and not is_json_content_type(content_type):
        return data.encode()
    return orjson.dumps(data)


def decode_data(body: bytes, content_type: str | None) -> Any:
    """The inverse of :func:`encode_data`; JSON that does not parse is an error."""
    if not body:
        return None
    if is_json_content_type(content_type):
        try:
            return parse_json(body)
        except ProtocolError as exc:
            if exc.failure.code != ErrorCode.PARSE_ERROR:
                raise
            raise ProtocolError.parse(f"data is not valid JSON: {exc.failure.data}") from None
    if content_type is not None and content_type.lower().startswith("text/"):
        try:
            return body.decode()
        except UnicodeDecodeError:
            return body
    return body


def to_structured(event: CloudEvent) -> dict[str, Any]:
    """The event as a JSON-format object (what structured mode puts on the wire)."""
    attributes = event.get_attributes()
    out = dict(attributes)  # in one go, then the rare value that is no string fixed
    for name, value in attributes.items():
        if type(value) is not str:
            if value is None:
                del out[name]
            elif isinstance(value, datetime):
                out[name] = format_time(value)
    data = event.get_data()
    if data is not None:
        if isinstance(data, _BINARY):
            out["data_base64"] = base64.b64encode(data).decode()
        else:
            out["data"] = data
    return out


def dump_structured(event: CloudEvent) -> bytes:
    return orjson.dumps(to_structured(event))


def from_structured(obj: Any) -> CloudEvent:
    """Validate a JSON-format object and build the event; raises :class:`ProtocolError`."""
    if type(obj) is not dict:
        raise ProtocolError.invalid("a structured CloudEvent must be a JSON object")
    return _from_object(dict(obj))


def _from_object(attributes: dict[str, Any]) -> CloudEvent:
    """:func:`from_structured` on a JSON object that is the caller's to change."""
    if "data_base64" in attributes:
        if "data" in attributes:
            raise ProtocolError.invalid("an event carries 'data' or 'data_base64', not both")
        data = decode_base64(attributes.pop("data_base64"))
    else:
        data = attributes.pop("data", None)
    for value in attributes.values():
        if type(value) is not str:
            _check_types(attributes)  # the rare attribute that is not a string
            break
    return validated_event(attributes, data)


def _check_types(attributes: dict[str, Any]) -> None:
    """Drop null attributes; refuse values that are no string, integer or boolean."""
    for name in list(attributes):
        value = attributes[name]
        if value is None:
            del attributes[name]
        elif not isinstance(value, _ATTRIBUTE_TYPES):
            kind = type(value).__name__
            raise ProtocolError.invalid(
                f"attribute {name!r} must be a string, integer or boolean, not {kind}"
            )


def load_structured(body: bytes) -> CloudEvent:
    obj = parse_json(body)
    if type(obj) is not dict:
        raise ProtocolError.invalid("a structured CloudEvent must be a JSON object")
    return _from_object(obj)  # parsed here: nobody else holds it
