"""The MCP server over streamable HTTP, behind the gateway's bearer tokens."""

from __future__ import annotations

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from a2a_bus.gateway.auth import Access
from a2a_bus.mcp.server import BusMcpServer

#: Where the MCP endpoint is served.
PATH = "/mcp"


def _user(access: Access) -> AuthenticatedUser:
    """The SDK's user for a token's ``access``: its session manager binds a session to
    the user that opened it and answers 404 to any other, as if there were no session."""
    identity = access.identity  # unique per token, never the token itself
    return AuthenticatedUser(AccessToken(token=identity, client_id=identity, scopes=[]))


class BearerGate:
    """Answers 401 to an HTTP request without a valid bearer token (when tokens are
    configured) and names the token's holder to the SDK, which keeps each session to
    the token that opened it; what a valid token may reach is decided per tool by the
    server."""

    def __init__(self, app: ASGIApp, server: BusMcpServer) -> None:
        self.app = app
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        authenticator = self.server.authenticator
        if scope["type"] == "http" and authenticator.enabled:
            headers = dict(scope.get("headers") or ())
            value = headers.get(b"authorization")
            header = value.decode("latin-1") if value is not None else None
            access = authenticator.authenticate(header)
            if access is None:
                response = JSONResponse(
                    {"error": "a valid bearer token is required (Authorization: Bearer <token>)"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
            scope = {**scope, "user": _user(access)}
        await self.app(scope, receive, send)


def http_app(server: BusMcpServer, host: str = "127.0.0.1") -> ASGIApp:
    """The ASGI app serving ``server`` at ``/mcp`` (its lifespan runs the SDK's session
    manager). On a loopback ``host`` only loopback Host and Origin headers are
    accepted (the SDK's DNS-rebinding protection)."""
    app = server.server.streamable_http_app(streamable_http_path=PATH, host=host)
    return BearerGate(app, server)
