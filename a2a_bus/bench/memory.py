"""In-memory request/response through the bus, beside a raw pykka ``ask``.

Both run in the same process and the same run. The baseline is the least a
threaded actor round trip costs: a plain thread asks a pykka actor and blocks
on the answer. The bus path is a full JSON-RPC request: event mapping,
routing, the in-memory transport's consumer group, a supervised pykka actor
(``tell`` in, ``call_soon_threadsafe`` out) and correlation — measured with
the async client on the bus loop (two thread hand-offs, like ``ask``) and with
the sync client from another thread (four hand-offs). Target: async p50 <= 2x ``ask``.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pykka

from a2a_bus.agent import Agent, method
from a2a_bus.bench.report import Report, Row
from a2a_bus.bus import Bus

TARGET = 2.0


class _Echo(pykka.ThreadingActor):
    def on_receive(self, message: Any) -> Any:
        return message


class Calc(Agent):
    agent_id = "bench-calc"

    @method
    def subtract(self, minuend: int, subtrahend: int) -> int:
        return minuend - subtrahend


@dataclass(frozen=True)
class Timings:
    p50_us: float
    p99_us: float
    per_sec: float

    @classmethod
    def of(cls, samples: list[float]) -> Timings:
        ordered = sorted(samples)
        return cls(
            statistics.median(ordered) * 1e6,
            ordered[max(0, int(len(ordered) * 0.99) - 1)] * 1e6,
            len(ordered) / sum(ordered),
        )


def _timed(call: Callable[[int], Any], n: int) -> Timings:
    for i in range(min(n, 500)):  # warm-up
        call(i)
    samples = []
    for i in range(n):
        start = time.perf_counter()
        call(i)
        samples.append(time.perf_counter() - start)
    return Timings.of(samples)


def _pykka_ask(n: int) -> Timings:
    ref = _Echo.start()
    try:
        return _timed(lambda i: ref.ask({"minuend": i, "subtrahend": 1}), n)
    finally:
        ref.stop()


async def _bus_async(bus: Bus, n: int) -> Timings:
    client = bus.async_client()
    for i in range(min(n, 500)):
        await client.request("bench-calc", "subtract", [i, 1])
    samples = []
    for i in range(n):
        start = time.perf_counter()
        await client.request("bench-calc", "subtract", [i, 1])
        samples.append(time.perf_counter() - start)
    return Timings.of(samples)


def _bus_sync(bus: Bus, n: int) -> Timings:
    client = bus.client()
    return _timed(lambda i: client.request("bench-calc", "subtract", [i, 1]), n)


def run(quick: bool = False, requests: int | None = None) -> Report:
    """Sequential requests; ratios are against the pykka ``ask`` of the same run."""
    n = requests or (1000 if quick else 5000)
    ask = _pykka_ask(n)
    with Bus.memory() as bus:
        bus.spawn(Calc)
        on_loop = asyncio.run_coroutine_threadsafe(_bus_async(bus, n), bus.loop).result()
        from_thread = _bus_sync(bus, n)
    report = Report(f"In-memory request/response, {n:,} sequential requests (lower is better)")
    baseline = "pykka ask"
    report.add(
        Row("p50, async client on the bus loop", on_loop.p50_us, "us", ask.p50_us, baseline, TARGET)
    )
    report.add(Row("p99, async client on the bus loop", on_loop.p99_us, "us", ask.p99_us, baseline))
    report.add(
        Row("p50, sync client from a thread", from_thread.p50_us, "us", ask.p50_us, baseline)
    )
    report.add(
        Row("p99, sync client from a thread", from_thread.p99_us, "us", ask.p99_us, baseline)
    )
    report.notes.append(
        f"requests/s: pykka ask {ask.per_sec:,.0f}, bus async {on_loop.per_sec:,.0f}, "
        f"bus sync {from_thread.per_sec:,.0f}"
    )
    return report


if __name__ == "__main__":
    run().print()
