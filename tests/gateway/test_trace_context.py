"""The doors continue their callers' traces (no OpenTelemetry SDK: the API alone).

``POST /rpc``, ``POST /events`` and the Kafka ingress put the caller's
``traceparent`` on what they bring in; an event's own valid one wins; a request
without one starts a trace; a malformed one is ignored (a new trace), never an error.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from a2a_bus import Agent, Bus, method, subscribe
from a2a_bus.gateway import GatewaySettings, create_app
from a2a_bus.gateway.ingress import Ingress
from a2a_bus.protocol import parse_traceparent
from a2a_bus.transport.base import Delivery
from tests.buses import eventually

from .conftest import WAIT

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
OWN = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class Tracer(Agent):
    """Answers with the trace attributes of the message it handles."""

    agent_id = "tracer"

    def __init__(self, heard: list[Any]) -> None:
        self.heard = heard

    @method
    def where(self) -> dict[str, Any]:
        attributes = self.event.get_attributes()
        return {k: attributes.get(k) for k in ("traceparent", "tracestate", "calldepth")}

    @subscribe("news.*")
    def on_news(self, event: Any) -> None:
        self.heard.append((event.get_id(), event.get_attributes().get("traceparent")))


@pytest.fixture
def heard() -> list[Any]:
    return []


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
async def traced(request: pytest.FixtureRequest, heard: list[Any]) -> AsyncIterator[Bus]:
    prefix = f"t{uuid.uuid4().hex[:10]}"
    if request.param == "kafka":
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        made = Bus.kafka(bootstrap, bus_options={"prefix": prefix}, metadata_max_age_ms=1000)
    else:
        made = Bus.memory(prefix=prefix)
    async with made:
        await made.aspawn(Tracer, 1, heard)
        yield made


@pytest.fixture
async def http(traced: Bus) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(traced, GatewaySettings(request_timeout=WAIT))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        yield client


WHERE = {"jsonrpc": "2.0", "method": "where", "id": 1}


async def test_post_rpc_continues_the_callers_traceparent(http: httpx.AsyncClient) -> None:
    headers = {"traceparent": TRACEPARENT, "tracestate": "vendor=a1"}
    reply = await http.post("/rpc", json=WHERE, headers=headers)
    assert reply.json()["result"] == {
        "traceparent": TRACEPARENT,
        "tracestate": "vendor=a1",
        "calldepth": None,  # from outside the bus: no agent above it
    }


async def test_a_request_without_a_traceparent_starts_a_trace(http: httpx.AsyncClient) -> None:
    first = (await http.post("/rpc", json=WHERE)).json()["result"]["traceparent"]
    second = (await http.post("/rpc", json=WHERE)).json()["result"]["traceparent"]
    parsed = [parse_traceparent(first), parse_traceparent(second)]
    assert all(p is not None for p in parsed)
    assert parsed[0].trace_id != parsed[1].trace_id  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "malformed", ["garbage", TRACEPARENT.upper(), "00-" + "0" * 32 + "-00f067aa0ba902b7-01"]
)
async def test_a_malformed_traceparent_is_ignored_and_a_new_trace_starts(
    http: httpx.AsyncClient, malformed: str
) -> None:
    reply = await http.post("/rpc", json=WHERE, headers={"traceparent": malformed})
    assert reply.status_code == 200
    result = reply.json()["result"]
    assert result["traceparent"] != malformed
    assert parse_traceparent(result["traceparent"]) is not None


async def test_two_traceparent_headers_are_ignored_and_a_new_trace_starts(
    http: httpx.AsyncClient,
) -> None:
    headers = [("traceparent", TRACEPARENT), ("traceparent", OWN)]
    reply = await http.post("/rpc", json=WHERE, headers=headers)
    parsed = parse_traceparent(reply.json()["result"]["traceparent"])
    assert parsed is not None
    assert parsed.trace_id not in (TRACE_ID, OWN.split("-")[1])


async def test_tracestate_headers_are_combined_in_their_order(http: httpx.AsyncClient) -> None:
    headers = [
        ("traceparent", TRACEPARENT),
        ("tracestate", "foo=1,bar=2"),
        ("tracestate", "rojo=1,congo=2"),
        ("tracestate", "baz=3"),
    ]
    reply = await http.post("/rpc", json=WHERE, headers=headers)
    assert reply.json()["result"]["tracestate"] == "foo=1,bar=2,rojo=1,congo=2,baz=3"


async def test_post_events_keeps_an_events_own_trace_else_gives_it_the_requests(
    http: httpx.AsyncClient, heard: list[Any]
) -> None:
    mine = {"specversion": "1.0", "id": "e-1", "source": "s", "type": "t", "subject": "news.a"}
    theirs = {**mine, "id": "e-2", "traceparent": OWN}
    broken = {**mine, "id": "e-3", "traceparent": "not-a-trace"}
    reply = await http.post(
        "/events",
        content=orjson.dumps([mine, theirs, broken]),
        headers={
            "content-type": "application/cloudevents-batch+json",
            "traceparent": TRACEPARENT,
        },
    )
    assert reply.status_code == 202
    await eventually(lambda: len(heard) == 3, "the three events")
    assert sorted(heard) == [("e-1", TRACEPARENT), ("e-2", OWN), ("e-3", TRACEPARENT)]


async def test_the_ingress_continues_a_records_traceparent_header(traced: Bus) -> None:
    replies: list[Delivery] = []

    async def deliver(delivery: Delivery) -> None:
        replies.append(delivery)

    async with Ingress(traced.service, timeout=WAIT) as ingress:
        await traced.transport.subscribe(
            [ingress.reply_topic], "replies", deliver, from_beginning=True
        )
        request = orjson.dumps({"jsonrpc": "2.0", "method": "where", "id": 7})
        headers = [("traceparent", TRACEPARENT.encode())]
        await traced.transport.publish_raw(ingress.topic, request, key=b"k", headers=headers)
        await traced.transport.publish_raw(ingress.topic, request, key=b"k")
        await asyncio.wait_for(_until(lambda: len(replies) == 2), WAIT)
    continued, started = (r.event.get_data()["result"]["traceparent"] for r in replies)
    assert continued == TRACEPARENT
    assert parse_traceparent(started) is not None and started != TRACEPARENT
    # The raw answer says which trace it belongs to.
    assert ("traceparent", TRACEPARENT.encode()) in replies[0].headers


async def _until(predicate: Any) -> None:
    while not predicate():
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("kind", ["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
async def test_the_ingress_span_is_a_consumer_named_after_its_topic_and_marks_errors(
    kind: str, request: pytest.FixtureRequest, heard: list[Any]
) -> None:
    """The record is the outside's: a span named after the method it names would let
    it mint span names; its error answer (and dead letter) marks the span."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    options: dict[str, Any] = {"prefix": f"t{uuid.uuid4().hex[:10]}", "tracer_provider": provider}
    if kind == "kafka":
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        bus = Bus.kafka(bootstrap, bus_options=options, metadata_max_age_ms=1000)
    else:
        bus = Bus.memory(**options)
    async with bus:
        await bus.aspawn(Tracer, 1, heard)
        async with Ingress(bus.service, timeout=WAIT) as ingress:
            for method in ("where", "made_up_1", "made_up_2"):
                call = orjson.dumps({"jsonrpc": "2.0", "method": method, "id": 1, "params": {}})
                await bus.transport.publish_raw(ingress.topic, call, key=b"k")

            def processed() -> list[Any]:
                done = [s for s in spans.get_finished_spans() if s.kind is SpanKind.CONSUMER]
                return done if len(done) == 3 else []

            done = await eventually(processed, "the three records' spans")
    assert {span.name for span in done} == {f"process {ingress.topic}"}
    failed = [span for span in done if span.status.status_code is StatusCode.ERROR]
    assert len(failed) == 2
    for span in failed:
        assert span.attributes is not None and span.attributes["rpc.jsonrpc.error_code"] == -32601
