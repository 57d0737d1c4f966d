"""JSON-RPC 2.0 error codes and error values.

Errors in this package are values: conversion returns a :class:`Failure` in place
of an event. Codecs that decode one message raise :class:`ProtocolError`, which
carries the same value, so callers can turn any failure into a JSON-RPC error
response or a dead-letter reason without guessing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import orjson

JsonRpcId = str | int | float | None


class ErrorCode(IntEnum):
    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    # Implementation-defined server errors (-32000 to -32099).
    SERVER_ERROR = -32000
    TIMEOUT = -32001
    AGENT_UNAVAILABLE = -32002
    FORBIDDEN = -32003
    UNAUTHORIZED = -32004
    TOO_LARGE = -32005
    STREAM_BROKEN = -32006
    BUSY = -32007
    CALL_TOO_DEEP = -32008
    #: Not a failure: the handler needs more input from the caller to go on
    #: (``data``: what it asks). A task waits in ``input-required``.
    INPUT_REQUIRED = -32012


#: The specification's message for each standard code.
STANDARD_MESSAGES: dict[int, str] = {
    ErrorCode.PARSE_ERROR: "Parse error",
    ErrorCode.INVALID_REQUEST: "Invalid Request",
    ErrorCode.METHOD_NOT_FOUND: "Method not found",
    ErrorCode.INVALID_PARAMS: "Invalid params",
    ErrorCode.INTERNAL_ERROR: "Internal error",
}


def error_object(code: int, message: str | None = None, data: Any = None) -> dict[str, Any]:
    """The ``error`` member of a response; ``message`` defaults to the spec's wording."""
    error: dict[str, Any] = {
        "code": int(code),
        "message": message or STANDARD_MESSAGES.get(code, "Server error"),
    }
    if data is not None:
        error["data"] = data
    return error


def error_response(
    code: int, message: str | None = None, id: JsonRpcId = None, data: Any = None
) -> dict[str, Any]:
    """A complete JSON-RPC 2.0 error response."""
    return {"jsonrpc": "2.0", "error": error_object(code, message, data), "id": id}


def result_response(result: Any, id: JsonRpcId) -> dict[str, Any]:
    """A complete JSON-RPC 2.0 success response."""
    return {"jsonrpc": "2.0", "result": result, "id": id}


class JsonRpcError(Exception):
    """Raise from a handler to answer with ``{"code", "message", "data"}``.

    Also raised by the client API when a request is answered with an error.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    @classmethod
    def from_dict(cls, error: Any) -> JsonRpcError:
        """Build from a JSON-RPC ``error`` member (tolerates malformed ones)."""
        if not isinstance(error, dict):
            return cls(ErrorCode.INTERNAL_ERROR, "malformed error response", error)
        code = error.get("code")
        return cls(
            code if isinstance(code, int) else ErrorCode.INTERNAL_ERROR,
            str(error.get("message", "")),
            error.get("data"),
        )

    def __str__(self) -> str:
        """``<code> <message>: <data>``, the data as JSON text (a string as is) cut
        at :data:`MAX_DATA_CHARS`: what a log line or a user needs to act on it."""
        text = f"{self.code} {self.message}"
        if self.data is None:
            return text
        detail = data_text(self.data)
        if len(detail) > MAX_DATA_CHARS:
            detail = f"{detail[:MAX_DATA_CHARS]}... ({len(detail) - MAX_DATA_CHARS} more)"
        return f"{text}: {detail}"

    def __repr__(self) -> str:
        return f"JsonRpcError({self.code}, {self.message!r}, {self.data!r})"


#: Characters of an error's ``data`` that ``str(error)`` shows.
MAX_DATA_CHARS = 1000


def data_text(value: Any) -> str:
    """``value`` as text: a string as it is, anything else as JSON (its repr when
    it has no JSON form)."""
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return repr(value)


class InputRequired(JsonRpcError):
    """Raise from a handler that needs more from its caller to go on: ``prompt``
    (a string or any JSON value) says what. A plain caller gets it as error
    -32012; over A2A the task waits in ``input-required`` and the caller's next
    message with the same ``taskId`` is the next call."""

    def __init__(self, prompt: Any) -> None:
        super().__init__(ErrorCode.INPUT_REQUIRED, "Input required", prompt)


@dataclass(frozen=True, slots=True)
class Failure:
    """Why one message (or one batch element) could not be converted."""

    code: int
    message: str
    id: JsonRpcId = None
    data: Any = None

    def response(self) -> dict[str, Any]:
        """This failure as a JSON-RPC error response object."""
        return error_response(self.code, self.message, self.id, self.data)

    @property
    def reason(self) -> str:
        """One line for logs and dead-letter headers."""
        return f"{self.code} {self.message}" + (f": {self.data}" if self.data else "")


class ProtocolError(ValueError):
    """Raised by the codecs on malformed input; ``failure`` says why."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.reason)
        self.failure = failure

    @classmethod
    def invalid(cls, detail: str) -> ProtocolError:
        return cls(Failure(ErrorCode.INVALID_REQUEST, "Invalid Request", data=detail))

    @classmethod
    def parse(cls, detail: str) -> ProtocolError:
        return cls(Failure(ErrorCode.PARSE_ERROR, "Parse error", data=detail))
