"""The HTTP gateway: a Starlette app in front of a bus.

``create_app(bus, settings)`` returns the ASGI app. Its lifespan starts the bus
(unless it already runs) on the server's loop and stops it at shutdown, so
``uvicorn.run(create_app(Bus.memory()))`` is a complete gateway.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_bus.bus import Bus
from a2a_bus.gateway.a2a import A2ABinding
from a2a_bus.gateway.a2a.root import root_routes
from a2a_bus.gateway.auth import Authenticator
from a2a_bus.gateway.context import GatewayContext
from a2a_bus.gateway.discovery import get_agent, list_agents
from a2a_bus.gateway.events import events
from a2a_bus.gateway.health import healthz, readyz
from a2a_bus.gateway.history import history
from a2a_bus.gateway.openapi import document, openapi_endpoint
from a2a_bus.gateway.prom import TRANSPORTS, MetricsMiddleware, metrics
from a2a_bus.gateway.responses import problem
from a2a_bus.gateway.rpc import CLIENT_GONE, rpc
from a2a_bus.gateway.settings import GatewaySettings
from a2a_bus.gateway.tail import tail
from a2a_bus.gateway.tracing import TracingMiddleware
from a2a_bus.protocol import Adaptor
from a2a_bus.runtime.portal import BusStopped

log = logging.getLogger(__name__)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return problem(exc.status_code, exc.detail, exc.headers)


async def _bus_stopped(request: Request, exc: Exception) -> Response:
    # A request that raced the bus's stop: not an error of the gateway's.
    return problem(503, str(exc))


async def _client_gone(request: Request, exc: Exception) -> Response:
    # It left while its body was read: nothing is logged as an error, nobody reads this.
    return Response(status_code=CLIENT_GONE)


async def _server_error(request: Request, exc: Exception) -> Response:
    # Never a traceback in a response: it is in the log.
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem(500, "internal error")


def create_app(bus: Bus, settings: GatewaySettings | None = None) -> Starlette:
    """The gateway's ASGI app for ``bus``; see the module docstring."""
    settings = settings or GatewaySettings()
    adaptor = Adaptor(
        prefix=bus.adaptor.prefix,
        source=settings.source,
        max_message_bytes=settings.max_body_bytes,
        max_batch=settings.max_batch,
    )
    gateway = GatewayContext(
        service=bus.service,
        client=bus.async_client(),
        settings=settings,
        adaptor=adaptor,
        authenticator=Authenticator(settings.tokens),
    )

    binding = A2ABinding(
        gateway,
        max_tasks=settings.a2a_max_tasks,
        max_tasks_per_owner=settings.a2a_max_tasks_per_owner,
    )
    spec = document(
        max_body_bytes=settings.max_body_bytes,
        max_batch=settings.max_batch,
        secured=gateway.authenticator.enabled,
        a2a_root=settings.a2a_root,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        owned = not bus.running
        if owned:
            await bus.astart()
        try:
            await binding.start()
            yield
        finally:
            await binding.stop()
            if owned:
                await bus.astop()

    app = Starlette(
        routes=[
            Route("/rpc", rpc, methods=["POST"]),
            Route("/events", events, methods=["POST"]),
            # ":path": a subject with a slash (or none) is refused naming it, not a bare 404
            Route("/topics/{subject:path}/events", tail, methods=["GET"]),
            Route("/topics/{subject:path}/history", history, methods=["GET"]),
            Route("/agents", list_agents, methods=["GET"]),
            Route("/agents/{agent_id}", get_agent, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            Route("/openapi.json", openapi_endpoint(spec), methods=["GET"]),
            # Before the binding's routes: a root agent's card takes the root's card paths.
            *root_routes(binding, settings.a2a_root),
            *binding.routes(),
        ],
        middleware=[
            Middleware(MetricsMiddleware),
            Middleware(TracingMiddleware, tracing=gateway.bus.tracing),
        ],
        exception_handlers={
            HTTPException: _http_error,
            BusStopped: _bus_stopped,
            ClientDisconnect: _client_gone,
            Exception: _server_error,
        },
        lifespan=lifespan,
    )
    app.state.gateway = gateway
    TRANSPORTS.watch(bus.transport)
    return app
