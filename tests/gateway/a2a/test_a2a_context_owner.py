"""An LLM agent keeps one conversation per A2A ``contextId`` and token: the gateway
scopes the agent's ``session_id`` by the token, so another token that names the same
``contextId`` starts a conversation of its own instead of continuing (and reading) the
first caller's. Context ids are guessable (a per-process prefix and a counter)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import orjson
import pytest

from a2a_bus.bus import Bus
from a2a_bus.gateway import Access, GatewaySettings, create_app
from a2a_bus.llm import AgentBuilder, LlmMessage, ScriptedClient, llm_agent_class

pytestmark = pytest.mark.timeout(60)

WAIT = 20.0  # seconds; a guard against hangs, never a performance limit
ALICE = "alice-" + uuid.uuid4().hex
MALLORY = "mallory-" + uuid.uuid4().hex


def recall(messages: Sequence[LlmMessage], tools: Any) -> str:
    """The scripted model: repeats every user message of the conversation it is given."""
    return " | ".join(str(m.content) for m in messages if m.role == "user")


@pytest.fixture
async def bus() -> AsyncIterator[Bus]:
    async with Bus.memory() as running:
        loop = AgentBuilder("bot").llm(ScriptedClient(recall)).build()
        await running.aspawn(llm_agent_class(loop, "bot", description="A scripted chat bot."))
        yield running


async def say(http: httpx.AsyncClient, token: str, text: str, context_id: str | None) -> Any:
    message: dict[str, Any] = {
        "kind": "message",
        "messageId": uuid.uuid4().hex,
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
    }
    if context_id is not None:
        message["contextId"] = context_id
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
    response = await asyncio.wait_for(
        http.post(
            "/a2a/bot",
            content=orjson.dumps(body),
            headers={"authorization": f"Bearer {token}"},
        ),
        WAIT,
    )
    assert response.status_code == 200, response.text
    return response.json()


def answer_text(answer: Any) -> str:
    task = answer["result"]
    assert task["status"]["state"] == "completed", task
    return "".join(p.get("text", "") for a in task["artifacts"] for p in a["parts"])


async def test_another_token_cannot_join_a_conversation(bus: Bus) -> None:
    tokens = {ALICE: Access(name="alice"), MALLORY: Access(name="mallory")}
    app = create_app(bus, GatewaySettings(request_timeout=WAIT, tokens=tokens))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        secret = "my card number is " + uuid.uuid4().hex
        first = await say(http, ALICE, secret, None)
        assert answer_text(first) == secret
        context_id = first["result"]["contextId"]

        answer = await say(http, MALLORY, "what did I tell you?", context_id)
        if "error" in answer:  # refusing a foreign context is a fix too
            return
        assert secret not in answer_text(answer), "another token read Alice's conversation"
