"""Many agents in one process: what spawning and hosting them costs, scale by scale.

For 10, 100 and 1,000 distinct agents (in memory also 10,000), on the
in-memory transport and on Kafka, each scale in a fresh process
(:mod:`a2a_bus.bench.agents_scale`, so that its memory and CPU figures are its
own):

* spawn time: the agents spawned one after the other on a running bus, each
  started (its actor, its inbox subscription) and announced when its spawn
  returns; then one request to each, which all must answer; in memory beside
  it, the time to start as many bare threads in the same process (each agent
  replica is an actor thread: the floor of a spawn);
* RSS growth over the spawning (``/proc/self/statm``);
* idle CPU: the process's CPU time (all threads) over an idle window after the
  first requests, as % of one core (the default 5 s heartbeat runs in it);
* on Kafka, what the process holds: ``AIOKafkaConsumer`` objects alive (found
  by the garbage collector), members of the scale's consumer groups (as the
  broker describes them), and established TCP connections to the brokers
  (the process's sockets matched against ``/proc/net/tcp``); see
  :mod:`a2a_bus.bench.census`;
* first-request p50: one request to each agent after spawning, one at a time.

Spawning and the first requests of a scale share a time budget
(``BENCH_AGENTS_SECONDS``, default 120 s); past it the scale did not finish,
and the report says how far it got. Targets: 1,000 agents on Kafka spawn in
<= 15 s and all answer; consumers and connections do not grow with the agents
(each scale against 10 agents); 1,000 idle agents use <= 5% of a core; 10,000
agents spawn in memory in <= 10 s.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import IO

from rich.table import Table

from a2a_bus.bench import agents_scale, census, given_broker
from a2a_bus.bench.agents_scale import Result, Spec
from a2a_bus.bench.kafka_topics import delete_run_topics
from a2a_bus.bench.report import Curve, Point, Progress, Report, Row, Target
from a2a_bus.runtime import loops

TITLE = "Agents in one process: spawn, memory, idle CPU, Kafka consumers and connections"
MEMORY_SCALES = (10, 100, 1_000, 10_000)
KAFKA_SCALES = (10, 100, 1_000)
#: Scale -> seconds: the spawn targets.
SPAWN_TARGETS = {"memory": (10_000, 10.0), "kafka": (1_000, 15.0)}
IDLE_TARGET = (1_000, 5.0)  # agents, % of one core
#: Consumers and connections at each scale are held against this scale's.
FLAT_FROM = 10
#: Seconds a scale's process may take beyond its budget and idle window (start,
#: counting, stopping) before it is stopped.
SLACK = 180.0
MIB = 1024 * 1024
#: Longer than a Kafka consumer's session (KafkaSettings.session_timeout_ms).
SESSION_SECONDS = 15.0

#: The spawn curve's series of bare thread starts (the floor of an in-memory spawn).
THREADS_ALONE = "memory: as many bare threads"


@dataclass(frozen=True)
class Sizes:
    memory: tuple[int, ...]
    kafka: tuple[int, ...]
    budget: float  # seconds per scale: spawning and first requests
    idle: float  # seconds of the idle window

    @classmethod
    def pick(cls, quick: bool, environ: Mapping[str, str] | None = None) -> Sizes:
        """The scales and times of a run; ``BENCH_AGENTS_MEMORY`` and ``BENCH_AGENTS_KAFKA``
        (comma-separated agent counts, empty for none), ``BENCH_AGENTS_SECONDS`` and
        ``BENCH_AGENTS_IDLE`` change them."""
        env = os.environ if environ is None else environ
        quick_scales = ((10, 100, 1_000), (10, 100))
        memory, kafka = quick_scales if quick else (MEMORY_SCALES, KAFKA_SCALES)
        return cls(
            _counts(env.get("BENCH_AGENTS_MEMORY"), memory),
            _counts(env.get("BENCH_AGENTS_KAFKA"), kafka),
            float(env.get("BENCH_AGENTS_SECONDS", "60" if quick else "120")),
            # Several heartbeats (every 5 s by default): one more or less moves
            # the figure little.
            float(env.get("BENCH_AGENTS_IDLE", "5" if quick else "30")),
        )


def _counts(text: str | None, default: tuple[int, ...]) -> tuple[int, ...]:
    if text is None:
        return default
    return tuple(int(part) for part in text.split(",") if part.strip())


# -- running the scales ---------------------------------------------------------------


async def run_scale(spec: Spec, progress: Progress | None = None) -> Result:
    """Run one scale in a fresh process; its result, or what is known of it
    when the process gave none in time."""
    with tempfile.TemporaryFile("w+") as errors:
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            agents_scale.__name__,
            json.dumps(asdict(spec)),
            stdout=asyncio.subprocess.PIPE,
            stderr=errors,
        )
        try:
            return await _follow(child, spec, progress, errors)
        finally:
            try:
                await asyncio.wait_for(child.wait(), agents_scale.STOP_SECONDS + 30)
            except TimeoutError:
                child.kill()
                await child.wait()


async def _follow(
    child: asyncio.subprocess.Process, spec: Spec, progress: Progress | None, errors: IO[str]
) -> Result:
    assert child.stdout is not None
    loop = asyncio.get_running_loop()
    give_up = loop.time() + spec.budget + spec.idle + SLACK
    known = Result(spec.transport, spec.agents)
    while True:
        try:
            line = await asyncio.wait_for(child.stdout.readline(), give_up - loop.time())
        except TimeoutError:
            child.kill()
            known.note = f"did not finish in {spec.budget:g} s: {known.spawned:,} spawned"
            return known
        if not line:
            known.note = f"its process ended without a result: {_last_line(errors)}"
            return known
        try:
            message = json.loads(line)
        except ValueError:  # not one of ours (a library writing to stdout, say)
            continue
        if "result" in message:
            return Result(**message["result"])
        if message.get("step") == "spawn":
            known.spawned = message["done"]
        if progress is not None:
            what = f"{spec.transport}, {spec.agents:,} agents: {message['step']}"
            progress(what, message["done"], message["total"])


def _last_line(errors: IO[str]) -> str:
    errors.seek(0)
    lines = [line.strip() for line in errors.read().splitlines() if line.strip()]
    return lines[-1] if lines else "(nothing on stderr)"


async def measure(
    sizes: Sizes, bootstrap: str | None, progress: Progress | None = None
) -> list[Result]:
    run_id = uuid.uuid4().hex[:8]
    brokers = await census.broker_endpoints(bootstrap) if bootstrap else []
    results = []
    for n in sizes.memory:
        results.append(await run_scale(Spec("memory", n, sizes.budget, sizes.idle), progress))
    if bootstrap is None:
        return results
    for n in sizes.kafka:
        prefix = f"bench{run_id}-{n}"
        spec = Spec("kafka", n, sizes.budget, sizes.idle, bootstrap, prefix, brokers)
        results.append(await run_scale(spec, progress))
        # With the dot, "...-10." names this scale's topics, not also those of 100.
        await delete_run_topics(bootstrap, f"{prefix}.")
    if not all(result.finished for result in results if result.transport == "kafka"):
        # A process that did not stop its agents left members behind: gone once
        # their session expires, then their groups can be deleted too.
        await asyncio.sleep(SESSION_SECONDS)
        await delete_run_topics(bootstrap, f"bench{run_id}-")
    return results


# -- the report -----------------------------------------------------------------------


def report(results: Sequence[Result], sizes: Sizes) -> Report:
    out = Report(TITLE)
    by_scale = {(result.transport, result.agents): result for result in results}
    for transport, (scale, seconds) in SPAWN_TARGETS.items():
        result = by_scale.get((transport, scale))
        if result is None:
            continue
        label = f"{transport}, {scale:,} agents: spawn"
        spawned = result.spawn_s if result.spawn_s is not None else math.nan
        if result.spawn_s is None:
            label += f" ({result.note.split(':')[0]}; {result.spawned:,} spawned)"
        out.add(Row(label, spawned, "s", seconds, "target", 1.0))
        if transport == "kafka":
            answered = f"{transport}, {scale:,} agents: answering their first request"
            out.add(Row(answered, result.answered, "agents", scale, "all", 1.0, True))
    for transport in ("memory", "kafka"):
        result = by_scale.get((transport, IDLE_TARGET[0]))
        if result is not None:
            idle = result.idle_cpu_pct if result.idle_cpu_pct is not None else math.nan
            label = f"{transport}, {IDLE_TARGET[0]:,} agents idle: CPU"
            out.add(Row(label, idle, "% of a core", IDLE_TARGET[1], "target", 1.0))
    kafka = [result for result in results if result.transport == "kafka"]
    out.rows.extend(flat_rows(kafka))
    out.tables.append(scale_table(results))
    out.curves.extend(curves(results))
    out.notes.append(
        f"each scale in a fresh process; spawning and first requests within {sizes.budget:g} s "
        f"(BENCH_AGENTS_SECONDS), then {sizes.idle:g} s idle; first requests one at a time"
    )
    if any(result.threads_s is not None for result in results):
        out.notes.append(
            "threads alone: as many bare threads started in the scale's process before its "
            "spawning (each agent replica is an actor thread: the floor of an in-memory spawn)"
        )
    out.notes.append(
        "consumers: AIOKafkaConsumer objects alive in the process (gc); group members: "
        "members of the scale's consumer groups as the broker describes them; connections: "
        "the process's established TCP connections to the brokers (/proc/self/fd matched "
        "against /proc/net/tcp)"
    )
    if not kafka:
        out.notes.append(
            "Kafka not measured: no broker (--kafka BOOTSTRAP or KAFKA_BOOTSTRAP_SERVERS)"
        )
    return out


def flat_rows(kafka: Sequence[Result]) -> list[Row]:
    """Consumers and connections at the largest scale reached against ``FLAT_FROM`` agents."""
    base = next((r for r in kafka if r.agents == FLAT_FROM and r.finished), None)
    reached = [r for r in kafka if r.agents > FLAT_FROM and r.spawned > FLAT_FROM]
    if base is None or not reached:
        return []
    top = reached[-1]
    hosted = f"{top.spawned:,}" if top.finished else f"{top.spawned:,} (of {top.agents:,})"
    rows = []
    for what, unit, value, baseline in (
        ("consumers", "consumers", top.consumers, base.consumers),
        ("group members", "members", top.members, base.members),
        ("broker connections", "connections", top.connections, base.connections),
    ):
        if value is not None and baseline:
            case = f"kafka: {what}, {hosted} vs {FLAT_FROM} agents"
            rows.append(Row(case, value, unit, baseline, f"{FLAT_FROM} agents", 1.0))
    return rows


def scale_table(results: Sequence[Result]) -> Table:
    table = Table(title="At each scale")
    columns = (
        "transport",
        "agents",
        "spawn",
        "threads alone",
        "RSS growth",
        "idle CPU",
        "consumers",
        "group members",
        "connections",
        "first request p50",
        "answered",
        "note",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "transport" else "right")
    for r in results:
        table.add_row(
            r.transport,
            f"{r.agents:,}",
            _figure(r.spawn_s, "{:.2f} s"),
            _figure(r.threads_s, "{:.2f} s"),
            _figure(None if r.rss_growth is None else r.rss_growth / MIB, "{:,.1f} MiB"),
            _figure(r.idle_cpu_pct, "{:.2f}%"),
            _figure(r.consumers, "{:,}"),
            _figure(r.members, "{:,}"),
            _figure(r.connections, "{:,}"),
            _figure(r.first_p50_ms, "{:.2f} ms"),
            f"{r.answered:,}",
            f"[red]{r.note}[/]" if r.note else "",
        )
    return table


def _short(note: str) -> str:
    """A note short enough to write on a plot: what happened, not the counts."""
    what = note.split(":")[0] if note else "did not finish"
    return what.replace(" in ", "\nin ", 1)


def _figure(value: float | None, form: str) -> str:
    return "" if value is None else form.format(value)


def curves(results: Sequence[Result]) -> list[Curve]:
    spawn = Curve(
        "agents-spawn",
        "Spawn time: agents started and announced, one after the other",
        "agents in the process",
        "spawn time (s)",
        log_y=True,
        targets=[
            Target(
                f"target: {transport}, {scale:,} agents in <= {seconds:g} s",
                seconds,
                scale,
                f"{transport} ≤ {seconds:g} s",
            )
            for transport, (scale, seconds) in SPAWN_TARGETS.items()
        ],
    )
    rss = Curve(
        "agents-rss",
        "Resident memory (RSS) added by spawning",
        "agents in the process",
        "RSS growth (MiB)",
        log_y=True,
    )
    idle = Curve(
        "agents-idle-cpu",
        "Idle CPU of the process (all threads, heartbeat included)",
        "agents in the process",
        "% of one core",
        targets=[
            Target(
                f"target: {IDLE_TARGET[0]:,} agents idle <= {IDLE_TARGET[1]:g}% of a core",
                IDLE_TARGET[1],
                IDLE_TARGET[0],
                f"≤ {IDLE_TARGET[1]:g}%",
            )
        ],
    )
    first = Curve(
        "agents-first-request",
        "First request to each agent after spawning, median",
        "agents in the process",
        "latency p50 (ms)",
        log_y=True,
    )
    consumers = Curve(
        "agents-kafka-consumers",
        "Kafka consumers held by the process",
        "agents hosted in the process",
        "consumers / group members",
    )
    connections = Curve(
        "agents-kafka-connections",
        "TCP connections from the process to the brokers",
        "agents hosted in the process",
        "established connections",
    )
    for r in results:
        unfinished = Point(r.agents, None, _short(r.note))
        for curve, value in (
            (spawn, r.spawn_s),
            (rss, None if r.rss_growth is None else r.rss_growth / MIB),
            (idle, r.idle_cpu_pct),
            (first, r.first_p50_ms),
        ):
            point = Point(r.agents, value) if value is not None else unfinished
            curve.series.setdefault(r.transport, []).append(point)
        if r.threads_s is not None:
            spawn.series.setdefault(THREADS_ALONE, []).append(Point(r.agents, r.threads_s))
        if not r.spawned:
            continue
        # Counted with the agents hosted at the end, whether the scale finished or not.
        for curve, what, value in (
            (consumers, "kafka: consumers (objects alive)", r.consumers),
            (consumers, "kafka: group members (broker)", r.members),
            (connections, "kafka", r.connections),
        ):
            if value is not None:
                curve.series.setdefault(what, []).append(Point(r.spawned, value))
    base = next((r for r in results if r.transport == "kafka" and r.agents == FLAT_FROM), None)
    if base is not None:
        for curve, value in ((consumers, base.consumers), (connections, base.connections)):
            if value:
                curve.targets.append(Target(f"target: flat (as at {FLAT_FROM} agents)", value))
    return [c for c in (spawn, rss, idle, first, consumers, connections) if c.series]


def run(
    quick: bool = False, bootstrap: str | None = None, progress: Progress | None = None
) -> Report:
    """Measure every scale (Kafka on ``bootstrap``, default ``KAFKA_BOOTSTRAP_SERVERS``)."""
    bootstrap = given_broker(bootstrap)
    sizes = Sizes.pick(quick)
    return report(loops.run(measure(sizes, bootstrap, progress)), sizes)


if __name__ == "__main__":
    run(bootstrap=sys.argv[1] if len(sys.argv) > 1 else None).print()
