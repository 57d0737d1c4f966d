"""In-memory request/response through the bus, beside a raw pykka ``ask``.

Both run in the same process and the same run. The baseline is the least a
threaded actor round trip costs: a plain thread asks a pykka actor and blocks
on the answer. The bus path is a full JSON-RPC request: event mapping,
routing, the in-memory transport's consumer group, a supervised pykka actor
(``tell`` in, ``call_soon_threadsafe`` out), the response event on the reply
topic and correlation — measured with the async client on the bus loop (two
thread hand-offs, like ``ask``) and with the sync client from another thread
(four hand-offs). Target: async round trip <= 2x ``ask``.

Run as a script to print a table; import ``run(...) -> dict`` from code.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any

import pykka
from rich.console import Console
from rich.table import Table

from a2a_bus import Agent, Bus, method

TARGET = 2.0


class _Echo(pykka.ThreadingActor):
    def on_receive(self, message: Any) -> Any:
        return message


class Calc(Agent):
    agent_id = "bench-calc"

    @method
    def subtract(self, minuend: int, subtrahend: int) -> int:
        return minuend - subtrahend


def _percentiles(samples: list[float]) -> dict[str, float]:
    samples = sorted(samples)
    return {
        "p50_us": statistics.median(samples) * 1e6,
        "p99_us": samples[int(len(samples) * 0.99) - 1] * 1e6,
        "per_sec": len(samples) / sum(samples),
    }


def _pykka_ask(n: int) -> dict[str, float]:
    ref = _Echo.start()
    try:
        for i in range(min(n, 500)):  # warm-up
            ref.ask(i)
        samples = []
        for i in range(n):
            start = time.perf_counter()
            ref.ask({"minuend": i, "subtrahend": 1})
            samples.append(time.perf_counter() - start)
    finally:
        ref.stop()
    return _percentiles(samples)


async def _bus_async(bus: Bus, n: int) -> dict[str, float]:
    client = bus.async_client()
    for i in range(min(n, 500)):
        await client.request("bench-calc", "subtract", [i, 1])
    samples = []
    for i in range(n):
        start = time.perf_counter()
        await client.request("bench-calc", "subtract", [i, 1])
        samples.append(time.perf_counter() - start)
    return _percentiles(samples)


def _bus_sync(bus: Bus, n: int) -> dict[str, float]:
    client = bus.client()
    for i in range(min(n, 500)):
        client.request("bench-calc", "subtract", [i, 1])
    samples = []
    for i in range(n):
        start = time.perf_counter()
        client.request("bench-calc", "subtract", [i, 1])
        samples.append(time.perf_counter() - start)
    return _percentiles(samples)


def run(n: int = 5000) -> dict[str, Any]:
    """Measure all three in one run; ratios are against the pykka ``ask`` p50."""
    baseline = _pykka_ask(n)
    with Bus.memory() as bus:
        bus.spawn(Calc)
        on_loop = asyncio.run_coroutine_threadsafe(_bus_async(bus, n), bus.loop).result()
        from_thread = _bus_sync(bus, n)
    ratio = on_loop["p50_us"] / baseline["p50_us"]
    return {
        "requests": n,
        "pykka_ask": baseline,
        "bus_async": on_loop,
        "bus_sync": from_thread,
        "ratio_async_p50": ratio,
        "ratio_sync_p50": from_thread["p50_us"] / baseline["p50_us"],
        "target": TARGET,
        "met": ratio <= TARGET,
    }


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    result = run(n)
    table = Table(title=f"In-memory request/response, {n} sequential requests")
    for column in ("path", "p50 µs", "p99 µs", "req/s", "p50 vs ask"):
        table.add_column(column, justify="right" if column != "path" else "left")
    base = result["pykka_ask"]["p50_us"]
    for label, key in (
        ("raw pykka ask (thread)", "pykka_ask"),
        ("bus request, async client on the bus loop", "bus_async"),
        ("bus request, sync client from a thread", "bus_sync"),
    ):
        row = result[key]
        table.add_row(
            label,
            f"{row['p50_us']:.1f}",
            f"{row['p99_us']:.1f}",
            f"{row['per_sec']:.0f}",
            f"{row['p50_us'] / base:.2f}x",
        )
    console = Console()
    console.print(table)
    verdict = "met" if result["met"] else "NOT met"
    console.print(f"target: async p50 <= {TARGET}x pykka ask -> {verdict}")
    return 0 if result["met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
