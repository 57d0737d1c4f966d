"""``a2a-bus serve --a2a-root AGENT`` (or ``A2A_GATEWAY_A2A_ROOT``): the agent at the
host root of a real server, reached by the stock ``a2a-sdk`` client given the host."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import get_artifact_text, new_message, new_text_part
from a2a.types import a2a_pb2 as pb

from tests.ports import free_ports

from .test_serve_call import AGENTS, WAIT, Lines

pytestmark = pytest.mark.timeout(180)


async def talk(url: str) -> tuple[str, str]:
    """The root card's name and what the root agent answers to a text message."""
    async with httpx.AsyncClient(timeout=WAIT) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        message = new_message([new_text_part("hi there")], role=pb.ROLE_USER)
        request = pb.SendMessageRequest(message=message)
        (event,) = [e async for e in client.send_message(request)]
        return card.name, get_artifact_text(event.task.artifacts[0])


@pytest.mark.parametrize("how", ["option", "environment"])
def test_serve_puts_one_agent_at_the_root(how: str) -> None:
    port = free_ports(1)[0]
    args = ["serve", f"{AGENTS}:Spec", f"{AGENTS}:Echo", "--http", f"127.0.0.1:{port}"]
    if how == "option":
        served = Lines(*args, "--a2a-root", "echo")
    else:
        served = Lines(*args, extra={"A2A_GATEWAY_A2A_ROOT": "echo"})
    try:
        served.wait_for("listening on")
        url = f"http://127.0.0.1:{port}"
        assert f"A2A agent echo at the root: {url}/" in served.wait_for("at the root")
        assert asyncio.run(asyncio.wait_for(talk(url), WAIT)) == ("echo", "hi there")
        gateway_card = httpx.get(f"{url}/a2a/.well-known/agent-card.json", timeout=WAIT)
        assert gateway_card.json()["name"] == "a2a-bus gateway"
    finally:
        assert served.stop() == 0
