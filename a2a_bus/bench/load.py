"""Load on a request/response path: callers in flight, rounds taken in turns, CPU.

What the benchmarks measure their paths with (the Kafka benchmark,
:mod:`a2a_bus.bench.kafka`, most of it; the in-memory load and payload sizes too):
sequential latencies, throughput with a number of callers each waiting for its
answer, this process's CPU per request meanwhile, and paths taking turns in
rounds so that load from elsewhere on the machine hits them alike.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import pykka

#: Callers each waiting for its answer, in the measurements the targets are set at.
IN_FLIGHT = 64
#: Requests in flight of the CPU-per-request curve (what grows with a busy caller).
IN_FLIGHT_LEVELS = (1, 16, 64, 256)
#: Turns the paths take (see ``one_in_flight``): at 64 in flight one path's CPU per
#: request moves by up to 1.5x from one 1-second turn to the next on a 2-core machine
#: shared with the broker, so many short turns, not a few long ones.
ROUNDS = 8

Call = Callable[[], Awaitable[None]]
#: A path's fetches so far that returned records, and the records they held (all
#: its consumers together).
Fetched = Callable[[], tuple[int, int]]


class Path(Protocol):
    """One request/response path: started, called many times, stopped."""

    async def start(self) -> None: ...

    async def call(self) -> Any: ...

    async def stop(self) -> None: ...


@dataclass(frozen=True)
class Sizes:
    requests: int  # sequential requests for the latency percentiles
    seconds: float  # per throughput measurement
    publishes: int  # per publish-cost measurement

    @classmethod
    def pick(cls, quick: bool) -> Sizes:
        if quick:
            return cls(100, 1.5, 50)
        env = os.environ.get
        return cls(
            int(env("BENCH_KAFKA_REQUESTS", "400")),
            float(env("BENCH_KAFKA_SECONDS", "8")),
            int(env("BENCH_KAFKA_PUBLISHES", "200")),
        )


# -- measuring ------------------------------------------------------------------------


async def warm_up(call: Call) -> None:
    for _ in range(20):  # connections, metadata, the broker's JIT
        await call()


async def latencies(call: Call, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return samples


async def throughput(call: Call, in_flight: int, seconds: float) -> float:
    """Requests per second with ``in_flight`` callers each waiting for its answer.

    Each caller makes at least one request, so a loop that starts the callers
    late (a collection, another thread holding the GIL) still measures a rate
    rather than none.
    """
    done = 0
    stop_at = time.perf_counter() + seconds

    async def caller() -> None:
        nonlocal done
        while True:
            await call()
            done += 1
            if time.perf_counter() >= stop_at:
                return

    start = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(in_flight)))
    return done / (time.perf_counter() - start)


def percentile_ms(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def one_in_flight(paths: dict[str, Call], sizes: Sizes) -> dict[str, dict[str, float]]:
    """Latency percentiles and 1-in-flight throughput of ``paths``, which take
    turns in ``ROUNDS`` blocks: a load change on the shared machine hits every
    path alike, so their ratio compares like with like."""
    for call in paths.values():
        await warm_up(call)
    samples: dict[str, list[float]] = {name: [] for name in paths}
    rates: dict[str, list[float]] = {name: [] for name in paths}
    block = max(1, sizes.requests // ROUNDS)
    for _ in range(ROUNDS):
        for name, call in paths.items():
            samples[name] += await latencies(call, block)
    for _ in range(ROUNDS):
        for name, call in paths.items():
            rates[name].append(await throughput(call, 1, sizes.seconds / ROUNDS))
    return {
        name: {
            "p50_ms": percentile_ms(samples[name], 0.5),
            "p99_ms": percentile_ms(samples[name], 0.99),
            "rps_1": statistics.fmean(rates[name]),
        }
        for name in paths
    }


async def many_in_flight(
    paths: dict[str, Call], sizes: Sizes, fetched: dict[str, Fetched] | None = None
) -> dict[str, dict[str, Any]]:
    """Throughput of each of ``paths`` at ``IN_FLIGHT``, and this process's CPU per
    request meanwhile; the paths take turns in ``ROUNDS`` blocks, as in
    :func:`one_in_flight`. Each round's figures are kept too (``rounds``: requests
    per second and CPU per request), so a report can say how far they spread.
    ``busy`` is the CPU this process spent per second of wall time meanwhile (the
    cores it kept busy): a path's throughput is its ``busy`` over its CPU per
    request, so two paths' throughput ratio splits into how busy each kept the
    process and what each request cost. For the paths ``fetched`` counts, also the
    records per fetch meanwhile (``records_per_fetch``): how many requests travel
    together."""
    for call in paths.values():
        await warm_up(call)
    counters = fetched or {}
    done = dict.fromkeys(paths, 0.0)
    cpu = dict.fromkeys(paths, 0.0)
    wall = dict.fromkeys(paths, 0.0)
    fetches = {name: [0, 0] for name in counters}
    rounds: dict[str, list[tuple[float, float]]] = {name: [] for name in paths}
    for _ in range(ROUNDS):
        for name, call in paths.items():
            before = counters[name]() if name in counters else (0, 0)
            run = await loaded(call, IN_FLIGHT, sizes.seconds / ROUNDS)
            if name in counters:
                after = counters[name]()
                fetches[name][0] += after[0] - before[0]
                fetches[name][1] += after[1] - before[1]
            done[name] += run.requests
            cpu[name] += run.cpu
            wall[name] += run.wall
            if run.requests:
                rounds[name].append((run.requests / run.wall, run.cpu / run.requests * 1e6))
    found: dict[str, dict[str, Any]] = {
        name: {
            "rps_many": done[name] / wall[name],
            # CPU of this process per request at IN_FLIGHT (all threads)
            "cpu_us": cpu[name] / done[name] * 1e6 if done[name] else 0.0,
            "busy": cpu[name] / wall[name] if wall[name] else 0.0,
            "rounds": rounds[name],
        }
        for name in paths
    }
    for name, (count, records) in fetches.items():
        found[name]["records_per_fetch"] = records / count if count else 0.0
    return found


def round_spread(path: list[tuple[float, float]], baseline: list[tuple[float, float]]) -> str:
    """How the ratios of ``path`` to ``baseline`` spread over the rounds they took
    turns in (paired round by round): throughput and CPU per request, each as its
    median, middle half and extremes."""

    def spread(ratios: list[float]) -> str:
        ordered = sorted(ratios)
        if len(ordered) < 2:
            return f"{ordered[0]:.2f}x"
        low, median, high = statistics.quantiles(ordered, n=4, method="inclusive")
        return (
            f"median {median:.2f}x, middle half {low:.2f}-{high:.2f}x, "
            f"all {ordered[0]:.2f}-{ordered[-1]:.2f}x"
        )

    pairs = list(zip(path, baseline, strict=False))
    rps = spread([p[0] / b[0] for p, b in pairs])
    cpu = spread([p[1] / b[1] for p, b in pairs])
    return f"throughput {rps}; CPU per request {cpu}"


async def cpu_by_in_flight(paths: dict[str, Call], sizes: Sizes) -> dict[str, dict[int, float]]:
    """This process's CPU per request (us) for each of ``paths`` at each of
    ``IN_FLIGHT_LEVELS`` requests in flight; the paths take turns at each level."""
    found: dict[str, dict[int, float]] = {name: {} for name in paths}
    for level in IN_FLIGHT_LEVELS:
        for name, call in paths.items():
            run = await loaded(call, level, sizes.seconds / ROUNDS)
            found[name][level] = run.cpu / run.requests * 1e6 if run.requests else 0.0
    return found


@dataclass(frozen=True)
class LoadedRun:
    requests: float
    cpu: float  # seconds of this process's CPU, all threads
    wall: float


async def loaded(call: Call, in_flight: int, seconds: float) -> LoadedRun:
    """``in_flight`` callers for ``seconds``: requests done, CPU and wall time spent."""
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    rate = await throughput(call, in_flight, seconds)
    wall = time.perf_counter() - wall_start
    return LoadedRun(rate * wall, time.process_time() - cpu_start, wall)


async def stop_actors(actors: Iterable[pykka.ActorRef[Any]]) -> None:
    """Stop ``actors`` without blocking the loop: all asked at once, their ends
    waited for in a worker thread."""
    stopping = [actor.stop(block=False) for actor in actors]
    await asyncio.to_thread(lambda: [future.get() for future in stopping])
