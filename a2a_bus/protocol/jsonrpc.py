"""JSON-RPC 2.0 messages: classification and validation, exactly per the specification.

A message is a plain ``dict`` as decoded from JSON. :func:`classify` tells what it
is or returns the :class:`Failure` that the specification prescribes.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from a2a_bus.protocol.constants import ROUTING_PARAMS
from a2a_bus.protocol.errors import ErrorCode, Failure

RESERVED_METHOD_PREFIX = "rpc."


class Kind(StrEnum):
    REQUEST = "request"
    NOTIFICATION = "notification"
    RESPONSE = "response"


# A member read off its enum class goes through the metaclass's __getattr__ hook
# (about 0.1 us on Python 3.11): the paths every message takes use these.
_REQUEST, _NOTIFICATION = Kind.REQUEST, Kind.NOTIFICATION


# Ids are strings, numbers or null; booleans are not numbers here.
_ID_TYPES = frozenset({str, int, float, type(None)})


def _invalid(message: Any, detail: str) -> Failure:
    """Invalid Request, answered with the message's id when it can be read: the
    specification asks for null only when the id cannot be detected (section 5)."""
    return Failure(ErrorCode.INVALID_REQUEST, "Invalid Request", _readable_id(message), detail)


def _readable_id(message: Any) -> Any:
    """The ``id`` of an object whose id is a valid one (string, number, null), else None."""
    if type(message) is not dict:
        return None
    id = message.get("id")
    return id if type(id) in _ID_TYPES else None


_PARAMS_TYPES = frozenset({dict, list})
#: Stands for a member the message does not have (``None`` is a value: ``null``).
_ABSENT: Any = object()


def jsonrpc_of(data: Any) -> dict[str, Any] | None:
    """``data`` when it is a JSON-RPC 2.0 message object (an event made from
    JSON-RPC carries one), else None."""
    return data if type(data) is dict and data.get("jsonrpc") == "2.0" else None


def classify(message: Any) -> Kind | Failure:
    """Classify one (non-batch) JSON-RPC message, or say why it is invalid."""
    if type(message) is not dict:
        return _invalid(message, "a JSON-RPC message must be an object")
    if message.get("jsonrpc") != "2.0":
        return _invalid(message, 'member "jsonrpc" must be exactly "2.0"')
    if "id" in message and type(message["id"]) not in _ID_TYPES:
        return _invalid(message, 'member "id" must be a string, a number or null')
    if "method" in message:
        return classify_call(message)
    return _classify_response(message)


def classify_call(message: dict[str, Any]) -> Kind | Failure:
    """:func:`classify` for a message known to be a JSON-RPC 2.0 object (``jsonrpc``
    "2.0", a valid ``id`` if any) with a ``method`` member: the checks of a call.
    A client that built the message itself needs only these."""
    method = message["method"]
    if type(method) is not str:
        return _invalid(message, 'member "method" must be a string')
    if "result" in message or "error" in message:
        return _invalid(message, 'a request cannot carry "result" or "error"')
    params = message.get("params", _ABSENT)
    if params is not _ABSENT and type(params) not in _PARAMS_TYPES:
        return _invalid(message, 'member "params" must be an array or an object')
    if not ROUTING_PARAMS.isdisjoint(message):
        return _invalid(message, _misplaced(message))
    if method.startswith(RESERVED_METHOD_PREFIX):
        return Failure(
            ErrorCode.METHOD_NOT_FOUND,
            "Method not found",
            message.get("id"),
            f"method names beginning with {RESERVED_METHOD_PREFIX!r} are reserved",
        )
    return _REQUEST if "id" in message else _NOTIFICATION


def _misplaced(message: dict[str, Any]) -> str:
    """Why a call with a routing member beside ``params`` is refused: ignored there,
    it would send the call where its method leads, not where it says."""
    member = min(ROUTING_PARAMS.intersection(message))
    return (
        f'member "{member}" belongs in "params" (params.{member} routes the call); '
        "beside it, it would be ignored"
    )


def _classify_response(message: dict[str, Any]) -> Kind | Failure:
    has_result, has_error = "result" in message, "error" in message
    if not (has_result or has_error):
        return _invalid(
            message, 'a message needs "method" (request) or "result"/"error" (response)'
        )
    if has_result and has_error:
        return _invalid(message, 'a response carries either "result" or "error", not both')
    if "id" not in message:
        return _invalid(message, 'a response must carry "id"')
    if has_error:
        error = message["error"]
        if (
            type(error) is not dict
            or type(error.get("code")) is not int
            or type(error.get("message")) is not str
        ):
            return _invalid(
                message, '"error" must be an object with an integer "code" and a "message"'
            )
    return Kind.RESPONSE
