"""POST /events: the CloudEvents SDK publishes in binary, structured and batch mode; a
subscribing agent receives each event with its attributes intact."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest
from cloudevents.core.bindings.http import to_binary, to_structured
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent

pytestmark = pytest.mark.timeout(60)


def news(n: int, subject: str = "news.sport") -> CloudEvent:
    attributes = {
        "id": f"news-{n}",
        "source": "https://example.com/newsroom",
        "type": "com.example.news.published",
        "subject": subject,
        "datacontenttype": "application/json",
        "region": "eu",
    }
    return CloudEvent(attributes, {"headline": f"story {n}"})


async def received(seen: list[Any], count: int) -> list[Any]:
    async def wait() -> None:
        while len(seen) < count:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(wait(), 20)
    return seen


async def test_binary_mode_event_reaches_the_subscriber(
    client: httpx.AsyncClient, seen: list[Any]
) -> None:
    message = to_binary(news(1), JSONFormat())
    assert "ce-specversion" in {k.lower() for k in message.headers}
    response = await client.post("/events", content=message.body, headers=message.headers)
    assert response.status_code == 202
    assert response.json()["accepted"] == [{"id": "news-1", "topic": "a2a.topic.news.sport"}]
    (event,) = await received(seen, 1)
    assert event.get_id() == "news-1"
    assert event.get_source() == "https://example.com/newsroom"
    assert event.get_extension("region") == "eu"
    assert event.get_data() == {"headline": "story 1"}


async def test_structured_mode_event_reaches_the_subscriber(
    client: httpx.AsyncClient, seen: list[Any]
) -> None:
    message = to_structured(news(2, "news.weather"), JSONFormat())
    assert message.headers["content-type"].startswith("application/cloudevents+json")
    response = await client.post("/events", content=message.body, headers=message.headers)
    assert response.status_code == 202
    (event,) = await received(seen, 1)
    assert (event.get_id(), event.get_subject()) == ("news-2", "news.weather")
    assert event.get_data() == {"headline": "story 2"}


async def test_batch_of_events_reaches_the_subscriber(
    client: httpx.AsyncClient, seen: list[Any]
) -> None:
    fmt = JSONFormat()
    body = b"[" + b",".join(fmt.write(news(n)) for n in range(3, 8)) + b"]"
    headers = {"content-type": "application/cloudevents-batch+json"}
    response = await client.post("/events", content=body, headers=headers)
    assert response.status_code == 202
    assert len(response.json()["accepted"]) == 5
    events = await received(seen, 5)
    assert sorted(e.get_id() for e in events) == [f"news-{n}" for n in range(3, 8)]


@pytest.mark.parametrize(
    ("headers", "body", "reason"),
    [
        ({"content-type": "application/json"}, b'{"hello": 1}', "no ce-specversion"),
        ({"content-type": "application/cloudevents+json"}, b"{not json", "malformed"),
        (
            {"content-type": "application/cloudevents+json"},
            orjson.dumps({"specversion": "1.0", "id": "x", "type": "t"}),
            "source",
        ),
        (
            {"content-type": "application/cloudevents-batch+json"},
            orjson.dumps([{"specversion": "1.0", "id": "1", "source": "s", "type": "t"}, 7]),
            "batch element 1",
        ),
        ({"content-type": "application/cloudevents-batch+json"}, b"[]", "empty"),
    ],
    ids=["not-an-event", "bad-json", "missing-source", "bad-batch-element", "empty-batch"],
)
async def test_malformed_events_get_400_with_a_reason(
    client: httpx.AsyncClient, seen: list[Any], headers: dict[str, str], body: bytes, reason: str
) -> None:
    response = await client.post("/events", content=body, headers=headers)
    assert response.status_code == 400
    assert reason in response.json()["error"]
    await asyncio.sleep(0.05)
    assert seen == []


async def test_event_with_nowhere_to_go_is_refused(client: httpx.AsyncClient) -> None:
    event = CloudEvent({"id": "1", "source": "s", "type": "t"}, None)
    message = to_structured(event, JSONFormat())
    response = await client.post("/events", content=message.body, headers=message.headers)
    assert response.status_code == 400
    assert "cannot be routed" in response.json()["error"]
