"""Errors an agent handler raises to answer with a JSON-RPC error object."""

from __future__ import annotations

from typing import Any

from a2a_bus.protocol import ErrorCode


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

    def __repr__(self) -> str:
        return f"JsonRpcError({self.code}, {self.message!r}, {self.data!r})"


class StreamError(Exception):
    """A stream broke: a gap in ``seq`` that never filled, or an error chunk."""


class BusStopped(RuntimeError):
    """The bus is not running."""
