"""Messages to an agent discovery does not know, through every gateway endpoint: the
bus refuses them (-32002 "Agent not found"), and each endpoint says so its own way."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import httpx
import orjson
import pytest
from cloudevents.core.bindings.http import to_binary
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent
from prometheus_client import REGISTRY

pytestmark = pytest.mark.timeout(60)

AGENT_NOT_FOUND = -32002
REFUSED = "a2a_gateway_notifications_refused_total"


def refused() -> float:
    return REGISTRY.get_sample_value(REFUSED, {"code": str(AGENT_NOT_FOUND)}) or 0.0


def to_agent(agent: str, id: str) -> CloudEvent:
    attributes = {"id": id, "source": "s", "type": "com.example.note", "targetagent": agent}
    return CloudEvent(attributes, {"note": id})


def news(id: str, subject: str) -> CloudEvent:
    return CloudEvent({"id": id, "source": "s", "type": "t", "subject": subject}, {"n": 1})


async def history(client: httpx.AsyncClient, subject: str) -> list[Any]:
    response = await client.get(f"/topics/{subject}/history")
    assert response.status_code == 200
    events: list[Any] = response.json()["events"]
    return events


# -- POST /events -----------------------------------------------------------------------


async def test_an_event_to_an_unknown_agent_is_404(client: httpx.AsyncClient) -> None:
    message = to_binary(to_agent("ghost", "e1"), JSONFormat())
    response = await client.post("/events", content=message.body, headers=message.headers)
    assert response.status_code == 404
    assert response.json() == {"error": "event 'e1' cannot be routed: Agent not found: ghost"}
    # A known agent still takes one.
    message = to_binary(to_agent("echo", "e2"), JSONFormat())
    response = await client.post("/events", content=message.body, headers=message.headers)
    assert response.status_code == 202
    assert response.json()["accepted"] == [{"id": "e2", "topic": "a2a.agent.echo"}]


async def test_a_batch_with_an_unknown_agent_publishes_nothing(client: httpx.AsyncClient) -> None:
    subject = f"news.t{uuid.uuid4().hex[:8]}"
    fmt = JSONFormat()
    body = b"[%s,%s]" % (fmt.write(news("n1", subject)), fmt.write(to_agent("ghost", "g1")))
    headers = {"content-type": "application/cloudevents-batch+json"}
    response = await client.post("/events", content=body, headers=headers)
    assert response.status_code == 404
    assert "'g1'" in response.json()["error"]
    assert await history(client, subject) == []


# -- POST /rpc --------------------------------------------------------------------------


def rpc(method: str, params: Any, id: Any = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if id is not None:
        message["id"] = id
    return orjson.dumps(message)


async def test_a_request_to_an_unknown_agent_is_answered_with_32002(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post("/rpc", content=rpc("echo", {"value": 1, "_agentId": "ghost"}, 5))
    assert response.status_code == 200
    assert response.json() == {
        "jsonrpc": "2.0",
        "error": {"code": AGENT_NOT_FOUND, "message": "Agent not found", "data": "ghost"},
        "id": 5,
    }


async def test_a_notification_to_an_unknown_agent_is_counted_and_logged_once(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    before = refused()
    with caplog.at_level(logging.INFO, logger="a2a_bus"):
        response = await client.post("/rpc", content=rpc("echo", {"value": 1, "_agentId": "ghost"}))
    # JSON-RPC answers no notification, refused or not.
    assert response.status_code == 204
    assert response.content == b""
    assert refused() == before + 1
    records = [r for r in caplog.records if r.name.startswith(("a2a_bus.gateway", "a2a_bus.core"))]
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.WARNING, "JSON-RPC notification echo refused: Agent not found: ghost")
    ]
    assert records[0].exc_info is None, "a refusal is no crash: no traceback"


async def test_a_batch_answers_its_requests_around_a_refused_notification(
    client: httpx.AsyncClient,
) -> None:
    before = refused()
    batch = b"[%s,%s,%s]" % (
        rpc("echo", {"value": "a", "_agentId": "ghost"}),
        rpc("echo", ["b"], 1),
        rpc("echo", {"value": "c", "_agentId": "ghost"}, 2),
    )
    response = await client.post("/rpc", content=batch)
    assert response.status_code == 200
    answers = sorted(response.json(), key=lambda a: a["id"])
    assert answers[0] == {"jsonrpc": "2.0", "result": "b", "id": 1}
    assert answers[1]["error"]["code"] == AGENT_NOT_FOUND
    assert len(answers) == 2
    assert refused() == before + 1


# -- the A2A binding ----------------------------------------------------------------------


@pytest.mark.parametrize("method", ["message/send", "SendMessage"])
async def test_an_a2a_message_to_an_unknown_agent_is_404(
    client: httpx.AsyncClient, method: str
) -> None:
    message = {"messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}
    body = {"jsonrpc": "2.0", "method": method, "id": 1, "params": {"message": message}}
    response = await client.post("/a2a/ghost", content=orjson.dumps(body))
    assert response.status_code == 404
    error = response.json()["error"]
    # -32002 is the A2A protocol's TaskNotCancelable: the binding says -32601.
    assert (error["code"], error["message"]) == (-32601, "Agent not found")
    assert "ghost" in error["data"]
