"""The MCP server over streamable HTTP, behind the gateway's bearer tokens."""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from a2a_bus.mcp.server import BusMcpServer

#: Where the MCP endpoint is served.
PATH = "/mcp"


class BearerGate:
    """Answers 401 to an HTTP request without a valid bearer token (when tokens are
    configured); what a valid one may reach is decided per tool by the server."""

    def __init__(self, app: ASGIApp, server: BusMcpServer) -> None:
        self.app = app
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        authenticator = self.server.authenticator
        if scope["type"] == "http" and authenticator.enabled:
            headers = dict(scope.get("headers") or ())
            value = headers.get(b"authorization")
            header = value.decode("latin-1") if value is not None else None
            if authenticator.authenticate(header) is None:
                response = JSONResponse(
                    {"error": "a valid bearer token is required (Authorization: Bearer <token>)"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def http_app(server: BusMcpServer, host: str = "127.0.0.1") -> ASGIApp:
    """The ASGI app serving ``server`` at ``/mcp`` (its lifespan runs the SDK's session
    manager). On a loopback ``host`` only loopback Host and Origin headers are
    accepted (the SDK's DNS-rebinding protection)."""
    app = server.server.streamable_http_app(streamable_http_path=PATH, host=host)
    return BearerGate(app, server)
