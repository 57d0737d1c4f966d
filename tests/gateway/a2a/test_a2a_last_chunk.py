"""``message/stream`` marks the final chunk of each streamed artifact ``lastChunk: true``
(A2A: "If true, this is the final chunk of the artifact"), in 1.0 and 0.3, however
the stream ends; the chunks a client assembles are what ``tasks/get`` returns."""

from __future__ import annotations

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
from a2a_bus.gateway.a2a.model import Artifact, Message, Part, Task
from a2a_bus.gateway.a2a.runs import ArtifactChunk, LastChunks, StatusChanged
from a2a_bus.hosting.agent import Agent, method
from a2a_bus.llm import AgentBuilder, LlmMessage, ScriptedClient, llm_agent_class

from .test_a2a import BASE, WAIT, collect, within

pytestmark = pytest.mark.timeout(120)


class Faulty(Agent):
    """Streams a few numbers, then fails."""

    agent_id = "faulty"

    @method
    def count_then_fail(self, n: int) -> Iterator[int]:
        yield from range(n)
        raise ValueError("broke after the chunks")


def reply(messages: Sequence[LlmMessage], tools: Any) -> str:
    return "one two three four"


@pytest.fixture
async def http(bus: Bus, settings: GatewaySettings) -> AsyncIterator[httpx.AsyncClient]:
    await bus.aspawn(Faulty)
    loop = AgentBuilder("bot").llm(ScriptedClient(reply)).build()
    await bus.aspawn(llm_agent_class(loop, "bot", description="A scripted chat bot."))
    transport = httpx.ASGITransport(app=create_app(bus, settings))
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


def test_progress_releases_the_held_chunk_as_not_last() -> None:
    task = Task("c", [Message("user", [Part.text("hi")])])
    first, other = Artifact([]), Artifact([])

    def chunk(artifact: Artifact, value: int) -> ArtifactChunk:
        delta = Artifact([Part.data(value)], artifact.name, artifact.artifact_id)
        return ArtifactChunk(delta, append=value > 0, last_chunk=False)

    progress = StatusChanged(task)
    marker = LastChunks()
    sent = [
        *marker.push(chunk(first, 0)),
        *marker.push(progress),  # the chunk goes out first, not held behind progress
        *marker.push(chunk(first, 1)),
        *marker.push(chunk(other, 0)),  # another artifact: the held one was first's last
        *marker.end(),
    ]
    assert [
        (u.artifact.parts, u.last_chunk) if isinstance(u, ArtifactChunk) else u for u in sent
    ] == [
        ([Part.data(0)], False),
        progress,
        ([Part.data(1)], True),
        ([Part.data(0)], True),
    ]
    assert marker.end() == []
