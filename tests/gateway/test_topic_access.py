"""Topic allow-lists use the bus's subject wildcards: ``*`` one segment, ``#`` one or
more. A request for a wildcard subject (live view, history) passes only when the
token's patterns cover every subject it selects."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.types import Message

from a2a_bus.bus import Bus
from a2a_bus.core.routing import subject_matches
from a2a_bus.gateway import Access, GatewaySettings, create_app, load_tokens
from a2a_bus.gateway.auth import covers

from .conftest import WAIT

pytestmark = pytest.mark.timeout(60)

SHOP, NARROW, CALLS = "shop-token", "narrow-token", "calls-token"


@pytest.fixture
def settings() -> GatewaySettings:
    return GatewaySettings(
        request_timeout=WAIT,
        tokens={
            # The shop token of docs/gateway.md's example token file.
            SHOP: Access(name="shop", topics=("orders.#",)),
            NARROW: Access(name="narrow", topics=("orders.*",)),
            CALLS: Access(name="calls", methods=("sub*",), topics=("orders.#",)),
        },
    )


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def structured(subject: str) -> bytes:
    event = {"specversion": "1.0", "id": f"e-{subject}", "source": "/t", "type": "t"}
    return orjson.dumps({**event, "subject": subject, "data": {}})


@pytest.mark.parametrize(
    ("subject", "status"),
    [("orders.eu", 202), ("orders.eu.north", 202), ("orders", 403), ("billing.eu", 403)],
)
async def test_publishing_is_held_to_subject_patterns(
    client: httpx.AsyncClient, subject: str, status: int
) -> None:
    headers = {"content-type": "application/cloudevents+json", **bearer(SHOP)}
    response = await client.post("/events", content=structured(subject), headers=headers)
    assert response.status_code == status, response.text


async def test_a_published_event_of_a_bus_type_is_held_to_topics_not_methods(
    client: httpx.AsyncClient, bus: Bus
) -> None:
    # The CLI's publish types its events <prefix>.<subject>: published, they call no
    # method, so a token whose methods do not cover the subject may still publish it.
    event = {
        "specversion": "1.0",
        "id": "e-typed",
        "source": "/t",
        "type": "org.apache.eventmesh.a2a.orders.eu",
        "subject": "orders.eu",
        "data": {"a": 1},
    }
    headers = {"content-type": "application/cloudevents+json", **bearer(CALLS)}
    response = await client.post("/events", content=orjson.dumps(event), headers=headers)
    assert response.status_code == 202, response.text
    page = await bus.async_client().read("orders.eu", limit=10)
    [published] = page.events
    assert published.get_extension("a2amethod") is None  # published as sent


async def test_a_json_rpc_publish_is_held_to_subject_patterns(client: httpx.AsyncClient) -> None:
    def publish(subject: str) -> bytes:
        params = {"_topic": subject, "x": 1}
        return orjson.dumps({"jsonrpc": "2.0", "method": "news", "params": params, "id": 1})

    allowed = await client.post("/rpc", content=publish("orders.eu"), headers=bearer(SHOP))
    assert allowed.json()["result"]["topic"] == "a2a.topic.orders.eu"
    refused = await client.post("/rpc", content=publish("billing.eu"), headers=bearer(SHOP))
    assert refused.json()["error"]["code"] == -32003


@pytest.mark.parametrize(
    ("token", "subject", "status"),
    [(SHOP, "orders.eu", 200), (SHOP, "billing.eu", 403), (NARROW, "orders.eu.north", 403)],
)
async def test_history_is_held_to_subject_patterns(
    client: httpx.AsyncClient, bus: Bus, token: str, subject: str, status: int
) -> None:
    await bus.async_client().publish(subject, {"n": 1})
    response = await client.get(f"/topics/{subject}/history", headers=bearer(token))
    assert response.status_code == status, response.text
    if status == 200:
        assert [e["data"] for e in response.json()["events"]] == [{"n": 1}]


async def open_view(app: Starlette, token: str, path: str) -> int:
    """The status of a live view, whose client leaves right after the request."""
    incoming: list[Message] = [
        {"type": "http.request", "body": b"", "more_body": False},
        {"type": "http.disconnect"},
    ]
    statuses: list[int] = []

    async def receive() -> Message:
        if incoming:
            return incoming.pop(0)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])
        await asyncio.sleep(0)

    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"gateway"), (b"authorization", f"Bearer {token}".encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("gateway", 80),
    }
    await asyncio.wait_for(app(scope, receive, send), WAIT)
    return statuses[0]


@pytest.mark.parametrize(
    ("token", "subject", "status"),
    [
        (SHOP, "orders.eu", 200),
        (SHOP, "orders.*", 200),
        (SHOP, "orders.#", 200),
        (SHOP, "orders.*.north", 200),
        (SHOP, "#", 403),
        (SHOP, "*.eu", 403),
        (SHOP, "billing.*", 403),
        (NARROW, "orders.*", 200),
        (NARROW, "orders.#", 403),
        (NARROW, "orders.*.north", 403),
    ],
)
async def test_live_views_of_wildcard_subjects_need_covering_patterns(
    bus: Bus, settings: GatewaySettings, token: str, subject: str, status: int
) -> None:
    app = create_app(bus, settings)
    assert await open_view(app, token, f"/topics/{subject}/events") == status


def test_invalid_topic_patterns_are_refused_when_tokens_load(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text('shop: {topics: ["orders.#", "news.*.eu"]}\n')
    assert load_tokens(good)["shop"].topics == ("orders.#", "news.*.eu")
    bad = tmp_path / "bad.yaml"
    bad.write_text('shop: {topics: ["orders/*"]}\n')
    with pytest.raises(ValueError, match=r"topics: invalid subject 'orders/\*'"):
        load_tokens(bad)


# -- covers(): exhaustive comparison with the matcher over a small alphabet --------------

SEGMENTS = st.sampled_from(["a", "b", "*", "#"])
PATTERNS = st.lists(SEGMENTS, min_size=1, max_size=3).map(".".join)


def selected(subject: str, longest: int) -> list[str]:
    """The subjects of up to ``longest`` segments over a, b, z that ``subject`` selects."""
    found = []
    for length in range(1, longest + 1):
        for parts in itertools.product("abz", repeat=length):
            candidate = ".".join(parts)
            if subject_matches(subject, candidate):
                found.append(candidate)
    return found


@hypothesis_settings(max_examples=150, deadline=None)
@given(pattern=PATTERNS, subject=PATTERNS)
def test_covers_agrees_with_matching_every_selected_subject(pattern: str, subject: str) -> None:
    # Runs longer than both patterns together decide nothing new.
    longest = pattern.count(".") + subject.count(".") + 3
    expected = all(subject_matches(pattern, s) for s in selected(subject, longest))
    assert covers(pattern, subject) == expected
