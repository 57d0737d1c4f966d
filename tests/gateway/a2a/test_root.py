"""One agent at the host root (``GatewaySettings.a2a_root``): its card at the root's
card paths naming the root as its endpoint, ``POST /`` its A2A endpoint (the stock
``a2a-sdk`` client given only the host), and the gateway's card beside ``/a2a``."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import get_artifact_text, new_message, new_text_part
from a2a.types import a2a_pb2 as pb

from a2a_bus.bus import Bus
from a2a_bus.gateway import Access, GatewaySettings, create_app
from a2a_bus.gateway.openapi import path_template
from a2a_bus.gateway.prom import route_label

pytestmark = pytest.mark.timeout(120)

WAIT = 20.0  # seconds; a guard against hangs, never a performance limit
BASE = "http://gateway"


def gateway(bus: Bus, **settings: Any) -> httpx.AsyncClient:
    app = create_app(bus, GatewaySettings(request_timeout=WAIT, **settings))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE, timeout=WAIT)


@pytest.fixture
async def rooted(bus: Bus) -> AsyncIterator[httpx.AsyncClient]:
    async with gateway(bus, a2a_root="echo") as http:
        yield http


async def test_the_root_card_is_the_agents_and_names_the_root(rooted: httpx.AsyncClient) -> None:
    for path in ("/.well-known/agent-card.json", "/.well-known/agent.json"):
        card = (await rooted.get(path)).json()
        assert card["name"] == "echo"
        assert card["url"] == f"{BASE}/"
        assert {i["url"] for i in card["supportedInterfaces"]} == {f"{BASE}/"}
    # The agent's own card is unchanged: its endpoint under /a2a.
    assert (await rooted.get("/a2a/echo/.well-known/agent-card.json")).json()["url"] == (
        f"{BASE}/a2a/echo"
    )


async def test_the_gateway_card_moves_beside_its_endpoint(
    rooted: httpx.AsyncClient, bus: Bus
) -> None:
    card = (await rooted.get("/a2a/.well-known/agent-card.json")).json()
    assert card["name"] == "a2a-bus gateway"
    assert card["url"] == f"{BASE}/a2a"
    # Without a root agent it is at both places, and nothing is posted to the root.
    async with gateway(bus) as plain:
        for path in ("/.well-known/agent-card.json", "/a2a/.well-known/agent-card.json"):
            assert (await plain.get(path)).json()["name"] == "a2a-bus gateway"
        assert (await plain.post("/", json={})).status_code == 404


async def test_a_stock_client_given_only_the_host_talks_to_the_root_agent(
    rooted: httpx.AsyncClient,
) -> None:
    card = await asyncio.wait_for(A2ACardResolver(rooted, BASE).get_agent_card(), WAIT)
    assert card.name == "echo"
    client = ClientFactory(ClientConfig(httpx_client=rooted, streaming=False)).create(card)
    text = f"hello {uuid.uuid4().hex}"
    message = new_message([new_text_part(text)], role=pb.ROLE_USER)

    async def send() -> list[pb.StreamResponse]:
        return [e async for e in client.send_message(pb.SendMessageRequest(message=message))]

    (event,) = await asyncio.wait_for(send(), WAIT)
    assert event.task.status.state == pb.TASK_STATE_COMPLETED
    assert get_artifact_text(event.task.artifacts[0]) == text
    # The same task at the agent's own endpoint: one handler, one store.
    got = await rooted.post(
        "/a2a/echo",
        json={"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": event.task.id}},
    )
    assert got.json()["result"]["id"] == event.task.id


async def test_the_root_endpoint_answers_json_rpc_errors(rooted: httpx.AsyncClient) -> None:
    unknown = {"jsonrpc": "2.0", "id": "u", "method": "DoThings", "params": {}}
    answer = (await rooted.post("/", json=unknown)).json()
    assert (answer["error"]["code"], answer["id"]) == (-32601, "u")
    wrong = {"jsonrpc": "1.0", "id": "w", "method": "SendMessage", "params": {}}
    answer = (await rooted.post("/", json=wrong)).json()
    assert (answer["error"]["code"], answer["id"]) == (-32600, "w")
    assert (await rooted.get("/")).status_code == 405
    assert route_label("/") == "/"


async def test_a_root_agent_that_is_not_live_or_not_allowed_is_not_found(bus: Bus) -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}
    async with gateway(bus, a2a_root="nobody") as http:
        assert (await http.get("/.well-known/agent-card.json")).status_code == 404
        response = await http.post("/", json=call)
        assert (response.status_code, response.json()["error"]["code"]) == (404, -32601)
    tokens = {"t": Access(name="t", agents=("spec",))}
    async with gateway(bus, a2a_root="echo", tokens=tokens) as http:
        bearer = {"authorization": "Bearer t"}
        assert (await http.get("/.well-known/agent-card.json")).status_code == 401
        response = await http.get("/.well-known/agent-card.json", headers=bearer)
        assert response.status_code == 404
        assert (await http.post("/", json=call, headers=bearer)).status_code == 404


def test_the_root_agent_is_a_setting() -> None:
    assert GatewaySettings.from_env({"A2A_GATEWAY_A2A_ROOT": "echo"}).a2a_root == "echo"
    assert GatewaySettings.from_env({}).a2a_root is None
    with pytest.raises(ValueError, match="a2a_root: invalid agent id"):
        GatewaySettings(a2a_root="not/an/id")


async def test_the_openapi_document_names_the_root_routes(rooted: httpx.AsyncClient) -> None:
    doc = (await rooted.get("/openapi.json")).json()
    app = create_app(Bus.memory(), GatewaySettings(a2a_root="echo"))
    routes = {path_template(route.path) for route in app.routes}  # type: ignore[attr-defined]
    assert routes == set(doc["paths"])
    assert "echo" in doc["paths"]["/"]["post"]["summary"]
    assert "echo" in doc["paths"]["/.well-known/agent-card.json"]["get"]["summary"]
