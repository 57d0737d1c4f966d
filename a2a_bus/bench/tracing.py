"""What trace context, loop protection and spans cost a request, in the same run.

**Without an SDK** (``opentelemetry-api`` only, the default) the bus makes no span;
what it adds to a request is a fixed set of steps: a ``traceparent`` started for a
request from outside, the ``calldepth`` check where it is routed, the origin set
around the handler (and read where a handler sends), the caller's context carried
through the portal, the answer's copy of the request's trace, and on Kafka the
bytes of those attributes encoded and decoded both ways. Each step is timed here
with the bus's own functions on a real request event, and their sum is set against
the time of one request through a running bus measured in the same run: in
memory (sequential, the async client on the bus loop) and on Kafka (64 in flight).
Target: at most :data:`API_TARGET` of a request's time.

**With the SDK** (the ``otel`` extra) the same requests run on a second bus
recording every span through a ``BatchSpanProcessor`` (its exporter drops them:
the export is off the request path either way); the figure is its time per
request against the bus without an SDK, taking turns in rounds. No target: it is
reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from a2a_bus.bench.report import Report, Row
from a2a_bus.bus import Bus
from a2a_bus.hosting.agent import Agent, method
from a2a_bus.protocol import Adaptor, CloudEvent, ext, load_structured, new_traceparent
from a2a_bus.protocol.events import adopt_event
from a2a_bus.protocol.formats import dump_structured
from a2a_bus.runtime.tracing import ORIGIN, Origin

#: Largest share of a request's time the API-only path may add.
API_TARGET = 0.03
IN_FLIGHT = 64


class Calc(Agent):
    agent_id = "trace-calc"

    @method
    def subtract(self, minuend: int, subtrahend: int) -> int:
        return minuend - subtrahend


def _per_call(step: Callable[[], Any], count: int) -> float:
    """Seconds one call of ``step`` takes (the best of five runs of ``count``)."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(count):
            step()
        best = min(best, (time.perf_counter() - start) / count)
    return best


def added_work(count: int) -> tuple[float, float]:
    """Seconds the API-only path adds to one request: (in memory, on Kafka)."""
    adaptor = Adaptor()
    message = {"jsonrpc": "2.0", "method": "subtract", "params": [5, 3], "id": 1}
    request = adaptor.from_json(message)[0]
    assert isinstance(request, CloudEvent)
    attributes = request.get_attributes()
    attributes.update(targetagent="trace-calc", replyto="a2a.reply.n1")
    outside = dict(attributes)  # a request from outside: no trace yet
    attributes[ext.TRACEPARENT] = new_traceparent()
    answer = adaptor.response_event(request, {"jsonrpc": "2.0", "result": 2, "id": 1})

    def start_trace() -> None:  # the dispatcher, for a request from outside
        fresh = dict(outside)
        if ext.TRACEPARENT not in fresh:
            fresh[ext.TRACEPARENT] = new_traceparent()

    def check_depth() -> None:  # where the request is routed
        if attributes.get(ext.CALLDEPTH) is not None:
            raise AssertionError

    def origin() -> None:  # the actor sets it around the handler; the client reads it
        token = ORIGIN.set(Origin(attributes, "trace-calc", None))
        ORIGIN.get()
        ORIGIN.reset(token)

    def answer_trace() -> None:  # the answer's copy of the request's trace
        copied: dict[str, Any] = {}
        traceparent = attributes.get(ext.TRACEPARENT)
        if traceparent is not None:
            copied[ext.TRACEPARENT] = traceparent
            if attributes.get(ext.TRACESTATE) is not None:
                raise AssertionError

    idle = _per_call(lambda: None, count)

    def cost(step: Callable[[], Any]) -> float:
        return max(0.0, _per_call(step, count) - idle)

    steps = (start_trace, check_depth, origin, contextvars.copy_context)
    memory = sum(cost(step) for step in steps)
    wire = 0.0
    for event in (request, answer):  # each encoded by its sender, decoded by its reader
        plain = {k: v for k, v in event.get_attributes().items() if k != ext.TRACEPARENT}
        without = adopt_event(plain, event.get_data())
        wire += max(0.0, cost(_round_trip(event)) - cost(_round_trip(without)))
    return memory, memory + cost(answer_trace) + wire


def _round_trip(event: CloudEvent) -> Callable[[], Any]:
    return lambda: load_structured(dump_structured(event))


def _sdk_provider() -> Any:
    """An SDK tracer provider whose batch processor drops what it exports; None
    without the SDK (the ``otel`` extra)."""
    try:
        from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )
    except ImportError:
        return None

    class Dropped(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropped()))
    return provider


async def _sequential(bus: Bus, count: int) -> float:
    """Seconds per request, one at a time, the async client on the bus loop."""
    client = bus.async_client()
    start = time.perf_counter()
    for i in range(count):
        await client.request("trace-calc", "subtract", [i, 1])
    return (time.perf_counter() - start) / count


async def _in_flight(bus: Bus, count: int) -> float:
    """Seconds per request with :data:`IN_FLIGHT` requests in flight."""
    client = bus.async_client()
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one(i: int) -> None:
        async with gate:
            await client.request("trace-calc", "subtract", [i, 1])

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(count)))
    return (time.perf_counter() - start) / count


def _take_turns(
    buses: dict[str, Bus],
    measure: Callable[[Bus, int], Any],
    count: int,
    rounds: int,
) -> dict[str, float]:
    """Median seconds per request of each bus, the buses taking turns in rounds."""
    samples: dict[str, list[float]] = {name: [] for name in buses}
    for bus in buses.values():  # warm-up
        asyncio.run_coroutine_threadsafe(measure(bus, max(50, count // 5)), bus.loop).result()
    for _ in range(rounds):
        for name, bus in buses.items():
            future = asyncio.run_coroutine_threadsafe(measure(bus, count), bus.loop)
            samples[name].append(future.result())
    return {name: statistics.median(values) for name, values in samples.items()}


def _pair(make: Callable[..., Bus]) -> dict[str, Bus]:
    """The API-only bus, and one recording spans when the SDK is installed."""
    buses = {"api": make()}
    provider = _sdk_provider()
    if provider is not None:
        buses["sdk"] = make(tracer_provider=provider)
    return buses


def run(quick: bool = False, bootstrap: str | None = None, rounds: int = 5) -> Report:
    count = 300 if quick else 2000
    report = Report("Trace context, loop protection and spans: cost per request (lower is better)")
    memory_added, kafka_added = added_work(20_000 if quick else 200_000)
    buses = _pair(lambda **options: Bus.memory(heartbeat=3600, **options))
    memory = _measure(buses, _sequential, count, rounds)
    _rows(report, "in memory, sequential", memory, memory_added)
    if bootstrap is None:
        report.notes.append(
            "Kafka: not measured (no bootstrap: --kafka or KAFKA_BOOTSTRAP_SERVERS)"
        )
        return report

    def kafka_bus(**options: Any) -> Bus:
        prefix = f"bt{uuid.uuid4().hex[:8]}"
        return Bus.kafka(bootstrap, bus_options={"prefix": prefix, "heartbeat": 3600, **options})

    kafka = _measure(_pair(kafka_bus), _in_flight, count // 2, rounds)
    _rows(report, f"Kafka, {IN_FLIGHT} in flight", kafka, kafka_added)
    return report


def _measure(
    buses: dict[str, Bus], measure: Callable[[Bus, int], Any], count: int, rounds: int
) -> dict[str, float]:
    with contextlib.ExitStack() as running:
        for bus in buses.values():
            bus.spawn(Calc)
            running.enter_context(bus)
        return _take_turns(buses, measure, count, rounds)


def _rows(report: Report, path: str, seconds: dict[str, float], added: float) -> None:
    api = seconds["api"] * 1e6
    report.add(
        Row(
            f"API-only trace work per request, {path}",
            added * 1e6,
            "us",
            api,
            "one request (API-only bus)",
            API_TARGET,
        )
    )
    report.add(Row(f"request, {path}, API-only bus", api, "us"))
    if "sdk" not in seconds:
        report.notes.append(f"{path}: with the SDK not measured (pip install 'a2a-bus[otel]')")
        return
    sdk = seconds["sdk"] * 1e6
    report.add(Row(f"request, {path}, SDK + batch processor", sdk, "us", api, "API-only bus"))
    report.notes.append(
        f"{path}: {1e6 / api:,.0f} requests/s API-only, {1e6 / sdk:,.0f} with the SDK "
        f"({(sdk / api - 1) * 100:+.0f}% per request)"
    )


if __name__ == "__main__":
    run().print()
