"""``GET /agents`` and ``GET /agents/{id}``: agent cards from discovery."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from a2a_bus.core.routing import RoutingError, validate_name
from a2a_bus.gateway.context import context, require_access
from a2a_bus.gateway.responses import JSONResponse, problem


async def list_agents(request: Request) -> Response:
    ctx = context(request)
    access = require_access(request)
    cards = [card for card in ctx.directory.cards() if access.may_see_agent(str(card.get("id")))]
    return JSONResponse({"agents": cards})


async def get_agent(request: Request) -> Response:
    ctx = context(request)
    access = require_access(request)
    agent_id = request.path_params["agent_id"]
    try:
        validate_name(agent_id)
    except RoutingError as exc:
        return problem(400, exc.message)
    card = ctx.directory.card(agent_id) if access.may_see_agent(agent_id) else None
    if card is None:
        return problem(404, f"no live agent {agent_id!r}")
    return JSONResponse(card)
