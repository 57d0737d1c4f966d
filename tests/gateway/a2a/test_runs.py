"""Running an A2A task: what the task keeps of an answer, and how its stream ends.

Streamed text is joined into one part, and at most ``max_body_bytes`` of JSON is
kept, with a truncation mark beyond. The SSE client of ``message/stream`` still gets
every chunk; ``tasks/get`` shows the bounded artifact. A plain (not streamed) answer
is held to the same bound with the same ``{"truncated": true, ...}`` metadata.

``message/stream`` marks the final chunk of each streamed artifact ``lastChunk: true``
(A2A: "If true, this is the final chunk of the artifact"), in 1.0 and 0.3, however
the stream ends; the chunks a client assembles are what ``tasks/get`` returns.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import httpx
import orjson
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import (
    get_artifact_text,
    get_data_parts,
    new_data_part,
    new_message,
    new_text_part,
)
from a2a.types import a2a_pb2 as pb

from a2a_bus.bus import Bus
from a2a_bus.gateway import GatewaySettings, create_app
from a2a_bus.hosting.agent import Agent, method
from a2a_bus.llm import AgentBuilder, LlmMessage, ScriptedClient, llm_agent_class

from ..conftest import WAIT
from .test_a2a import BASE, collect, within

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


# -- a plain answer is stored within max_body_bytes too ------------------------------------

STORED_LIMIT = 4096
SIZE = 200_000


class Blob(Agent):
    """Answers with a large string in one (non-streamed) result."""

    agent_id = "blob"

    @method
    def blob(self, size: int) -> str:
        return "x" * size


@pytest.fixture
async def blob_bus() -> AsyncIterator[Bus]:
    """A bus of its own with the blob agent."""
    async with Bus.memory() as running:
        await running.aspawn(Blob)
        yield running


async def test_a_plain_answer_is_stored_within_max_body_bytes(blob_bus: Bus) -> None:
    app = create_app(blob_bus, GatewaySettings(request_timeout=WAIT, max_body_bytes=STORED_LIMIT))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:

        async def call(method: str, params: object) -> dict[str, object]:
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            response = await asyncio.wait_for(
                http.post("/a2a/blob", content=orjson.dumps(body)), WAIT
            )
            assert response.status_code == 200, response.text
            return dict(response.json())

        message = {
            "kind": "message",
            "messageId": uuid.uuid4().hex,
            "role": "user",
            "parts": [{"kind": "data", "data": {"method": "blob", "params": {"size": SIZE}}}],
        }
        sent = await call("message/send", {"message": message})
        task = sent["result"]
        assert isinstance(task, dict) and task["status"]["state"] == "completed", sent
        stored = await call("tasks/get", {"id": task["id"], "historyLength": 0})
    artifacts = stored["result"]["artifacts"]  # type: ignore[index]
    kept = [p["text"] for a in artifacts for p in a["parts"] if "text" in p]
    assert sum(map(len, kept)) <= STORED_LIMIT, (
        f"the stored task keeps {sum(map(len, kept))} bytes of answer, "
        f"over max_body_bytes={STORED_LIMIT}"
    )


# -- the final chunk of each streamed artifact is marked lastChunk -------------------------


class Faulty(Agent):
    """Streams a few numbers, then fails."""

    agent_id = "faulty"

    @method
    def count_then_fail(self, n: int) -> Iterator[int]:
        yield from range(n)
        raise ValueError("broke after the chunks")


def four_words(messages: Sequence[LlmMessage], tools: Any) -> str:
    return "one two three four"


@pytest.fixture
async def http(bus: Bus) -> AsyncIterator[httpx.AsyncClient]:
    """The gateway with the default limits (not this module's ``settings``)."""
    await bus.aspawn(Faulty)
    loop = AgentBuilder("bot").llm(ScriptedClient(four_words)).build()
    await bus.aspawn(llm_agent_class(loop, "bot", description="A scripted chat bot."))
    transport = httpx.ASGITransport(app=create_app(bus, GatewaySettings(request_timeout=WAIT)))
    async with httpx.AsyncClient(transport=transport, base_url=BASE, timeout=WAIT) as client:
        yield client


async def sdk_stream(http: httpx.AsyncClient, agent: str, part: pb.Part) -> list[pb.StreamResponse]:
    card = await within(A2ACardResolver(http, f"{BASE}/a2a/{agent}").get_agent_card())
    client = ClientFactory(ClientConfig(httpx_client=http)).create(card)
    message = new_message([part], role=pb.ROLE_USER)
    return await collect(client.send_message(pb.SendMessageRequest(message=message)))


def updates(events: list[pb.StreamResponse]) -> list[pb.TaskArtifactUpdateEvent]:
    return [e.artifact_update for e in events if e.HasField("artifact_update")]


async def rpc(http: httpx.AsyncClient, agent: str, method: str, params: Any) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = await within(http.post(f"/a2a/{agent}", content=orjson.dumps(body)))
    assert response.status_code == 200, response.text
    return response


async def legacy_stream(http: httpx.AsyncClient, agent: str, part: dict[str, Any]) -> list[Any]:
    """The results of a 0.3 ``message/stream``, one per SSE event."""
    message = {"kind": "message", "messageId": uuid.uuid4().hex, "role": "user", "parts": [part]}
    response = await rpc(http, agent, "message/stream", {"message": message})
    lines = response.text.splitlines()
    return [orjson.loads(line[len("data: ") :])["result"] for line in lines if line[:6] == "data: "]


async def test_the_last_chunk_of_a_stream_is_marked(http: httpx.AsyncClient) -> None:
    events = await sdk_stream(http, "echo", new_data_part({"method": "count", "params": {"n": 4}}))
    chunks = updates(events)
    assert [get_data_parts(u.artifact.parts) for u in chunks] == [[0], [1], [2], [3]]
    assert [u.last_chunk for u in chunks] == [False, False, False, True]
    assert [u.append for u in chunks] == [False, True, True, True]
    assert len({u.artifact.artifact_id for u in chunks}) == 1
    assert events[-1].status_update.status.state == pb.TASK_STATE_COMPLETED


async def test_a_single_chunk_is_first_and_last(http: httpx.AsyncClient) -> None:
    events = await sdk_stream(http, "echo", new_data_part({"method": "count", "params": {"n": 1}}))
    [only] = updates(events)
    assert get_data_parts(only.artifact.parts) == [0]
    assert only.last_chunk and not only.append


async def test_streamed_tokens_end_with_the_last_chunk(http: httpx.AsyncClient) -> None:
    events = await sdk_stream(http, "bot", new_text_part("hello"))
    chunks = updates(events)
    assert len(chunks) > 1
    assert "".join(get_artifact_text(u.artifact) for u in chunks) == "one two three four"
    assert [u.last_chunk for u in chunks] == [False] * (len(chunks) - 1) + [True]


async def test_a_0_3_stream_marks_its_last_chunk_and_the_task_agrees(
    http: httpx.AsyncClient,
) -> None:
    call = {"kind": "data", "data": {"method": "count", "params": {"n": 3}}}
    events = await legacy_stream(http, "echo", call)
    chunks = [e for e in events if e.get("kind") == "artifact-update"]
    assert [c["lastChunk"] for c in chunks] == [False, False, True]
    assert events[-1]["kind"] == "status-update" and events[-1]["final"] is True

    # What a client assembles from the chunks is the stored artifact.
    assembled = [p for c in chunks for p in c["artifact"]["parts"]]
    task_id = events[0]["id"]
    stored = (await rpc(http, "echo", "tasks/get", {"id": task_id})).json()["result"]
    [artifact] = stored["artifacts"]
    assert artifact["artifactId"] == chunks[0]["artifact"]["artifactId"]
    assert artifact["parts"] == assembled


async def test_a_stream_that_fails_still_closes_its_artifact(http: httpx.AsyncClient) -> None:
    call = {"kind": "data", "data": {"method": "count_then_fail", "params": {"n": 2}}}
    events = await legacy_stream(http, "faulty", call)
    chunks = [e for e in events if e.get("kind") == "artifact-update"]
    assert [c["artifact"]["parts"] for c in chunks] == [
        [{"kind": "data", "data": {"value": 0}, "metadata": {"data_part_compat": True}}],
        [{"kind": "data", "data": {"value": 1}, "metadata": {"data_part_compat": True}}],
    ]
    assert [c["lastChunk"] for c in chunks] == [False, True]
    assert events[-1]["status"]["state"] == "failed"
