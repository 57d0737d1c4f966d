"""Metric labels stay bounded: ids never become label values."""

from __future__ import annotations

import asyncio
import contextlib

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from a2a_bus.bus import Bus
from a2a_bus.gateway import GatewaySettings, create_app
from a2a_bus.gateway.prom import code_label, group_label, route_label

from .agents import Spec
from .conftest import WAIT


@pytest.mark.parametrize(
    ("path", "label"),
    [
        ("/rpc", "/rpc"),
        ("/agents/calc", "/agents/{id}"),
        ("/topics/news.sport/events", "/topics/{subject}/events"),
        ("/topics/news.sport/history", "/topics/{subject}/history"),
        ("/a2a/calc", "/a2a/{id}"),
        ("/a2a/support/.well-known/agent-card.json", "/a2a/{id}/card"),
        ("/a2a", "/a2a"),
        ("/.well-known/agent-card.json", "other"),
        ("/no/such/path", "other"),
    ],
)
def test_route_label(path: str, label: str) -> None:
    assert route_label(path) == label


@pytest.mark.parametrize(
    ("code", "label"),
    [
        (-32601, "-32601"),  # the specification's
        (-32010, "-32010"),  # an agent's, in the server-error range
        (-32768, "-32768"),
        (1001, "other"),  # a handler's own codes: as many as it likes, one label
        (-40000, "other"),
        ("-32601", "other"),  # an error object from elsewhere with a string code
        (True, "other"),
    ],
)
def test_an_error_code_label_keeps_the_reserved_range_only(code: object, label: str) -> None:
    assert code_label(code) == label


async def test_open_live_views_share_one_consumer_lag_series(bus: Bus, served_port: int) -> None:
    # Each GET /topics/{subject}/events reads in a consumer group of its own.
    subjects = [f"news.{n}" for n in range(3)]
    for subject in subjects:
        await bus.async_client().publish(subject, {})
    base = f"http://127.0.0.1:{served_port}"
    async with (
        httpx.AsyncClient(base_url=base, timeout=WAIT) as http,
        contextlib.AsyncExitStack() as views,
    ):
        opened = []
        for subject in subjects:
            view = await views.enter_async_context(http.stream("GET", f"/topics/{subject}/events"))
            opened.append(view.aiter_lines())  # kept: a dropped reader closes its view
            assert await asyncio.wait_for(anext(opened[-1]), WAIT) == f": tailing {subject}"
        text = (await http.get("/metrics")).text
    [lag] = [f for f in text_string_to_metric_families(text) if f.name == "a2a_consumer_lag"]
    groups = [sample.labels["group"] for sample in lag.samples]
    views_group = f"{bus.topics.prefix}.tail"
    assert groups.count(views_group) == 1
    assert not [group for group in groups if group.startswith(views_group + ".")]


@pytest.mark.parametrize(
    ("group", "label"),
    [
        ("a2a.tail.0af7651916cd43dd8448-12", "a2a.tail"),
        ("t1.tail.0af7651916cd43dd8448-3", "t1.tail"),
        ("a2a.agent.tail", "a2a.agent.tail"),
        ("a2a.sub.watcher.tail.0", "a2a.sub.watcher.tail.0"),
        ("a2a.tasks.notify", "a2a.tasks.notify"),
    ],
)
def test_group_label(group: str, label: str) -> None:
    assert group_label(group) == label


async def test_a_consumer_group_is_one_series_whatever_the_gateways_of_the_process(
    bus: Bus,
) -> None:
    async with Bus.memory(prefix=bus.topics.prefix) as other:
        await other.aspawn(Spec)  # on both buses: the same group in two transports
        create_app(other, GatewaySettings(request_timeout=WAIT))
        app = create_app(bus, GatewaySettings(request_timeout=WAIT))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
            text = (await http.get("/metrics")).text
    [lag] = [f for f in text_string_to_metric_families(text) if f.name == "a2a_consumer_lag"]
    groups = [sample.labels["group"] for sample in lag.samples]
    assert f"{bus.topics.prefix}.agent.spec" in groups
    assert len(groups) == len(set(groups))
