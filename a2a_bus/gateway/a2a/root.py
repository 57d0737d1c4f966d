"""One agent at the host's root, for A2A clients that know only a host.

Such clients (and the A2A conformance kit) read ``/.well-known/agent-card.json`` at
the root and post JSON-RPC to the URL the card names. With a root agent
(``GatewaySettings.a2a_root``) the root's card paths serve that agent's card, its
interface URL the root itself, and ``POST /`` is the agent's endpoint: the very
handler of ``POST /a2a/{agent_id}``, with the same tasks. The gateway's own card is
always also at ``/a2a/.well-known/agent-card.json`` (beside its endpoint ``/a2a``),
where it stays reachable when the root serves an agent.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_bus.gateway.a2a.cards import CARD_PATH, agent_card
from a2a_bus.gateway.a2a.endpoint import A2ABinding
from a2a_bus.gateway.context import require_access
from a2a_bus.gateway.responses import JSONResponse, problem

#: The card's path before A2A 0.3.
LEGACY_CARD_PATH = "/.well-known/agent.json"
#: The name of the root endpoint's route (the card's interface URL).
ROOT_ROUTE = "a2a_root"


def root_routes(binding: A2ABinding, agent_id: str | None) -> list[Route]:
    """The gateway card beside ``/a2a``, and with ``agent_id`` that agent at the root.

    They go before the binding's own routes, so that the root's card paths are the
    agent's rather than the gateway's.
    """
    routes = [Route("/a2a" + CARD_PATH, binding.gateway_card, methods=["GET"])]
    if agent_id is None:
        return routes
    at_root = RootAgent(binding, agent_id)
    return [
        *routes,
        Route(CARD_PATH, at_root.card, methods=["GET"]),
        Route(LEGACY_CARD_PATH, at_root.card, methods=["GET"]),
        Route("/", at_root.endpoint, methods=["POST"], name=ROOT_ROUTE),
    ]


class RootAgent:
    """The card and JSON-RPC endpoint of the agent served at the root."""

    def __init__(self, binding: A2ABinding, agent_id: str) -> None:
        self.binding = binding
        self.agent_id = agent_id

    async def card(self, request: Request) -> Response:
        gateway, agent_id = self.binding.gateway, self.agent_id
        visible = require_access(request).may_see_agent(agent_id)
        card = gateway.directory.card(agent_id) if visible else None
        if card is None:
            return problem(404, f"no live agent {agent_id!r}")
        url = str(request.url_for(ROOT_ROUTE))
        return JSONResponse(agent_card(card, url, secured=gateway.authenticator.enabled))

    async def endpoint(self, request: Request) -> Response:
        # The binding's handler reads the agent from the path: the root names none.
        request.scope.setdefault("path_params", {})["agent_id"] = self.agent_id
        return await self.binding.endpoint(request)
