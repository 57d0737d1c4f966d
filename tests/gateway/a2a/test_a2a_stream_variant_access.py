"""A token allowed only an LLM agent's ``chat`` can talk to it with a stock A2A client:
the card advertises streaming, so the client sends ``SendStreamingMessage``, and the
gateway falls back to ``chat`` (answered as one artifact update) instead of refusing
``chat/stream`` with a 403 for every message."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import get_artifact_text, new_message, new_text_part
from a2a.types import a2a_pb2 as pb

from a2a_bus.bus import Bus
from a2a_bus.gateway import Access, GatewaySettings, create_app
from a2a_bus.llm import AgentBuilder, LlmMessage, ScriptedClient, llm_agent_class

pytestmark = pytest.mark.timeout(60)

WAIT = 20.0  # seconds; a guard against hangs, never a performance limit
BASE = "http://gateway"
TOKEN = "chat-only-token"


def hello(messages: Sequence[LlmMessage], tools: Any) -> str:
    return "hello there"


@pytest.fixture
async def bus() -> AsyncIterator[Bus]:
    async with Bus.memory() as running:
        loop = AgentBuilder("bot").llm(ScriptedClient(hello)).build()
        await running.aspawn(llm_agent_class(loop, "bot", description="A scripted chat bot."))
        yield running


async def test_a_chat_only_token_can_talk_with_a_stock_client(bus: Bus) -> None:
    tokens = {TOKEN: Access(name="chatter", methods=("chat",))}
    app = create_app(bus, GatewaySettings(request_timeout=WAIT, tokens=tokens))
    headers = {"authorization": f"Bearer {TOKEN}"}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url=BASE, headers=headers, timeout=WAIT
    ) as http:
        resolver = A2ACardResolver(http, f"{BASE}/a2a/bot")
        card = await asyncio.wait_for(resolver.get_agent_card(), WAIT)
        client = ClientFactory(ClientConfig(httpx_client=http)).create(card)
        message = new_message([new_text_part("hi")], role=pb.ROLE_USER)

        async def talk() -> list[pb.StreamResponse]:
            request = pb.SendMessageRequest(message=message)
            return [event async for event in client.send_message(request)]

        events = await asyncio.wait_for(talk(), WAIT)
    texts = [
        get_artifact_text(e.artifact_update.artifact)
        for e in events
        if e.HasField("artifact_update")
    ]
    texts += [get_artifact_text(a) for e in events if e.HasField("task") for a in e.task.artifacts]
    assert "hello there" in "".join(texts), events
