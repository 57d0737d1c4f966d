"""One scale of the ``agents`` benchmark, in a fresh process of its own.

The process starts a bus with no agent, spawns ``agents`` distinct agents one
after the other on the running bus (each started and announced when its spawn
returns), asks each once, counts what the process holds, then sits idle for a
while. Spawning and asking share one time budget; past it the scale did not
finish, and what was reached by then is reported.

``python -m a2a_bus.bench.agents_scale SPEC`` (SPEC: :class:`Spec` as JSON) writes
one JSON object per line on stdout: ``{"step": ..., "done": k, "total": n}`` as it
goes and ``{"result": {...}}`` (:class:`Result`) at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from a2a_bus.bench import census
from a2a_bus.bus import Bus
from a2a_bus.hosting.agent import Agent, method
from a2a_bus.runtime import loops

#: Seconds the bus may take to stop once the result is out.
STOP_SECONDS = 60.0


@dataclass(frozen=True)
class Spec:
    transport: str  # "memory" or "kafka"
    agents: int
    budget: float  # seconds for spawning and the first requests
    idle: float  # seconds of the idle window
    bootstrap: str | None = None
    #: Held by the names of this scale's topics and consumer groups (Kafka).
    prefix: str = "bench"
    #: The brokers' (address, port) pairs, for counting connections to them.
    brokers: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class Result:
    transport: str
    agents: int
    spawned: int = 0
    #: Spawning and every first request done within the budget.
    finished: bool = False
    spawn_s: float | None = None
    answered: int = 0
    first_p50_ms: float | None = None
    first_max_ms: float | None = None
    rss_growth: int | None = None  # bytes, from before the first spawn
    idle_cpu_pct: float | None = None  # process CPU over the idle window, % of one core
    connections: int | None = None  # established TCP connections to the brokers
    connections_before: int | None = None  # the same with no agent yet
    consumers: int | None = None  # AIOKafkaConsumer objects alive
    consumers_before: int | None = None
    groups: int | None = None  # consumer groups of this scale (from the broker)
    members: int | None = None  # their members (from the broker)
    note: str = ""
    #: In memory: seconds to start as many bare threads as agents, in the same
    #: process before the spawning (each agent is an actor thread: the floor).
    threads_s: float | None = None


def agent_classes(count: int, start: int = 0) -> list[type[Agent]]:
    """``count`` distinct agent classes (``scaled-<n>``), each with ``echo(value)``."""

    def echo(self: Agent, value: Any) -> Any:
        return value

    return [
        type(f"Scaled{n}", (Agent,), {"agent_id": f"scaled-{n}", "echo": method(echo)})
        for n in range(start, start + count)
    ]


def thread_starts(count: int) -> float:
    """Seconds to start ``count`` bare daemon threads that wait, as an idle actor's
    does; they are released and joined after the clock stops."""
    release = threading.Event()
    threads = []
    start = time.perf_counter()
    for _ in range(count):
        thread = threading.Thread(target=release.wait, daemon=True)
        thread.start()
        threads.append(thread)
    elapsed = time.perf_counter() - start
    release.set()
    for thread in threads:
        thread.join()
    return elapsed


def emit(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


class Steps:
    """Progress lines, at most about ten a second."""

    def __init__(self, step: str, total: int) -> None:
        self.step, self.total = step, total
        self._next = 0.0

    def __call__(self, done: int) -> None:
        now = time.monotonic()
        if now >= self._next or done == self.total:
            self._next = now + 0.1
            emit({"step": self.step, "done": done, "total": self.total})


def new_bus(spec: Spec) -> Bus:
    if spec.transport == "memory":
        return Bus.memory()
    # One agent per process here: an inbox need not spread over processes, and each
    # partition costs every fetch (docs/kafka.md, Partitions per inbox).
    return Bus.kafka(spec.bootstrap, inbox_partitions=1, bus_options={"prefix": spec.prefix})


async def spawn_all(bus: Bus, classes: list[type[Agent]], deadline: float, result: Result) -> None:
    """Spawn ``classes`` one after the other until the loop's clock reaches ``deadline``."""
    steps = Steps("spawn", len(classes))
    loop = asyncio.get_running_loop()
    for agent in classes:
        # Checked here too: a spawn on the in-memory bus may never give the loop
        # back, so the timeout around it would not fire.
        if loop.time() >= deadline:
            raise TimeoutError
        await bus.aspawn(agent)
        result.spawned += 1
        steps(result.spawned)


async def ask_each(bus: Bus, count: int, samples: list[float], result: Result) -> None:
    """One ``echo`` to each agent, one at a time (each latency is that agent's alone)."""
    client = bus.async_client()
    steps = Steps("first requests", count)
    for n in range(count):
        start = time.perf_counter()
        try:
            answer = await client.request(f"scaled-{n}", "echo", [n])
        except Exception:  # an error or the request's timeout: not answered
            continue
        if answer == n:
            samples.append(time.perf_counter() - start)
            result.answered += 1
            steps(result.answered)


async def measure(spec: Spec) -> Result:
    """Spawn, ask, count and idle as the module docstring says; the result is
    emitted before the bus stops (stopping thousands of agents is not measured)."""
    result = Result(spec.transport, spec.agents)
    bus = new_bus(spec)
    try:
        await bus.astart()
        await _measure(spec, bus, result)
    except Exception as exc:  # the broker went away, say: the figures so far, and why
        result.finished = False
        result.note = f"failed: {type(exc).__name__}: {exc}"
    emit({"result": asdict(result)})
    with contextlib.suppress(Exception):
        await asyncio.wait_for(bus.astop(), STOP_SECONDS)
    return result


async def _measure(spec: Spec, bus: Bus, result: Result) -> None:
    kafka = spec.bootstrap is not None
    classes = agent_classes(spec.agents)
    brokers = census.resolve(spec.brokers) if kafka else set()
    if kafka:
        result.connections_before = census.tcp_connections(brokers)
        result.consumers_before = census.live_consumers()
    rss_before = census.rss_bytes()
    if not kafka:
        # After the RSS taken before: the stacks of these threads, kept for reuse,
        # then count as the actor threads' that reuse them.
        result.threads_s = thread_starts(spec.agents)
    deadline = asyncio.get_running_loop().time() + spec.budget
    start = time.perf_counter()
    samples: list[float] = []
    try:
        async with asyncio.timeout_at(deadline):
            await spawn_all(bus, classes, deadline, result)
            result.spawn_s = time.perf_counter() - start
            rss_after = census.rss_bytes()
            if rss_before is not None and rss_after is not None:
                result.rss_growth = rss_after - rss_before
            await ask_each(bus, spec.agents, samples, result)
        result.finished = result.answered == spec.agents
        if not result.finished:
            result.note = f"{result.answered:,} of {spec.agents:,} answered"
    except TimeoutError:
        result.note = (
            f"did not finish in {spec.budget:g} s: {result.spawned:,} of "
            f"{spec.agents:,} spawned, {result.answered:,} answered"
        )
    if samples:
        result.first_p50_ms = statistics.median(samples) * 1000
        result.first_max_ms = max(samples) * 1000
    if kafka:
        result.connections = census.tcp_connections(brokers)
        result.consumers = census.live_consumers()
    if result.finished:
        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.sleep(spec.idle)
        busy = time.process_time() - cpu
        result.idle_cpu_pct = 100 * busy / (time.perf_counter() - wall)
    if kafka:
        marker = f"{spec.prefix}."  # this scale's groups (their names start with it)
        result.groups, result.members = await census.group_members(str(spec.bootstrap), marker)


def main(argv: list[str]) -> None:
    raw = json.loads(argv[0])
    raw["brokers"] = [tuple(broker) for broker in raw.get("brokers", [])]
    loops.run(measure(Spec(**raw)))
    sys.stdout.flush()
    os._exit(0)  # agents that did not stop in time must not hold the process


if __name__ == "__main__":
    main(sys.argv[1:])
