"""Binary content mode, shared by the HTTP (``ce-``) and Kafka (``ce_``) bindings.

Attributes travel as headers and the data as the message body. Header values are
strings, so the few attributes with a non-string type are restored on the way in:
``time`` becomes a timestamp, ``seq`` and ``calldepth`` integers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, TypeVar

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.protocol.constants import ext
from a2a_bus.protocol.errors import ProtocolError
from a2a_bus.protocol.events import format_time, parse_time, validated_event
from a2a_bus.protocol.formats import decode_data, encode_data

CONTENT_TYPE_HEADER = "content-type"


def attribute_text(value: Any) -> str:
    """An attribute value as header text (booleans in the spec's lowercase)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return format_time(value)
    return str(value)


_TYPED = frozenset({"time", ext.SEQ, ext.CALLDEPTH})
_COUNTS = frozenset({ext.SEQ, ext.CALLDEPTH})
H = TypeVar("H")


def _typed(name: str, text: str) -> Any:
    if name == "time":
        return parse_time(text)
    if name in _COUNTS and text.isascii() and text.isdigit():  # not '²', a digit to Python
        return int(text)
    return text


def encode_binary(
    event: CloudEvent, prefix: str, finish: Callable[[str], H]
) -> tuple[list[tuple[str, H]], bytes]:
    """Headers and body for ``event`` in binary mode; ``finish`` encodes header text."""
    attributes = event.get_attributes()
    headers: list[tuple[str, H]] = []
    content_type = attributes.get("datacontenttype")
    for name, value in attributes.items():
        if value is None or name == "datacontenttype":
            continue
        text = value if type(value) is str else attribute_text(value)
        headers.append((prefix + name, finish(text)))
    if content_type is not None:
        headers.append((CONTENT_TYPE_HEADER, finish(content_type)))
    return headers, encode_data(event.get_data(), content_type)


def decode_binary(
    headers: Iterable[tuple[str, H]],
    body: bytes,
    prefix: str,
    read: Callable[[H], str],
) -> CloudEvent:
    """Rebuild an event from binary-mode headers and body; raises :class:`ProtocolError`.

    ``read`` turns a header value into text (UTF-8 for Kafka, percent-decoding for HTTP);
    a :class:`ValueError` it raises refuses the message, naming the header.
    """
    attributes: dict[str, Any] = {}
    cut = len(prefix)
    try:
        for raw_name, raw_value in headers:
            name = raw_name if raw_name.islower() else raw_name.lower()
            if name.startswith(prefix):
                attr = name[cut:]
                text = read(raw_value)
                attributes[attr] = _typed(attr, text) if attr in _TYPED else text
            elif name == CONTENT_TYPE_HEADER:
                attributes["datacontenttype"] = read(raw_value)
    except ProtocolError:  # a 'time' that is no timestamp: already worded
        raise
    except UnicodeDecodeError:
        raise ProtocolError.invalid(f"header {name!r} is not valid UTF-8") from None
    except ValueError as exc:
        raise ProtocolError.invalid(f"header {name!r} {exc}") from None
    if "specversion" not in attributes:
        raise ProtocolError.invalid(f"not a CloudEvent: no {prefix}specversion header")
    data = decode_data(body, attributes.get("datacontenttype"))
    return validated_event(attributes, data)
