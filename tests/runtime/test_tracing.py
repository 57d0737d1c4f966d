"""Trace context through the bus without an OpenTelemetry SDK (the API alone).

A message a handler sends continues the trace of the message it handles and is one
call deeper; streams in both directions stay in one trace; a subscriber's delivery
carries the publish's trace. Real buses on both transports; what went over the wire
is read back from the topics.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from a2a_bus import Agent, Bus, JsonRpcError, method, subscribe
from a2a_bus.protocol import ErrorCode, Failure, parse_traceparent
from a2a_bus.runtime import tracing
from tests.buses import WAIT, eventually, make_bus

__all__ = ["make_bus"]  # the fixture, shared with the behavioural suite


def trace_of(event: Any) -> str:
    parsed = parse_traceparent(event.get_attributes().get("traceparent"))
    assert parsed is not None, f"no valid traceparent on {event.get_attributes()}"
    return parsed.trace_id


class Counter(Agent):
    agent_id = "counter"

    @method
    def count(self, to: int) -> Iterator[int]:
        yield from range(to)

    @method
    def total(self, values: Iterator[int]) -> int:
        return sum(values)


class Caller(Agent):
    agent_id = "caller"

    @method
    def both_ways(self) -> dict[str, Any]:
        counted = list(self.client.stream("counter", "count", {"to": 3}))
        summed = self.client.stream_to("counter", "total", iter([1, 2, 3]))
        self.client.publish("news.sport", {"goal": 1})
        return {"counted": counted, "summed": summed, "mine": trace_of(self.event)}


class Listener(Agent):
    agent_id = "listener"
    heard: list[Any] = []
    lock = threading.Lock()

    @subscribe("news.*")
    def on_news(self, event: Any) -> None:
        with self.lock:
            self.heard.append(event)


async def _events(bus: Bus, topic: str) -> list[Any]:
    batch = await bus.transport.read(topic, limit=1000)
    return batch.events


async def test_what_a_handler_sends_continues_its_trace_in_both_stream_directions(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    Listener.heard = []
    bus = await make_bus(Counter, Caller, Listener)
    answer = await bus.async_client().request("caller", "both_ways")
    assert answer["counted"] == [0, 1, 2] and answer["summed"] == 6
    trace = answer["mine"]

    sent = await _events(bus, bus.topics.agent("counter"))  # the request, 3 chunks, the end
    assert len(sent) == 5
    assert {trace_of(event) for event in sent} == {trace}
    assert {event.get_extension("calldepth") for event in sent} == {1}
    assert {event.get_extension("callchain") for event in sent} == {"caller"}

    answers = await _events(bus, bus.reply_topic)  # the streamed chunks and their end
    streamed = [e for e in answers if e.get_extension("seq") is not None]
    assert len(streamed) >= 4 and {trace_of(event) for event in streamed} == {trace}

    await eventually(lambda: len(Listener.heard) == 1)  # the publish, as delivered
    assert {trace_of(event) for event in Listener.heard} == {trace}
    assert {event.get_extension("calldepth") for event in Listener.heard} == {1}


async def test_a_scripts_stream_to_an_agent_is_one_trace_and_each_request_its_own(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    bus = await make_bus(Counter)
    client = bus.async_client()
    assert await client.stream_to("counter", "total", [1, 2, 3, 4]) == 10
    assert await client.stream_to("counter", "total", [5]) == 5
    sent = await _events(bus, bus.topics.agent("counter"))
    first, second = sent[:5], sent[5:]
    assert len({trace_of(event) for event in first}) == 1
    assert len({trace_of(event) for event in second}) == 1
    assert trace_of(first[0]) != trace_of(second[0])
    assert all(event.get_extension("calldepth") is None for event in first + second)


class Crasher(Agent):
    agent_id = "crasher"

    @method
    def fall(self) -> None:
        raise RuntimeError("down it goes")


async def test_a_dead_letter_and_its_retries_are_visible_on_the_span_handling_it(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    bus = await make_bus(Crasher, tracer_provider=provider)
    await bus.async_client().notify("crasher", "fall")
    await eventually(lambda: any(s.kind == SpanKind.CONSUMER for s in spans.get_finished_spans()))
    [handled] = [s for s in spans.get_finished_spans() if s.kind == SpanKind.CONSUMER]
    assert handled.status.status_code is StatusCode.ERROR
    [letter] = [e for e in handled.events if e.name == "a2a.dead_letter"]
    assert letter.attributes is not None
    assert str(letter.attributes["a2a.dead_letter.reason"]).startswith(
        "handler-crash: RuntimeError: down it goes"
    )
    assert handled.attributes is not None
    assert handled.attributes["a2a.attempts"] == 3  # the first try and two retries
    assert handled.attributes["a2a.redelivered"] is True
    [sent] = [s for s in spans.get_finished_spans() if s.kind == SpanKind.PRODUCER]
    assert handled.parent is not None and sent.context is not None
    assert handled.parent.span_id == sent.context.span_id


LATER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
#: A later version's traceparent, with a field version 00 does not have.
LATER = f"01-{LATER_TRACE}-00f067aa0ba902b7-01-future-field"


class Relay(Agent):
    agent_id = "relay"

    @method
    def relay(self) -> None:
        self.client.publish("relayed.by.handler", {"n": 1})


async def _first_events(bus: Bus, topic: str) -> list[Any]:
    """The events of ``topic`` once it has any."""

    async def poll() -> list[Any]:
        while not (events := await _events(bus, topic)):
            await asyncio.sleep(0.02)
        return events

    return await asyncio.wait_for(poll(), WAIT)


async def _relayed(bus: Bus, traceparent: str) -> list[str]:
    """The ``traceparent`` of what the bus sends for ``traceparent`` given by a producer
    writing straight to an agent's topic (no door adopts its trace), then by a door's
    caller."""
    event = bus.adaptor.from_json({"jsonrpc": "2.0", "method": "relay"})[0]
    assert not isinstance(event, Failure)
    event.get_attributes()["traceparent"] = traceparent
    await bus.transport.publish(bus.topics.agent("relay"), event)
    with tracing.serving(tracing.door_origin(traceparent)):
        await bus.async_client().publish("relayed.at.door", {"n": 2})
    sent = []
    for subject in ("relayed.by.handler", "relayed.at.door"):
        events = await _first_events(bus, bus.topics.subject(subject))
        sent += [e.get_attributes()["traceparent"] for e in events]
    return sent


async def test_a_later_version_traceparent_goes_on_as_version_00(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    bus = await make_bus(Relay)
    expected = f"00-{LATER_TRACE}-00f067aa0ba902b7-01"
    assert await _relayed(bus, LATER) == [expected, expected]


async def test_trace_flags_other_than_sampled_are_zeroed_on_what_the_bus_sends(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    """W3C Trace Context level 1: a vendor zeroes the flags it does not know."""
    bus = await make_bus(Relay)
    unknown_flags = f"00-{LATER_TRACE}-00f067aa0ba902b7-ff"
    expected = f"00-{LATER_TRACE}-00f067aa0ba902b7-01"
    assert await _relayed(bus, unknown_flags) == [expected, expected]


async def test_spans_of_a_method_the_agent_lacks_are_named_after_the_rpc_system(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    # Span names stay a bounded set whatever method names callers make up.
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    bus = await make_bus(Counter, tracer_provider=provider)
    client = bus.async_client()
    made_up = [f"made_up_{n}" for n in range(3)]
    for name in made_up:
        with pytest.raises(JsonRpcError) as refused:
            await client.request("counter", name)
        assert refused.value.code == -32601
    assert await client.request("counter", "total", {"values": [1, 2]}) == 3

    def finished() -> list[Any]:
        done = [
            s for s in spans.get_finished_spans() if s.kind in (SpanKind.CLIENT, SpanKind.SERVER)
        ]
        return done if len(done) == 8 else []

    done = await eventually(finished, "the spans of four requests, sent and handled")
    assert sorted(s.name for s in done) == ["jsonrpc"] * 6 + ["total", "total"]
    for span in done:
        assert span.attributes is not None
        if span.name == "total":
            assert span.attributes["rpc.method"] == "total"
            assert "rpc.method_original" not in span.attributes
            continue
        assert span.attributes["rpc.method"] == "_OTHER"
        assert span.attributes["rpc.method_original"] in made_up
        assert span.attributes["rpc.jsonrpc.error_code"] == -32601
        assert span.status.status_code is StatusCode.ERROR


# -- the CLIENT span of a stream: until the stream settles ------------------------------

#: The error a dripping stream ends with.
DRIED_UP = -32050


class Drip(Agent):
    """Streams of chunks 0.05 s apart, each the time it was made at (ns since the epoch)."""

    agent_id = "drip"
    #: Set at the end of a test: the stalled generator goes on (and ends).
    release = threading.Event()

    @method
    def drip(self, count: int) -> Iterator[int]:
        for _ in range(count):
            time.sleep(0.05)
            yield time.time_ns()

    @method
    def dry_up(self, count: int) -> Iterator[int]:
        yield from self.drip(count)
        raise JsonRpcError(DRIED_UP, "dried up")

    @method
    def stall(self) -> Iterator[int]:
        yield time.time_ns()
        self.release.wait(WAIT)
        yield time.time_ns()


class _Started(SpanProcessor):
    """The CLIENT spans started (an exporter sees only the ended ones)."""

    def __init__(self) -> None:
        self.clients: list[Span] = []

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        if span.kind is SpanKind.CLIENT:
            self.clients.append(span)


async def _traced_drip(
    make_bus: Callable[..., Awaitable[Bus]],
) -> tuple[Bus, Callable[[], Awaitable[ReadableSpan]]]:
    """A bus hosting :class:`Drip`, and a wait for the one CLIENT span it starts to
    end (none is left open)."""
    spans, started = InMemorySpanExporter(), _Started()
    provider = TracerProvider()
    provider.add_span_processor(started)
    provider.add_span_processor(SimpleSpanProcessor(spans))
    Drip.release.clear()

    async def client_span() -> ReadableSpan:
        def ended() -> list[ReadableSpan]:
            return [s for s in spans.get_finished_spans() if s.kind is SpanKind.CLIENT]

        [span] = await eventually(ended, "the CLIENT span to end")
        assert len(started.clients) == 1
        return span

    return await make_bus(Drip, tracer_provider=provider), client_span


def _covers(span: ReadableSpan, made: list[int]) -> None:
    """``span`` ran while every chunk of ``made`` was made."""
    assert span.start_time is not None and span.end_time is not None
    assert span.start_time <= made[0] and span.end_time >= made[-1]


async def test_a_streams_client_span_lasts_until_the_stream_ends(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    bus, client_span = await _traced_drip(make_bus)
    made = [tick async for tick in bus.async_client().stream("drip", "drip", {"count": 5})]
    span = await client_span()
    _covers(span, made)
    assert span.name == "drip" and span.status.status_code is StatusCode.UNSET


async def test_a_streams_client_span_ending_in_an_error_records_it(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    bus, client_span = await _traced_drip(make_bus)
    made: list[int] = []
    with pytest.raises(JsonRpcError) as failed:
        async for tick in bus.async_client().stream("drip", "dry_up", {"count": 2}):
            made.append(tick)
    assert failed.value.code == DRIED_UP
    span = await client_span()
    _covers(span, made)
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None and span.attributes["rpc.jsonrpc.error_code"] == DRIED_UP


async def test_a_streams_client_span_that_times_out_records_the_timeout(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    bus, client_span = await _traced_drip(make_bus)
    try:
        with pytest.raises(JsonRpcError) as timed_out:
            async for _ in bus.async_client().stream("drip", "stall", timeout=0.3):
                pass
    finally:
        Drip.release.set()
    assert timed_out.value.code == ErrorCode.TIMEOUT
    span = await client_span()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["rpc.jsonrpc.error_code"] == ErrorCode.TIMEOUT


async def test_a_streams_client_span_ends_without_error_when_its_reader_leaves(
    make_bus: Callable[..., Awaitable[Bus]],
) -> None:
    bus, client_span = await _traced_drip(make_bus)
    made: list[int] = []
    stream = bus.async_client().stream("drip", "drip", {"count": 1000})
    async with contextlib.aclosing(stream):
        async for tick in stream:
            made.append(tick)
            if len(made) == 2:
                break
    span = await client_span()
    _covers(span, made)
    assert span.status.status_code is StatusCode.UNSET
    assert span.attributes is not None and "rpc.jsonrpc.error_code" not in span.attributes
