"""Kafka: bus request/response and publish cost, beside a raw aiokafka ping-pong.

Everything runs in one process, on the same broker, in the same run; the paths
take turns in rounds (raw, bus, exactly_once and floor at 1 request in flight,
all five at 64), so load from elsewhere on the machine hits them alike:

* raw (the baseline): an aiokafka producer/consumer pair answering on a reply
  topic, with the bus's producer guarantees (idempotent, ``acks=all``); the
  responder auto-commits;
* bus: ``Bus.kafka(...)`` hosting a real agent, called with the async
  client's ``request`` (JSON-RPC -> CloudEvent, routing, the agent's inbox
  group with in-order manual commits, dedup and leases, a supervised pykka
  actor, the response event on the reply topic, correlation);
* exactly_once: the bus path with ``delivery="exactly_once"`` (the agent's
  answers and inbox commits in Kafka transactions, every consumer
  ``read_committed``), compared with the bus path;
* transport (for reading the figures, no target): the same request/response
  over two bare ``KafkaTransport`` objects, without agents and correlator;
* floor (for reading, no target): the raw pair plus the least per-event work any
  bus on aiokafka, pykka and CloudEvents must do (:mod:`a2a_bus.bench.kafka_floor`);
* publish cost: median acknowledged publish with 1, 10 and 50 subscribing
  groups listening in another process.

The broker comes from ``KAFKA_BOOTSTRAP_SERVERS`` (or ``bootstrap=``); without
one the report says so and measures nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import sys
import time
import uuid
from typing import Any

from a2a_bus.bench import given_broker
from a2a_bus.bench.kafka_floor import FloorRequests
from a2a_bus.bench.kafka_paths import BusRequests, TransportRequests
from a2a_bus.bench.kafka_raw import TUNING, RawPingPong
from a2a_bus.bench.kafka_topics import delete_run_topics
from a2a_bus.bench.load import (
    IN_FLIGHT,
    ROUNDS,
    Path,
    Sizes,
    cpu_by_in_flight,
    many_in_flight,
    one_in_flight,
    round_spread,
)
from a2a_bus.bench.report import Curve, Point, Progress, Report, Row, Target, quiet
from a2a_bus.bench.retried_writes import counting_retried_writes
from a2a_bus.protocol import new_event
from a2a_bus.runtime import loops
from a2a_bus.transport.base import Delivery
from a2a_bus.transport.kafka.transport import KafkaTransport

TITLE = "Kafka: bus vs raw aiokafka (same broker, same run)"
SUBSCRIBERS = (1, 10, 50)
#: Largest publish cost with more subscribers, as a multiple of one subscriber's.
PUBLISH_TARGET = 1.5
#: p50 at 1 in flight, as a multiple of raw aiokafka's.
P50_TARGET = 1.3
#: At 64 in flight, against the floor path: least throughput, most CPU per request.
FLOOR_THROUGHPUT_TARGET = 0.85
FLOOR_CPU_TARGET = 1.25
# -- publish cost -----------------------------------------------------------------------


async def listen(bootstrap: str, topic: str, groups: int) -> None:
    """Child process: ``groups`` subscribing groups on ``topic`` until stdin closes."""
    listeners = KafkaTransport(bootstrap, dlq_topic=f"{topic}.dlq", **TUNING)
    await listeners.start()

    async def handler(delivery: Delivery) -> None:
        return None

    await asyncio.gather(
        *(listeners.subscribe([topic], f"sub{i}.{topic}", handler) for i in range(groups))
    )
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await listeners.stop()


async def publish_cost(
    bootstrap: str, run_id: str, subscribers: int, publishes: int
) -> tuple[float, float]:
    """Median microseconds per acknowledged publish with ``subscribers`` groups
    listening (in another process, so their work does not share this loop), and
    records written per publish."""
    topic = f"bench.fanout.{subscribers}.{run_id}"
    publisher = KafkaTransport(bootstrap, dlq_topic=f"bench.dlq.{run_id}", **TUNING)
    await publisher.start()
    await publisher.ensure_topics([topic])
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        __name__,
        "--listen",
        bootstrap,
        topic,
        str(subscribers),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        ready = await asyncio.wait_for(child.stdout.readline(), 300)
        if ready.strip() != b"ready":
            raise RuntimeError("the listener process did not start")
        for _ in range(20):  # warm-up
            await publisher.publish(topic, new_event({"type": "bench", "source": "bench"}, {}))
        produced = publisher.metrics.produced
        samples = []
        for _ in range(publishes):
            event = new_event({"type": "bench", "source": "bench"}, {"x": 1})
            start = time.perf_counter()
            await publisher.publish(topic, event)
            samples.append(time.perf_counter() - start)
        writes = (publisher.metrics.produced - produced) / publishes
        return statistics.median(samples) * 1e6, writes
    finally:
        if child.stdin is not None:
            child.stdin.close()
        try:
            await asyncio.wait_for(child.wait(), 60)
        except TimeoutError:
            child.kill()
            await child.wait()
        await publisher.stop()


# -- the run ----------------------------------------------------------------------------


async def measure(bootstrap: str, sizes: Sizes, progress: Progress | None = None) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:8]
    try:
        with counting_retried_writes() as retried:
            results = await _measure(bootstrap, sizes, run_id, progress or quiet)
        results["retried_writes"] = retried.count
        return results
    finally:
        await delete_run_topics(bootstrap, run_id)


async def _measure(bootstrap: str, sizes: Sizes, run_id: str, progress: Progress) -> dict[str, Any]:
    bus, bare = BusRequests(bootstrap, run_id), TransportRequests(bootstrap, run_id)
    floor = FloorRequests(bootstrap, run_id)
    paths: dict[str, Path] = {
        "raw": RawPingPong(bootstrap, run_id),
        "bus": bus,
        "exactly_once": BusRequests(bootstrap, run_id, "exactly_once"),
        "transport": bare,
        "floor": floor,
    }
    fetched = {"bus": bus.fetched, "transport": bare.fetched, "floor": floor.fetched}
    steps = 4 + len(SUBSCRIBERS)
    async with contextlib.AsyncExitStack() as running:
        progress("starting the paths", 0, steps)
        for path in paths.values():
            await path.start()
            running.push_async_callback(path.stop)
        progress("1 request in flight", 1, steps)
        results: dict[str, Any] = await one_in_flight(
            {name: paths[name].call for name in ("raw", "bus", "exactly_once", "floor")},
            sizes,
        )
        progress(f"{IN_FLIGHT} requests in flight", 2, steps)
        for name, figures in (
            await many_in_flight({name: path.call for name, path in paths.items()}, sizes, fetched)
        ).items():
            results.setdefault(name, {}).update(figures)
        progress("CPU by requests in flight", 3, steps)
        results["cpu_by_in_flight"] = await cpu_by_in_flight(
            {name: paths[name].call for name in ("bus", "floor")}, sizes
        )
    results["publish_us"] = {}
    results["writes_per_publish"] = {}
    for done, n in enumerate(SUBSCRIBERS, start=4):
        progress(f"publish to {n} subscribers", done, steps)
        cost, writes = await publish_cost(bootstrap, run_id, n, sizes.publishes)
        results["publish_us"][n] = cost
        results["writes_per_publish"][n] = writes
    return results


def report(results: dict[str, Any]) -> Report:
    raw, bus, bare = results["raw"], results["bus"], results["transport"]
    out = Report(TITLE)
    floor = results["floor"]
    out.add(Row("request/response p50", bus["p50_ms"], "ms", raw["p50_ms"], "raw", P50_TARGET))
    out.add(Row("request/response p99", bus["p99_ms"], "ms", raw["p99_ms"], "raw"))
    out.add(Row("throughput, 1 in flight", bus["rps_1"], "req/s", raw["rps_1"], "raw", None, True))
    out.add(
        Row(
            f"throughput, {IN_FLIGHT} in flight",
            bus["rps_many"],
            "req/s",
            raw["rps_many"],
            "raw",
            None,
            True,
        )
    )
    out.add(
        Row(
            f"throughput, {IN_FLIGHT} in flight, vs floor",
            bus["rps_many"],
            "req/s",
            floor["rps_many"],
            "floor",
            FLOOR_THROUGHPUT_TARGET,
            True,
        )
    )
    out.add(Row("CPU per request, 64 in flight", bus["cpu_us"], "us", raw["cpu_us"], "raw"))
    once = results["exactly_once"]
    out.add(Row("exactly_once: request/response p50", once["p50_ms"], "ms", bus["p50_ms"], "bus"))
    out.add(Row("exactly_once: request/response p99", once["p99_ms"], "ms", bus["p99_ms"], "bus"))
    out.add(
        Row(
            f"exactly_once: throughput, {IN_FLIGHT} in flight",
            once["rps_many"],
            "req/s",
            bus["rps_many"],
            "bus",
            None,
            True,
        )
    )
    out.add(Row("exactly_once: CPU per request", once["cpu_us"], "us", bus["cpu_us"], "bus"))
    out.add(
        Row(
            "CPU per request, 64 in flight, vs floor",
            bus["cpu_us"],
            "us",
            floor["cpu_us"],
            "floor",
            FLOOR_CPU_TARGET,
        )
    )
    out.add(
        Row(
            f"transport only: throughput, {IN_FLIGHT} in flight",
            bare["rps_many"],
            "req/s",
            raw["rps_many"],
            "raw",
            None,
            True,
        )
    )
    out.add(Row("transport only: CPU per request", bare["cpu_us"], "us", raw["cpu_us"], "raw"))
    out.add(
        Row(
            f"floor: throughput, {IN_FLIGHT} in flight",
            floor["rps_many"],
            "req/s",
            raw["rps_many"],
            "raw",
            None,
            True,
        )
    )
    out.add(Row("floor: CPU per request", floor["cpu_us"], "us", raw["cpu_us"], "raw"))
    if "p50_ms" in floor:  # what any bus on this stack adds to raw's latency, for reading p50
        out.add(Row("floor: request/response p50", floor["p50_ms"], "ms", raw["p50_ms"], "raw"))
    base = results["publish_us"][SUBSCRIBERS[0]]
    for n, cost in results["publish_us"].items():
        target = PUBLISH_TARGET if n != SUBSCRIBERS[0] else None
        out.add(Row(f"publish, {n} subscribers", cost, "us", base, "1 subscriber", target))
    out.curves.append(
        Curve(
            "kafka-publish-cost",
            "Kafka: acknowledged publish, median, by subscribing groups",
            "consumer groups subscribed to the topic",
            "publish (µs)",
            {"kafka": [Point(n, cost) for n, cost in results["publish_us"].items()]},
            [Target(f"target: <= {PUBLISH_TARGET}x of 1 subscriber", PUBLISH_TARGET * base)],
        )
    )
    by_level = results.get("cpu_by_in_flight")
    if by_level:
        out.curves.append(
            Curve(
                "kafka-cpu-by-in-flight",
                "Kafka: this process's CPU per request, by requests in flight",
                "requests in flight",
                "CPU per request (µs)",
                {name: [Point(n, us) for n, us in c.items()] for name, c in by_level.items()},
                [
                    Target(
                        f"target at {IN_FLIGHT}: <= {FLOOR_CPU_TARGET}x the floor",
                        FLOOR_CPU_TARGET * by_level["floor"][IN_FLIGHT],
                        IN_FLIGHT,
                        f"{FLOOR_CPU_TARGET}x floor",
                    )
                ],
                log_y=True,  # one in flight costs ten times more: each request waits alone
            )
        )
        levels = "; ".join(
            f"{name} " + ", ".join(f"{n}: {us:.0f}" for n, us in costs.items())
            for name, costs in by_level.items()
        )
        out.notes.append(f"CPU per request (us) by requests in flight: {levels}")
    retried = results.get("retried_writes")
    if retried:
        out.notes.append(
            f"writes the broker refused as NOT_ENOUGH_REPLICAS and the producer sent again: "
            f"{retried} (its check of transactional writes, met on the exactly_once path; "
            "docs/decisions/0010)"
        )
    writes = ", ".join(f"{n}: {w:g}" for n, w in results["writes_per_publish"].items())
    out.notes.append(f"records written per publish by number of subscribers: {writes}")
    out.notes.append(
        "bus = Bus.kafka + agent + AsyncClient.request; transport only = two bare "
        "KafkaTransports (no agent, no correlator); floor = raw aiokafka plus the least "
        "per-event work of any bus on this stack (CloudEvent codec, dedup, one pykka hop, "
        "commits; see a2a_bus/bench/kafka_floor.py); CPU is this process's, all threads"
    )
    out.notes.append(
        f"the paths take turns in {ROUNDS} rounds (at 1 in flight raw, bus, exactly_once and floor)"
    )
    if bus.get("rounds") and floor.get("rounds"):
        spread = round_spread(bus["rounds"], floor["rounds"])
        out.notes.append(f"bus / floor at {IN_FLIGHT} in flight, round by round: {spread}")
    if all(path.get("busy") and path["cpu_us"] for path in (bus, floor)):
        out.notes.append(busy_note(results))
    per_fetch = {
        name: results[name]["records_per_fetch"]
        for name in ("bus", "transport", "floor")
        if "records_per_fetch" in results.get(name, {})
    }
    if per_fetch:
        figures = ", ".join(f"{name} {n:.1f}" for name, n in per_fetch.items())
        out.notes.append(
            f"records per fetch at {IN_FLIGHT} in flight (a path's consumers together): "
            f"{figures}; {IN_FLIGHT} means its requests travel as one wave, and its loop "
            "waits while that wave is at the broker (see docs/kafka.md)"
        )
    return out


def busy_note(results: dict[str, Any]) -> str:
    """How busy each path kept this process at ``IN_FLIGHT``, and the bus's
    throughput against the floor's split into that and its CPU per request."""
    bus, floor = results["bus"], results["floor"]
    busy = ", ".join(
        f"{name} {results[name]['busy']:.2f}"
        for name in ("raw", "bus", "exactly_once", "transport", "floor")
        if "busy" in results.get(name, {})
    )
    busy_ratio = bus["busy"] / floor["busy"]
    cpu_ratio = bus["cpu_us"] / floor["cpu_us"]
    return (
        f"cores this process kept busy at {IN_FLIGHT} in flight (CPU s per wall s): {busy}; "
        f"bus / floor throughput {busy_ratio / cpu_ratio:.2f}x = busy {busy_ratio:.2f}x "
        f"/ CPU per request {cpu_ratio:.2f}x"
    )


def run(
    quick: bool = False, bootstrap: str | None = None, progress: Progress | None = None
) -> Report:
    """Measure on the broker at ``bootstrap`` (default: ``KAFKA_BOOTSTRAP_SERVERS``)."""
    bootstrap = given_broker(bootstrap)
    if not bootstrap:
        return not_run(TITLE)
    return report(loops.run(measure(bootstrap, Sizes.pick(quick), progress)))


def not_run(title: str) -> Report:
    """The report of a Kafka benchmark given no broker: it says so, and measures nothing."""
    skipped = Report(f"{title}: not run")
    skipped.notes.append(
        "no Kafka broker: set KAFKA_BOOTSTRAP_SERVERS (a local one: scripts/kafka.sh start, "
        "then eval $(scripts/kafka.sh env))"
    )
    return skipped


if __name__ == "__main__" and sys.argv[1:2] == ["--listen"]:
    loops.run(listen(sys.argv[2], sys.argv[3], int(sys.argv[4])))
elif __name__ == "__main__":
    result = run(bootstrap=sys.argv[1] if len(sys.argv) > 1 else None)
    result.print()
    raise SystemExit(0 if result.all_met else 1)
