"""Errors of the bus itself (not of a JSON-RPC exchange)."""

from __future__ import annotations

from a2a_bus.protocol import ErrorCode, JsonRpcError
from a2a_bus.transport.errors import NotDelivered, RecordTooLarge, TransportError


class StreamError(Exception):
    """A stream broke: a gap in ``seq`` that never filled, or an error chunk."""


def transport_refusal(exc: TransportError, *, response: bool = False) -> JsonRpcError:
    """The JSON-RPC error a caller gets when the transport refused its message (with
    ``response``, an answer to it, such as a stream's chunk)."""
    if isinstance(exc, RecordTooLarge):
        message = "Response too large" if response else "Request too large"
        return JsonRpcError(ErrorCode.TOO_LARGE, message, str(exc))
    if isinstance(exc, NotDelivered):
        return JsonRpcError(ErrorCode.TIMEOUT, "Request timed out", str(exc))
    return JsonRpcError(ErrorCode.INTERNAL_ERROR, "Internal error", str(exc))
