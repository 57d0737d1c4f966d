"""One trace across every hop: the gateway, two agents, an LLM agent's model calls and tool.

``POST /rpc`` with a ``traceparent`` to agent A, whose handler calls agent B, an LLM
agent that runs a tool: every span lands in the caller's trace, each the child of
the hop before it. Real buses (in-memory and Kafka) recording with the SDK's
in-memory exporter; the scripted OpenAI-compatible server is the only fake.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from a2a_bus import Agent, Bus, JsonRpcError, method
from a2a_bus.gateway import GatewaySettings, create_app
from a2a_bus.llm import AgentBuilder, llm_agent_class
from tests.log_records import Records

from .conftest import ScriptedOpenAI

WAIT = 30.0  # upper bound on any wait; never a performance assertion
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CALLER_SPAN}-01"
log = logging.getLogger("tests.tracing.asker")


class Asker(Agent):
    agent_id = "asker"

    @method
    def refuse(self) -> None:
        raise JsonRpcError(-32050, "Not today")

    @method
    def ask(self, question: str) -> str:
        log.warning("asking the assistant")
        return str(self.client.request("assistant", "chat", {"message": question}))


def lookup(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@pytest.fixture
def exporter() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    yield provider, spans
    provider.shutdown()


@pytest.fixture
def records() -> Iterator[Records]:
    handler = Records()
    log.addHandler(handler)
    yield handler
    log.removeHandler(handler)


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
async def traced_bus(
    request: pytest.FixtureRequest,
    exporter: tuple[TracerProvider, InMemorySpanExporter],
    llm_server: ScriptedOpenAI,
) -> AsyncIterator[Bus]:
    provider = exporter[0]
    options: dict[str, Any] = {
        "prefix": f"t{uuid.uuid4().hex[:10]}",
        "request_timeout": WAIT,
        "tracer_provider": provider,
    }
    if request.param == "kafka":
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        bus = Bus.kafka(bootstrap, bus_options=options, metadata_max_age_ms=1000)
    else:
        bus = Bus.memory(**options)
    loop = AgentBuilder("assistant").llm(llm_server.client()).tool(lookup).build()
    async with bus:
        await bus.aspawn(Asker)
        await bus.aspawn(llm_agent_class(loop, "assistant"))
        yield bus


async def _spans(exporter: InMemorySpanExporter, count: int) -> list[ReadableSpan]:
    async def enough() -> list[ReadableSpan]:
        while len(spans := exporter.get_finished_spans()) < count:
            await asyncio.sleep(0.02)
        return list(spans)

    return await asyncio.wait_for(enough(), WAIT)


def _one(spans: list[ReadableSpan], name: str, kind: SpanKind) -> ReadableSpan:
    found = [s for s in spans if s.name == name and s.kind == kind]
    assert len(found) == 1, f"{name} {kind}: {[(s.name, s.kind) for s in spans]}"
    return found[0]


def _is_child(child: ReadableSpan, parent: ReadableSpan) -> bool:
    assert child.parent is not None, f"{child.name} has no parent"
    assert parent.context is not None
    return child.parent.span_id == parent.context.span_id


async def test_a_request_through_gateway_agents_llm_and_tool_is_one_trace(
    traced_bus: Bus,
    exporter: tuple[TracerProvider, InMemorySpanExporter],
    llm_server: ScriptedOpenAI,
    records: Records,
) -> None:
    llm_server.call_tools(("lookup", {"city": "Oslo"}))
    llm_server.reply("It is sunny in Oslo.")
    app = create_app(traced_bus, GatewaySettings(request_timeout=WAIT))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        body = {"jsonrpc": "2.0", "method": "ask", "params": {"question": "Oslo?"}, "id": 1}
        reply = await http.post("/rpc", json=body, headers={"traceparent": TRACEPARENT})
    assert reply.json() == {"jsonrpc": "2.0", "result": "It is sunny in Oslo.", "id": 1}

    spans = await _spans(exporter[1], 9)
    assert {f"{s.context.trace_id:032x}" for s in spans if s.context} == {TRACE_ID}
    gateway = _one(spans, "POST /rpc", SpanKind.SERVER)
    sent_ask = _one(spans, "ask", SpanKind.CLIENT)
    handled_ask = _one(spans, "ask", SpanKind.SERVER)
    sent_chat = _one(spans, "chat", SpanKind.CLIENT)
    handled_chat = _one(spans, "chat", SpanKind.SERVER)
    run = _one(spans, "invoke_agent assistant", SpanKind.INTERNAL)
    tool = _one(spans, "execute_tool lookup", SpanKind.INTERNAL)
    model_calls = [s for s in spans if s.name == "chat scripted-model"]
    assert gateway.parent is not None and f"{gateway.parent.span_id:016x}" == CALLER_SPAN
    assert _is_child(sent_ask, gateway)
    assert _is_child(handled_ask, sent_ask)
    assert _is_child(sent_chat, handled_ask)
    assert _is_child(handled_chat, sent_chat)
    assert _is_child(run, handled_chat)
    assert _is_child(tool, run)
    assert len(model_calls) == 2 and all(_is_child(call, run) for call in model_calls)

    system = "memory" if traced_bus.transport.in_process else "kafka"
    assert sent_ask.attributes is not None and handled_ask.attributes is not None
    assert sent_ask.attributes["rpc.system"] == "jsonrpc"
    assert sent_ask.attributes["rpc.method"] == "ask"
    assert sent_ask.attributes["rpc.jsonrpc.request_id"] == "1"
    assert sent_ask.attributes["messaging.system"] == system
    assert handled_ask.attributes["messaging.destination.name"] == traced_bus.topics.agent("asker")
    assert handled_ask.attributes["a2a.agent.id"] == "asker"
    assert handled_chat.attributes is not None and handled_chat.attributes["a2a.call.depth"] == 1
    assert model_calls[0].attributes is not None
    assert model_calls[0].attributes["gen_ai.request.model"] == "scripted-model"
    assert model_calls[0].attributes["gen_ai.usage.input_tokens"] == 11
    assert tool.attributes is not None and tool.attributes["gen_ai.tool.name"] == "lookup"

    # The handler's log record names its message: this trace, the span handling it.
    [record] = [r for r in records.records if r.getMessage() == "asking the assistant"]
    assert record.trace_id == TRACE_ID  # type: ignore[attr-defined]
    assert record.span_id == f"{handled_ask.context.span_id:016x}"  # type: ignore[attr-defined,union-attr]
    assert (record.agent_id, record.method) == ("asker", "ask")  # type: ignore[attr-defined]


async def test_a_tool_the_model_makes_up_gets_a_span_named_for_no_tool(
    traced_bus: Bus,
    exporter: tuple[TracerProvider, InMemorySpanExporter],
    llm_server: ScriptedOpenAI,
) -> None:
    """A model may call tools that do not exist: their spans must not mint names."""
    llm_server.call_tools(("invented_1", {}), ("lookup", {"city": "Oslo"}))
    llm_server.reply("It is sunny in Oslo.")
    answer = await traced_bus.async_client().request("asker", "ask", {"question": "Oslo?"})
    assert answer == "It is sunny in Oslo."

    def tool_spans() -> list[ReadableSpan]:
        return [s for s in exporter[1].get_finished_spans() if s.name.startswith("execute_tool")]

    async def both() -> None:
        while len(tool_spans()) < 2:
            await asyncio.sleep(0.02)

    await asyncio.wait_for(both(), WAIT)
    assert sorted(s.name for s in tool_spans()) == ["execute_tool", "execute_tool lookup"]
    [invented] = [s for s in tool_spans() if s.name == "execute_tool"]
    assert invented.attributes is not None
    assert invented.attributes["gen_ai.tool.name"] == "invented_1"
    assert invented.status.status_code is StatusCode.ERROR


async def test_an_error_answer_marks_the_spans_of_its_hops(
    traced_bus: Bus, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    app = create_app(traced_bus, GatewaySettings(request_timeout=WAIT))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        body = {"jsonrpc": "2.0", "method": "ask", "params": {"nothing": 1}, "id": 2}
        reply = await http.post("/rpc", json=body)
        assert reply.json()["error"]["code"] == -32602  # refused before the handler
        body = {"jsonrpc": "2.0", "method": "refuse", "id": 3}
        reply = await http.post("/rpc", json=body)
        assert reply.json()["error"]["code"] == -32050  # the handler's own error
    spans = await _spans(exporter[1], 6)
    for name, code in (("ask", -32602), ("refuse", -32050)):
        for kind in (SpanKind.CLIENT, SpanKind.SERVER):
            span = _one(spans, name, kind)
            assert span.attributes is not None
            assert span.attributes["rpc.jsonrpc.error_code"] == code
            assert span.status.status_code is StatusCode.ERROR
