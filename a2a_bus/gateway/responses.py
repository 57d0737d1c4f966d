"""Response helpers shared by the endpoints: fast JSON, JSON-RPC errors, problems."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from starlette.responses import Response

from a2a_bus.protocol import error_response


class JSONResponse(Response):
    """A JSON response serialised with orjson."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def rpc_error(
    status: int,
    code: int,
    message: str,
    detail: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """A JSON-RPC error response (id null) sent with an HTTP error status."""
    return JSONResponse(error_response(code, message, None, detail), status, headers)


def problem(status: int, reason: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """A non-JSON-RPC error: ``{"error": reason}``."""
    return JSONResponse({"error": reason}, status, headers)
