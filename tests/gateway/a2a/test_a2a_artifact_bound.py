"""What an A2A task keeps of a streamed answer: streamed text joined into one part, and
at most ``max_body_bytes`` of JSON, with a truncation mark beyond. The SSE client of
``message/stream`` still gets every chunk; ``tasks/get`` shows the bounded artifact."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import orjson
import pytest

from a2a_bus.bus import Bus
from a2a_bus.gateway import GatewaySettings
from a2a_bus.hosting.agent import Agent, method
from a2a_bus.llm import AgentBuilder, LlmMessage, ScriptedClient, llm_agent_class

from ..conftest import WAIT

pytestmark = pytest.mark.timeout(120)

LIMIT = 1000  # bytes: a request fits; a few hundred chunks do not
#: The scripted model's answer: many words, so many streamed tokens.
REPLY = " ".join(f"word{i}" for i in range(100))  # within LIMIT


class Words(Agent):
    """Streams text: one chunk per word."""

    agent_id = "words"

    @method
    def words(self, n: int) -> Iterator[str]:
        for i in range(n):
            yield f"w{i} "


def reply(messages: Sequence[LlmMessage], tools: Any) -> str:
    return REPLY


@pytest.fixture
def settings() -> GatewaySettings:
    return GatewaySettings(request_timeout=WAIT, max_body_bytes=LIMIT)


@pytest.fixture
async def agents(bus: Bus) -> None:
    await bus.aspawn(Words)
    loop = AgentBuilder("bot").llm(ScriptedClient(reply)).build()
    await bus.aspawn(llm_agent_class(loop, "bot", description="A scripted chat bot."))


def send_body(part: dict[str, Any], method: str = "message/stream") -> bytes:
    message = {"messageId": uuid.uuid4().hex, "role": "user", "parts": [part]}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}
    return orjson.dumps(body)


def call(name: str, **params: Any) -> dict[str, Any]:
    return {"kind": "data", "data": {"method": name, "params": params}}


async def stream(client: httpx.AsyncClient, agent: str, part: dict[str, Any]) -> list[Any]:
    """The results of a ``message/stream``, one per SSE event."""
    response = await client.post(
        f"/a2a/{agent}", content=send_body(part), headers={"accept": "text/event-stream"}
    )
    assert response.status_code == 200
    lines = response.text.splitlines()
    return [orjson.loads(line[len("data: ") :])["result"] for line in lines if line[:6] == "data: "]


def chunks(events: list[Any]) -> list[list[dict[str, Any]]]:
    """The parts of each artifact update the SSE client received."""
    return [e["artifact"]["parts"] for e in events if e.get("kind") == "artifact-update"]


async def get_task(client: httpx.AsyncClient, agent: str, task_id: str, method: str) -> Any:
    body = {"jsonrpc": "2.0", "id": 2, "method": method, "params": {"id": task_id}}
    response = await client.post(f"/a2a/{agent}", content=orjson.dumps(body))
    return response.json()["result"]


def json_size(parts: list[dict[str, Any]]) -> int:
    """The bytes of JSON of the parts' values as one list (what the bound counts)."""
    values = [p.get("text", p.get("data")) for p in parts]
    return len(orjson.dumps(values))


@pytest.mark.usefixtures("agents")
async def test_streamed_tokens_are_kept_as_one_text_part(client: httpx.AsyncClient) -> None:
    events = await stream(client, "bot", {"kind": "text", "text": "talk to me"})
    tokens = chunks(events)
    assert len(tokens) == 100 and all(len(parts) == 1 for parts in tokens)
    assert "".join(parts[0]["text"] for parts in tokens) == REPLY
    assert events[-1]["status"]["state"] == "completed"

    task = await get_task(client, "bot", events[0]["id"], "tasks/get")
    (artifact,) = task["artifacts"]
    assert artifact["parts"] == [{"kind": "text", "text": REPLY}]
    assert "metadata" not in artifact


@pytest.mark.usefixtures("agents")
async def test_a_stream_past_the_bound_keeps_a_bounded_marked_artifact(
    client: httpx.AsyncClient,
) -> None:
    n = 1000  # "w0 " ... "w999 ": about 5 kB of text
    events = await stream(client, "words", call("words", n=n))
    sent = chunks(events)
    full = "".join(f"w{i} " for i in range(n))
    assert len(sent) == n  # the streaming client got every chunk
    assert "".join(parts[0]["text"] for parts in sent) == full
    assert events[-1]["status"]["state"] == "completed"

    task_id = events[0]["id"]
    task = await get_task(client, "words", task_id, "tasks/get")
    assert task["status"]["state"] == "completed"
    (artifact,) = task["artifacts"]
    (part,) = artifact["parts"]
    kept = part["text"]
    assert full.startswith(kept) and kept.endswith(" ")  # whole chunks, in order
    assert json_size(artifact["parts"]) <= LIMIT
    assert json_size(artifact["parts"]) > LIMIT - len(f"w{n} ")  # the next chunk did not fit
    left_out = full[len(kept) :]
    assert artifact["metadata"] == {
        "truncated": True,
        "omittedParts": left_out.count(" "),
        "omittedBytes": len(left_out),
        "maxBytes": LIMIT,
    }
    # The 1.0 rendering carries the mark too.
    v1 = await get_task(client, "words", task_id, "GetTask")
    assert v1["artifacts"][0]["metadata"]["truncated"] is True
    assert v1["artifacts"][0]["parts"] == [{"text": kept}]


@pytest.mark.usefixtures("agents")
async def test_the_bound_is_exact_for_data_chunks(client: httpx.AsyncClient) -> None:
    # The most numbers 0, 1, ... whose JSON list fits: kept whole; one more is cut.
    fit = max(n for n in range(LIMIT) if len(orjson.dumps(list(range(n)))) <= LIMIT)

    whole = await stream(client, "echo", call("count", n=fit))
    task = await get_task(client, "echo", whole[0]["id"], "tasks/get")
    (artifact,) = task["artifacts"]
    assert [p["data"]["value"] for p in artifact["parts"]] == list(range(fit))
    assert "metadata" not in artifact

    cut = await stream(client, "echo", call("count", n=fit + 1))
    assert len(chunks(cut)) == fit + 1
    task = await get_task(client, "echo", cut[0]["id"], "tasks/get")
    assert task["status"]["state"] == "completed"
    (artifact,) = task["artifacts"]
    assert [p["data"]["value"] for p in artifact["parts"]] == list(range(fit))
    assert artifact["metadata"] == {
        "truncated": True,
        "omittedParts": 1,
        "omittedBytes": len(str(fit)),
        "maxBytes": LIMIT,
    }
