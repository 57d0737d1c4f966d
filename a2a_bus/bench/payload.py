"""Payload size: what a request costs as its params grow, beside baselines carrying the same JSON.

Sequential requests to an agent that answers with its argument, so the response
carries as much as the request; p50 and this process's CPU per request, by the
size of the params as JSON. Each size is measured on each path in turn, in rounds.

* In memory the baseline is the hand-off floor that also serialises the payload
  once each way with orjson: the least any bus does that refuses, where a message
  is made, what no transport could carry (the bus checks a request's params and a
  handler's result that way; nothing else it does grows with the payload).
* On Kafka the baselines are the floor path (:mod:`a2a_bus.bench.kafka_floor`),
  whose records carry the same request and response events, and a raw aiokafka
  ping-pong whose records carry the same JSON bytes, with no JSON work at all.

A ratio that grows with the size means the bus does more per byte than its
baseline: an extra copy, encoding or check of the payload shows at the large sizes.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
import pykka

from a2a_bus.bench import given_broker
from a2a_bus.bench.kafka_floor import FloorRequests
from a2a_bus.bench.kafka_paths import BenchEcho, BusRequests
from a2a_bus.bench.kafka_raw import RawPingPong
from a2a_bus.bench.kafka_topics import delete_run_topics
from a2a_bus.bench.load import Call, latencies, stop_actors, warm_up
from a2a_bus.bench.report import Curve, Point, Progress, Report, Row
from a2a_bus.bus import Bus
from a2a_bus.runtime import loops

TITLE = "Payload size: request/response by bytes of params"
#: Bytes of JSON in the params (the response carries as many); the last is close
#: to the most one message may carry (``a2a_bus.core.payload.MAX_PAYLOAD_BYTES``).
SIZES = (100, 1_000, 10_000, 100_000, 900_000)
QUICK_SIZES = (100, 10_000, 900_000)
#: Rounds in which the paths take turns, at each size.
ROUNDS = 4


@dataclass(frozen=True)
class Sample:
    """One path at one size: p50 of the round trips and CPU per request."""

    p50_us: float
    cpu_us: float


def payload_of(size: int) -> list[dict[str, Any]]:
    """Records as an API sends them, ``size`` bytes of JSON within one record's size."""
    records: list[dict[str, Any]] = []
    written = 2  # the brackets
    while True:
        record = {"id": len(records), "name": f"item-{len(records):07d}", "score": 0.5}
        length = len(orjson.dumps(record)) + (1 if records else 0)
        if records and written + length > size:
            return records
        records.append(record)
        written += length


def requests_at(size: int, quick: bool) -> int:
    """Requests per path at ``size``: fewer as each one carries more."""
    most, budget = (100, 4_000_000) if quick else (800, 40_000_000)
    return max(ROUNDS * 4, min(most, budget // size))


async def _timed(call: Call, count: int, samples: list[float]) -> float:
    """Run ``call`` ``count`` times, adding each round trip to ``samples``; CPU spent."""
    cpu = time.process_time()
    samples.extend(await latencies(call, count))
    return time.process_time() - cpu


async def in_turns(paths: Mapping[str, Call], count: int) -> dict[str, Sample]:
    """Each path ``count`` times, taking turns in :data:`ROUNDS` rounds."""
    samples: dict[str, list[float]] = {name: [] for name in paths}
    cpu = dict.fromkeys(paths, 0.0)
    per_round = max(1, count // ROUNDS)
    for _ in range(ROUNDS):
        for name, call in paths.items():
            cpu[name] += await _timed(call, per_round, samples[name])
    return {
        name: Sample(statistics.median(samples[name]) * 1e6, cpu[name] / len(samples[name]) * 1e6)
        for name in paths
    }


class _CheckingEcho(pykka.ThreadingActor):
    """The floor's actor: checks the result as the bus's actors do (orjson), then
    answers on the loop with ``call_soon_threadsafe``."""

    def on_receive(self, message: Any) -> None:
        loop, future, value = message
        orjson.dumps(value)
        loop.call_soon_threadsafe(future.set_result, value)


def _floor_call(actor: pykka.ActorRef[_CheckingEcho], params: list[Any]) -> Call:
    async def call() -> Any:
        orjson.dumps(params)  # the caller's check of what it sends
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        actor.tell((loop, future, params[0]))
        return await future

    return call


async def measure_memory(
    sizes: tuple[int, ...], quick: bool, progress: Progress | None = None
) -> dict[int, dict[str, Sample]]:
    """The bus (the async client on its loop) and the floor, at each size."""
    out: dict[int, dict[str, Sample]] = {}
    actor = _CheckingEcho.start()
    try:
        bus = Bus.memory(pin_cpu="off")
        bus.spawn(BenchEcho)
        async with bus:
            client = bus.async_client()
            for done, size in enumerate(sizes):
                if progress is not None:
                    progress(f"in memory, {size:,} bytes", done, len(sizes))
                params = [payload_of(size)]

                async def on_bus(params: list[Any] = params) -> Any:
                    return await client.request("bench-echo", "echo", params)

                paths = {"bus": on_bus, "floor": _floor_call(actor, params)}
                await in_turns(paths, ROUNDS)  # warm: the payload's first copies
                out[size] = await in_turns(paths, requests_at(size, quick))
    finally:
        await stop_actors([actor])
    return out


async def measure_kafka(
    bootstrap: str, sizes: tuple[int, ...], quick: bool, progress: Progress | None = None
) -> dict[int, dict[str, Sample]]:
    """The bus, the floor path and raw aiokafka on one broker, at each size."""
    run_id = uuid.uuid4().hex[:8]
    bus, floor, raw = (
        BusRequests(bootstrap, run_id),
        FloorRequests(bootstrap, run_id),
        RawPingPong(bootstrap, run_id),
    )
    started: list[BusRequests | FloorRequests | RawPingPong] = []
    out: dict[int, dict[str, Sample]] = {}
    try:
        for path in (bus, floor, raw):
            await path.start()
            started.append(path)
            await warm_up(path.call)
        for done, size in enumerate(sizes):
            if progress is not None:
                progress(f"on Kafka, {size:,} bytes", done, len(sizes))
            payload = payload_of(size)
            bus.payload = floor.payload = payload
            raw.payload = orjson.dumps([payload])
            paths = {"bus": bus.call, "floor": floor.call, "raw": raw.call}
            await in_turns(paths, ROUNDS)
            out[size] = await in_turns(paths, requests_at(size, quick))
    finally:
        for path in started:
            await path.stop()
        await delete_run_topics(bootstrap, run_id)
    return out


async def measure(
    bootstrap: str | None, quick: bool, progress: Progress | None = None
) -> dict[str, dict[int, dict[str, Sample]]]:
    sizes = QUICK_SIZES if quick else SIZES
    results: dict[str, dict[int, dict[str, Sample]]] = {
        "memory": await measure_memory(sizes, quick, progress)
    }
    if bootstrap:
        results["kafka"] = await measure_kafka(bootstrap, sizes, quick, progress)
    return results


def _size_text(size: int) -> str:
    return f"{size / 1000:g} kB" if size >= 1000 else f"{size} B"


def report(results: dict[str, dict[int, dict[str, Sample]]]) -> Report:
    """Rows of the bus beside its baselines at each size, and the curves."""
    out = Report(TITLE)
    baselines = {"memory": ("floor",), "kafka": ("floor", "raw")}
    for where, by_size in results.items():
        label = "in memory" if where == "memory" else "Kafka"
        for size, paths in by_size.items():
            for name in baselines[where]:
                out.add(
                    Row(
                        f"{label}, {_size_text(size)}: p50",
                        paths["bus"].p50_us,
                        "us",
                        paths[name].p50_us,
                        name,
                    )
                )
        for field, what in (("p50_us", "round trip p50 (µs)"), ("cpu_us", "CPU per request (µs)")):
            series = {
                name: [Point(size, getattr(paths[name], field)) for size, paths in by_size.items()]
                for name in ("bus", *baselines[where])
            }
            kind = "p50" if field == "p50_us" else "cpu"
            title = f"{label}: {what.split(' (')[0]}, by bytes of params"
            curve = Curve(f"payload-{where}-{kind}", title, "bytes of params (JSON)", what, series)
            curve.log_y = True
            out.curves.append(curve)
        first, last = min(by_size), max(by_size)
        growth = ", ".join(
            f"vs {name} {by_size[first]['bus'].cpu_us / by_size[first][name].cpu_us:.2f}x "
            f"-> {by_size[last]['bus'].cpu_us / by_size[last][name].cpu_us:.2f}x"
            for name in baselines[where]
        )
        out.notes.append(
            f"{label}: the bus's CPU per request from {_size_text(first)} to "
            f"{_size_text(last)} of params: {growth} (a ratio that grows: more work per byte)"
        )
    if "kafka" not in results:
        out.notes.append("Kafka not measured: no broker (--kafka or KAFKA_BOOTSTRAP_SERVERS)")
    out.notes.append(
        "sequential requests to an agent that answers with its argument; memory floor = "
        "a pykka hop that serialises the payload each way (the checks the bus makes); Kafka "
        "floor = raw aiokafka plus the least per-event work (a2a_bus/bench/kafka_floor.py); "
        "raw = aiokafka carrying the same JSON bytes; CPU is this process's, all threads"
    )
    return out


def run(
    quick: bool = False, bootstrap: str | None = None, progress: Progress | None = None
) -> Report:
    """Measure in memory, and on the broker at ``bootstrap`` (default:
    ``KAFKA_BOOTSTRAP_SERVERS``) when there is one."""
    bootstrap = given_broker(bootstrap)
    return report(loops.run(measure(bootstrap, quick, progress)))


if __name__ == "__main__":
    run(bootstrap=sys.argv[1] if len(sys.argv) > 1 else None).print()
