"""``GET /healthz`` (the process answers) and ``GET /readyz`` (the transport is connected)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from a2a_bus.gateway.context import context
from a2a_bus.gateway.responses import JSONResponse


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    if context(request).ready:
        return JSONResponse({"status": "ready"})
    return JSONResponse({"status": "not ready", "reason": "the transport is not connected"}, 503)
