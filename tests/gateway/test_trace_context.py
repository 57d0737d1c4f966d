"""The doors continue their callers' traces.

``POST /rpc``, ``POST /events`` and the Kafka ingress put the caller's
``traceparent`` on what they bring in; an event's own valid one wins; a request
without one starts a trace; a malformed one is ignored (a new trace), never an error
(no OpenTelemetry SDK: the API alone). With the SDK every answer of the gateway,
refusals included, is in a SERVER span named after its route, with its status code.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import orjson
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_bus import Agent, Bus, method, subscribe
from a2a_bus.gateway import GatewaySettings, create_app
from a2a_bus.gateway.auth import Access
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

    @method
    def ticks(self, count: int) -> Iterator[int]:
        """``count`` chunks, each the time it was made at (ns since the epoch)."""
        for _ in range(count):
            yield time.time_ns()

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


async def test_trace_flags_other_than_sampled_are_not_passed_on(
    http: httpx.AsyncClient,
) -> None:
    """W3C Trace Context level 1: a vendor zeroes the flags it does not know."""
    unknown_flags = TRACEPARENT[:-2] + "ff"
    reply = await http.post("/rpc", json=WHERE, headers={"traceparent": unknown_flags})
    assert reply.json()["result"]["traceparent"] == TRACEPARENT


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


TOKEN = "trace-token"
BEARER = {"authorization": f"Bearer {TOKEN}"}
#: The body limit of the recorded gateway: a call fits, a padded one does not.
BODY_LIMIT = 200


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
async def recorded_bus(spans: InMemorySpanExporter, heard: list[Any]) -> AsyncIterator[Bus]:
    """A bus on the in-memory transport recording its spans (the HTTP side does not
    depend on the transport)."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    async with Bus.memory(prefix=f"t{uuid.uuid4().hex[:10]}", tracer_provider=provider) as made:
        await made.aspawn(Tracer, 1, heard)
        yield made


def _gateway(bus: Bus, app_routes: list[Route] | None = None) -> httpx.AsyncClient:
    settings = GatewaySettings(
        request_timeout=WAIT, max_body_bytes=BODY_LIMIT, tokens={TOKEN: Access(name="t")}
    )
    app = create_app(bus, settings)
    app.router.routes.extend(app_routes or [])
    # The last resort's 500 re-raises for the server to log: the test reads the answer.
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://gateway")


def _http_spans(spans: InMemorySpanExporter) -> list[ReadableSpan]:
    """The gateway's SERVER spans (the bus's handling spans are SERVER spans too)."""
    return [
        span
        for span in spans.get_finished_spans()
        if span.kind is SpanKind.SERVER and "http.request.method" in (span.attributes or {})
    ]


TOO_LARGE = {**WHERE, "params": {"padding": "x" * BODY_LIMIT}}


@pytest.mark.parametrize(
    ("method", "path", "request_options", "status", "name"),
    [
        ("POST", "/rpc", {"json": WHERE, "headers": BEARER}, 200, "POST /rpc"),
        ("POST", "/rpc", {"json": WHERE}, 401, "POST /rpc"),
        ("POST", "/rpc", {"json": TOO_LARGE, "headers": BEARER}, 413, "POST /rpc"),
        ("POST", "/events", {"json": {}}, 401, "POST /events"),
        ("POST", "/events", {"json": TOO_LARGE, "headers": BEARER}, 413, "POST /events"),
        ("POST", "/a2a/tracer", {"json": WHERE}, 401, "POST /a2a/{agent_id}"),
        (
            "POST",
            "/a2a/tracer",
            {"json": TOO_LARGE, "headers": BEARER},
            413,
            "POST /a2a/{agent_id}",
        ),
        (
            "GET",
            "/a2a/tracer/.well-known/agent-card.json",
            {},
            401,
            "GET /a2a/{agent_id}/.well-known/agent-card.json",
        ),
        ("GET", "/agents/nobody", {"headers": BEARER}, 404, "GET /agents/{agent_id}"),
        ("GET", "/topics/a.b/history", {}, 401, "GET /topics/{subject}/history"),
        ("GET", "/healthz", {}, 200, "GET /healthz"),
        ("GET", "/no/such/path", {}, 404, "GET"),
        ("DELETE", "/rpc", {}, 405, "DELETE /rpc"),
    ],
)
async def test_every_answer_of_the_gateway_is_in_a_server_span_with_its_status_code(
    recorded_bus: Bus,
    spans: InMemorySpanExporter,
    method: str,
    path: str,
    request_options: dict[str, Any],
    status: int,
    name: str,
) -> None:
    """Refusals included; a 4xx is the client's, not an error of the server's span."""
    async with _gateway(recorded_bus) as http:
        reply = await http.request(method, path, **request_options)
    assert reply.status_code == status
    [span] = _http_spans(spans)
    assert span.name == name
    assert span.attributes is not None
    assert span.attributes["http.response.status_code"] == status
    assert span.attributes["http.request.method"] == method
    assert span.attributes["url.path"] == path
    assert span.attributes.get("http.route", method) == name.removeprefix(f"{method} ")
    assert span.status.status_code is StatusCode.UNSET


async def test_a_refusals_span_continues_the_callers_trace(
    recorded_bus: Bus, spans: InMemorySpanExporter
) -> None:
    async with _gateway(recorded_bus) as http:
        reply = await http.post("/rpc", json=WHERE, headers={"traceparent": TRACEPARENT})
    assert reply.status_code == 401
    [span] = _http_spans(spans)
    assert span.context is not None and span.parent is not None
    assert f"{span.context.trace_id:032x}" == TRACE_ID
    assert f"{span.parent.span_id:016x}" == TRACEPARENT.split("-")[2]


async def test_span_names_are_route_templates_whatever_the_path_or_method(
    recorded_bus: Bus, spans: InMemorySpanExporter
) -> None:
    """Callers choose paths and methods: span names stay a bounded set."""
    async with _gateway(recorded_bus) as http:
        for agent in ("made-up-1", "made-up-2"):
            assert (await http.post(f"/a2a/{agent}", json=WHERE)).status_code == 401
        assert (await http.request("BREW", "/rpc")).status_code == 405
        assert (await http.request("BREW", "/made/up")).status_code == 404
    first, second, brewed, lost = _http_spans(spans)
    assert first.name == second.name == "POST /a2a/{agent_id}"
    assert first.attributes is not None and second.attributes is not None
    assert {first.attributes["url.path"], second.attributes["url.path"]} == {
        "/a2a/made-up-1",
        "/a2a/made-up-2",
    }
    assert (brewed.name, lost.name) == ("HTTP /rpc", "HTTP")
    for span in (brewed, lost):
        assert span.attributes is not None
        assert span.attributes["http.request.method"] == "_OTHER"
        assert span.attributes["http.request.method_original"] == "BREW"


async def test_a_server_error_marks_its_span_as_an_error(
    recorded_bus: Bus, spans: InMemorySpanExporter
) -> None:
    async def broken(request: Request) -> Response:
        raise RuntimeError("the endpoint broke")

    async with _gateway(recorded_bus, [Route("/broken/{part}", broken)]) as http:
        assert (await http.get("/broken/1")).status_code == 500
        await recorded_bus.astop()  # a request that comes after the bus stopped: 503
        assert (await http.post("/rpc", json=WHERE, headers=BEARER)).status_code == 503
    crashed, stopped = _http_spans(spans)
    assert crashed.name == "GET /broken/{part}"
    assert stopped.name == "POST /rpc"
    for span, status, error in ((crashed, 500, "RuntimeError"), (stopped, 503, "503")):
        assert span.attributes is not None
        assert span.attributes["http.response.status_code"] == status
        assert span.attributes["error.type"] == error
        assert span.status.status_code is StatusCode.ERROR
    assert [event.name for event in crashed.events] == ["exception"]


async def test_a_streamed_answers_spans_last_until_the_stream_ends(
    recorded_bus: Bus, spans: InMemorySpanExporter
) -> None:
    """The gateway's SERVER span, and the CLIENT span of the request it sends."""
    call = {"jsonrpc": "2.0", "method": "ticks", "params": {"count": 3}, "id": 1}
    headers = {**BEARER, "accept": "text/event-stream"}
    async with _gateway(recorded_bus) as http:
        reply = await http.post("/rpc", json=call, headers=headers)
    assert reply.status_code == 200
    data = [line[5:] for line in reply.text.splitlines() if line.startswith("data:")]
    made = [orjson.loads(chunk)["result"] for chunk in data[:3]]
    [served] = _http_spans(spans)
    [sent] = [span for span in spans.get_finished_spans() if span.kind is SpanKind.CLIENT]
    for span in (served, sent):
        assert span.start_time is not None and span.end_time is not None
        assert span.start_time <= made[0] and span.end_time >= made[-1]
