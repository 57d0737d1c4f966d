"""``GET /healthz`` (the process answers) and ``GET /readyz`` (it can do its work).

Ready means: the bus runs, its transport reaches its broker now (on Kafka a
broker lost after the start is seen within seconds:
:attr:`~a2a_bus.transport.base.Transport.connection_problem`), and no agent
hosted in this process has failed (its replicas gave up starting it, see
:mod:`a2a_bus.hosting.supervisor`). Otherwise 503, with the reason and the
failed agents by id.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from a2a_bus.gateway.context import GatewayContext, context
from a2a_bus.gateway.responses import JSONResponse


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    unready = readiness(context(request))
    if unready is None:
        return JSONResponse({"status": "ready"})
    return JSONResponse({"status": "not ready", **unready}, 503)


def readiness(gateway: GatewayContext) -> dict[str, Any] | None:
    """Why the gateway's process is not ready (``reason``, and ``failed``: agent id ->
    why), or None when it is."""
    failed = gateway.directory.failed_here()
    if not gateway.dispatcher.running:
        reason: str | None = "the bus is not running"
    else:
        reason = gateway.bus.transport.connection_problem
    if reason is None and failed:
        reason = "failed agents: " + ", ".join(sorted(failed))
    if reason is None:
        return None
    return {"reason": reason, "failed": failed} if failed else {"reason": reason}
