"""What every endpoint of one gateway shares, kept on ``app.state.gateway``.

The gateway is given the bus's collaborators, not the bus: the JSON-RPC
service (every ``/rpc`` and A2A method call goes through it), an async client
(history pages, A2A streams), and through the service the dispatcher and the
discovery directory.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from a2a_bus.client import AsyncClient
from a2a_bus.core.context import BusContext
from a2a_bus.core.dispatch import Dispatcher
from a2a_bus.core.service import JsonRpcService
from a2a_bus.discovery.directory import Directory
from a2a_bus.gateway.auth import Access, Authenticator
from a2a_bus.gateway.prom import DENIED
from a2a_bus.gateway.responses import problem
from a2a_bus.gateway.settings import GatewaySettings
from a2a_bus.protocol import Adaptor

#: Sent with every 401 (RFC 6750).
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="a2a-bus"'}


@dataclass(frozen=True)
class GatewayContext:
    service: JsonRpcService
    client: AsyncClient
    settings: GatewaySettings
    #: The gateway's own adaptor (its source, body and batch limits).
    adaptor: Adaptor
    authenticator: Authenticator

    @property
    def dispatcher(self) -> Dispatcher:
        return self.service.dispatcher

    @property
    def directory(self) -> Directory:
        return self.service.directory

    @property
    def bus(self) -> BusContext:
        return self.service.dispatcher.context


def context(request: Request) -> GatewayContext:
    gateway: GatewayContext = request.app.state.gateway
    return gateway


def access_of(request: Request) -> Access | None:
    """The caller's access, or None without a valid token (when tokens are configured)."""
    return context(request).authenticator.authenticate(request.headers.get("authorization"))


def require_access(request: Request) -> Access:
    """The caller's access; a 401 without a valid token."""
    access = access_of(request)
    if access is None:
        raise HTTPException(401, "a valid bearer token is required", headers=CHALLENGE)
    return access


def topic_refusal(access: Access, subject: str) -> Response | None:
    """The 403 for a subject (wildcards allowed) the token may not read, else None."""
    if access.may_see_topic(subject):
        return None
    DENIED.labels("forbidden").inc()
    return problem(403, f"topic {subject!r} is not allowed for this token")
