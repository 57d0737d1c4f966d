"""What one message may carry, the same on every transport.

A message's payload (request params, event data, a handler's result, one
stream chunk) must be JSON, or bytes for event data, and at most
:data:`MAX_PAYLOAD_BYTES` of it. Kafka refuses records over 1 MiB; the
in-memory transport would carry anything. Checking the payload where it is
made keeps a program that works embedded working on Kafka, and gives the one
who can fix it a clear error instead of a timeout on the other side.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import orjson

from a2a_bus.errors import JsonRpcError
from a2a_bus.protocol import ErrorCode

#: Bytes of JSON a payload may have: what is left of Kafka's 1 MiB record size
#: (the producer's ``max_request_size``) after a generous allowance for the envelope.
MAX_PAYLOAD_BYTES = 1_000_000


#: The integers orjson writes (64 bits, signed or not); larger ones it refuses.
_INT_MIN, _INT_END = -(1 << 63), 1 << 64


class PayloadError(ValueError):
    """A payload no transport may carry: not JSON, or too large (``too_large``)."""

    def __init__(self, detail: str, *, too_large: bool = False) -> None:
        super().__init__(detail)
        self.detail = detail
        self.too_large = too_large


def check_payload(
    value: Any, what: str, *, binary: bool = False, limit: int = MAX_PAYLOAD_BYTES
) -> None:
    """Raise :class:`PayloadError` unless ``value`` travels as JSON (with ``binary``,
    bytes) in at most ``limit`` bytes; ``what`` names it in the detail.

    Bytes are measured as base64, the form JSON (and so Kafka's structured
    content mode, the default) carries them in.
    """
    kind = type(value)
    if value is None or kind is bool or (kind is int and _INT_MIN <= value < _INT_END):
        return  # the common small results: nothing to serialise to know
    if kind is str and len(value) * 6 <= limit and value.isascii():
        # JSON spends at most 6 bytes on an ASCII character (a \uXXXX escape); other
        # text may hold a lone surrogate, which orjson (and so Kafka) refuses.
        return
    binary = binary and isinstance(value, bytes | bytearray)
    if binary:
        size = (len(value) + 2) // 3 * 4
    else:
        try:
            raw = orjson.dumps(value)
        except TypeError as exc:  # orjson's message names the type
            raise PayloadError(f"{what} is not JSON: {exc}") from None
        # orjson writes a non-finite float as null: only then is the walk worth it.
        if b"null" in raw and (where := _non_finite(value, what)) is not None:
            raise PayloadError(f"{where} is not JSON: NaN and infinities have no JSON form")
        size = len(raw)
    if size > limit:
        form = " as base64" if binary else ""
        detail = f"{what} is {size} bytes{form}, more than the {limit} one message may carry"
        raise PayloadError(detail, too_large=True)


def refusal(
    value: Any, what: str, *, result: bool = False, binary: bool = False
) -> JsonRpcError | None:
    """The error for ``value`` that no transport carries, or None when it travels.

    For a sender: -32602 when it is not JSON, -32005 ``Request too large``. For a
    handler's ``result`` (or stream item), the caller's answer in its place:
    -32603 when it is not JSON (the handler's fault), -32005 ``Response too large``.
    """
    try:
        check_payload(value, what, binary=binary)
    except PayloadError as exc:
        if exc.too_large:
            message = "Response too large" if result else "Request too large"
            return JsonRpcError(ErrorCode.TOO_LARGE, message, exc.detail)
        if result:
            return JsonRpcError(ErrorCode.INTERNAL_ERROR, "Internal error", exc.detail)
        return JsonRpcError(ErrorCode.INVALID_PARAMS, "Invalid params", exc.detail)
    return None


def _non_finite(value: Any, path: str) -> str | None:
    """The path of the first NaN or infinity in ``value``, or None."""
    if type(value) is float:
        return None if math.isfinite(value) else path
    if isinstance(value, dict):
        items: Iterable[tuple[Any, Any]] = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _non_finite(item, f"{path}[{key!r}]")
        if found is not None:
            return found
    return None


__all__ = [
    "MAX_PAYLOAD_BYTES",
    "PayloadError",
    "check_payload",
    "refusal",
]
