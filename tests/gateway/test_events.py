"""POST /events: the CloudEvents SDK publishes in binary, structured and batch mode; a
subscribing agent receives each event with its attributes intact. An integer outside
-2**63 .. 2**64-1 gets a 400, and the payload bound of every transport
(a2a_bus.core.payload) applies (413; both transports, Kafka: the real broker)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import orjson
import pytest
from cloudevents.core.bindings.http import to_binary, to_structured
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent

from a2a_bus import Bus
from a2a_bus.gateway import GatewaySettings, create_app
from tests.buses import WAIT, make_bus

from .conftest import HUGE, OUT_OF_RANGE

__all__ = ["make_bus"]  # the fixture, shared with the behavioural suite

pytestmark = pytest.mark.timeout(60)

MakeBus = Callable[..., Awaitable[Bus]]


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


def skipped_copies(metrics: str) -> float:
    [line] = [x for x in metrics.splitlines() if x.startswith("a2a_duplicates_skipped_total ")]
    return float(line.split()[1])


async def test_a_copy_of_an_event_is_skipped_once_and_counted(
    client: httpx.AsyncClient, seen: list[Any]
) -> None:
    before = skipped_copies((await client.get("/metrics")).text)
    message = to_binary(news(3, "news.copies"), JSONFormat())
    for _ in range(2):  # the same source and id twice: one event
        response = await client.post("/events", content=message.body, headers=message.headers)
        assert response.status_code == 202
    await received(seen, 1)
    for _ in range(200):
        if skipped_copies((await client.get("/metrics")).text) == before + 1:
            break
        await asyncio.sleep(0.02)
    assert skipped_copies((await client.get("/metrics")).text) == before + 1
    assert [event.get_id() for event in seen] == ["news-3"]


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


@pytest.mark.parametrize("repeated", ["ce-subject", "ce-id", "content-type"])
async def test_a_header_given_twice_is_refused_not_read_as_its_first_copy(
    client: httpx.AsyncClient, seen: list[Any], repeated: str
) -> None:
    """A proxy reading the last copy would see another event than the bus."""
    message = to_binary(news(9), JSONFormat())
    headers = list(message.headers.items())
    headers.append((repeated, "application/json" if repeated == "content-type" else "other"))
    response = await client.post("/events", content=message.body, headers=headers)
    assert response.status_code == 400
    assert f"header '{repeated}' is given twice" in response.json()["error"]
    await asyncio.sleep(0.05)
    assert seen == []


async def test_event_with_nowhere_to_go_is_refused(client: httpx.AsyncClient) -> None:
    event = CloudEvent({"id": "1", "source": "s", "type": "t"}, None)
    message = to_structured(event, JSONFormat())
    response = await client.post("/events", content=message.body, headers=message.headers)
    assert response.status_code == 400
    assert "cannot be routed" in response.json()["error"]


# -- attribute values the HTTP binding and CloudEvents refuse ------------------------------


def _binary_news(n: int, **extra: str | bytes) -> dict[str, str | bytes]:
    message = to_binary(news(n), JSONFormat())
    return {**message.headers, **extra}


def _structured_news(n: int, **extra: str) -> bytes:
    return orjson.dumps({**orjson.loads(JSONFormat().write(news(n))), **extra})


_CE_JSON = {"content-type": "application/cloudevents+json"}
_CE_BATCH = {"content-type": "application/cloudevents-batch+json"}


@pytest.mark.parametrize(
    ("headers", "body", "reason"),
    [
        (_binary_news(1, **{"ce-region": "a%ZZb"}), None, "header 'ce-region' has a '%'"),
        (_binary_news(1, **{"ce-region": "a%E9b"}), None, "header 'ce-region' percent-encodes"),
        (_binary_news(1, **{"ce-region": b"a\xe9b"}), None, "header 'ce-region' holds a char"),
        (_binary_news(1, **{"ce-subject": "a%0Ab"}), None, "attribute 'subject' holds the control"),
        (_binary_news(1, **{"ce-region": "%00"}), None, "attribute 'region' holds the control"),
        (_binary_news(1, **{"ce-time": "2026-12-05"}), None, "attribute 'time' is not an RFC"),
        (_binary_news(1, **{"ce-time": "20261205T000000Z"}), None, "attribute 'time' is not"),
        (_CE_JSON, _structured_news(1, time="2026-12-05T00:00:00"), "attribute 'time' is not"),
        (_CE_JSON, _structured_news(1, region="a\nb"), "attribute 'region' holds the control"),
        (
            _CE_BATCH,
            b"[%s,%s]" % (_structured_news(1), _structured_news(2, region="\x85")),
            "batch element 1: attribute 'region' holds the control",
        ),
    ],
    ids=[
        "bad-escape",
        "escape-not-utf8",
        "raw-non-ascii",
        "newline-subject",
        "nul",
        "bare-date",
        "basic-format-time",
        "time-without-offset",
        "structured-newline",
        "batch-c1-control",
    ],
)
async def test_attribute_values_the_binding_forbids_get_400_naming_them(
    client: httpx.AsyncClient,
    seen: list[Any],
    headers: dict[str, str | bytes],
    body: bytes | None,
    reason: str,
) -> None:
    """Before, these were published as changed (a broken escape kept, a byte turned
    into U+FFFD), or as sent: a newline reached log lines, ISO 8601 that RFC 3339
    does not allow was read as a time."""
    content = body if body is not None else b'{"headline": "h"}'
    response = await client.post("/events", content=content, headers=headers)
    assert response.status_code == 400, response.text
    assert reason in response.json()["error"]
    await asyncio.sleep(0.05)
    assert seen == []


async def test_rfc_3339_times_and_quoted_header_values_are_accepted(
    client: httpx.AsyncClient, seen: list[Any]
) -> None:
    headers = _binary_news(1, **{"ce-time": "2026-12-05t10:20:30.5z", "ce-region": '"e u"'})
    response = await client.post("/events", content=b"{}", headers=headers)
    assert response.status_code == 202, response.text
    (event,) = await received(seen, 1)
    assert event.get_time().isoformat() == "2026-12-05T10:20:30.500000+00:00"
    assert event.get_extension("region") == "e u"


# -- integers outside -2**63 .. 2**64-1 are refused ----------------------------------------


async def test_events_refuses_a_huge_integer_with_400(client: httpx.AsyncClient) -> None:
    structured = (
        b'{"specversion": "1.0", "id": "e-1", "source": "/outside", "type": "com.example.x",'
        b' "subject": "news.huge", "data": {"n": %d}}' % HUGE
    )
    binary = {
        "ce-specversion": "1.0",
        "ce-id": "e-2",
        "ce-source": "/outside",
        "ce-type": "com.example.x",
        "ce-subject": "news.huge",
        "content-type": "application/json",
    }
    sent = [
        (structured, {"content-type": "application/cloudevents+json"}),
        (b"[%s]" % structured, {"content-type": "application/cloudevents-batch+json"}),
        (b'{"n": %d}' % HUGE, binary),
    ]
    for body, headers in sent:
        response = await asyncio.wait_for(
            client.post("/events", content=body, headers=headers), WAIT
        )
        assert response.status_code == 400, response.text
        assert f"integer {HUGE} {OUT_OF_RANGE}" in response.text


# -- the payload bound of every transport --------------------------------------------------


@pytest.mark.timeout(300)  # a Kafka bus starts: the default guard
async def test_an_event_whose_topic_would_be_too_long_gets_400(make_bus: MakeBus) -> None:
    """Kafka takes topic names of at most 249 characters: a longer subject is the
    sender's error on both transports (before, Kafka's check answered 500 and
    memory took it), and an RPC publish to one is -32600."""
    bus = await make_bus()
    app = create_app(bus, GatewaySettings(request_timeout=WAIT))
    message = to_structured(news(1, subject="s" * 300), JSONFormat())
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        response = await asyncio.wait_for(
            http.post("/events", content=message.body, headers=message.headers), WAIT
        )
        assert response.status_code == 400, response.text
        assert "subject too long" in response.json()["error"]
        call = {"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"_topic": "t" * 300}}
        answer = (await asyncio.wait_for(http.post("/rpc", json=call), WAIT)).json()
    assert (answer["error"]["code"], answer["id"]) == (-32600, 1)
    assert answer["error"]["data"].startswith("subject too long")


@pytest.mark.timeout(300)  # a Kafka bus starts: the default guard
async def test_events_over_the_payload_bound_get_413(make_bus: MakeBus) -> None:
    """An event whose data is over the bound (bytes count as base64: 800,000 are
    1,066,668) is refused with 413 on both transports, nothing published; before,
    Kafka's producer refused it (500) and memory accepted it (202)."""
    bus = await make_bus()
    app = create_app(bus, GatewaySettings(request_timeout=WAIT))
    headers = {
        "ce-specversion": "1.0",
        "ce-id": "blob-1",
        "ce-source": "https://example.com/review",
        "ce-type": "com.example.blob",
        "ce-subject": "review.blob",
        "content-type": "application/octet-stream",
    }
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        response = await asyncio.wait_for(
            http.post("/events", content=b"\x02" * 800_000, headers=headers), WAIT
        )
    assert response.status_code == 413, response.text
    assert "as base64, more than the 1000000 one message may carry" in response.text
    page = await asyncio.wait_for(bus.async_client().read("review.blob"), WAIT)
    assert page.events == []
