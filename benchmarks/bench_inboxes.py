"""Agent inboxes on one Kafka consumer: time to subscribe N inboxes, and idle CPU.

python benchmarks/bench_inboxes.py [bootstrap] [--sizes 10,100,1000] [--idle 10]
                                   [--inbox-fetch-max-wait-ms 5000[,1000...]] [--sequential 10]

For each size N, with topics of its own (deleted at the end):

* first start: N subscribes at once on ``transport.inboxes(...)``, as a bus starting
  N agents makes them (the topics are created), until every one returned (its
  topic assigned); then one event to each inbox until every inbox handled it;
* restart: another transport (a restarted process) subscribing the same N
  inboxes, which exist now; once per ``--inbox-fetch-max-wait-ms`` value (the
  ceiling of the consumer's idle fetch wait, which is 1.5 ms per partition);
* idle: then this process's CPU time over ``--idle`` seconds with the N inboxes
  subscribed and nothing to do, as a share of one core (the consumer's fetches,
  heartbeats and metadata refreshes), with the idle fetch wait it had;
* one more: then adding an inbox (a rejoin in the group of N + 1 topics).

``--sequential K`` also times K subscribes made one after another (each waits
for its own rejoin). The broker is ``$KAFKA_BOOTSTRAP_SERVERS`` by default.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from collections.abc import Sequence
from typing import Any

from a2a_bus.bench.kafka_topics import delete_run_topics
from a2a_bus.protocol import new_event
from a2a_bus.transport import Delivery
from a2a_bus.transport.base import Inboxes
from a2a_bus.transport.kafka import KafkaSettings, KafkaTransport
from a2a_bus.transport.kafka.inboxes import idle_fetch_wait


def transport_for(
    args: argparse.Namespace, run_id: str, ceiling: int | None = None
) -> KafkaTransport:
    return KafkaTransport(
        args.bootstrap,
        dlq_topic=f"bench.inboxes.{run_id}.dlq",
        inbox_fetch_max_wait_ms=args.inbox_fetch_max_wait_ms[0] if ceiling is None else ceiling,
    )


async def subscribe_all(inboxes: Inboxes, topics: Sequence[str], seen: set[str]) -> float:
    """Seconds until every inbox of ``topics`` is subscribed (assigned)."""

    async def handle(delivery: Delivery) -> None:
        seen.add(delivery.topic)

    started = time.perf_counter()
    await asyncio.gather(*(inboxes.subscribe(topic, handle) for topic in topics))
    return time.perf_counter() - started


async def ignore(delivery: Delivery) -> None:
    del delivery


async def idle_cpu(seconds: float) -> float:
    """This process's CPU time over ``seconds`` of waiting, in % of one core."""
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.sleep(seconds)
    return 100 * (time.process_time() - cpu) / (time.perf_counter() - wall)


async def measure(args: argparse.Namespace, size: int) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:8]
    prefix = f"bench.inboxes.{run_id}.inbox"
    topics = [f"bench.inboxes.{run_id}.agent{i}" for i in range(size)]
    result: dict[str, Any] = {"inboxes": size}
    try:
        seen: set[str] = set()
        transport = transport_for(args, run_id)
        async with transport:
            inboxes = transport.inboxes(prefix)
            result["first start s"] = await subscribe_all(inboxes, topics, seen)
            started = time.perf_counter()
            await asyncio.gather(
                *(transport.publish(t, new_event({"type": "t", "source": "b"}, {})) for t in topics)
            )
            while len(seen) < size:
                await asyncio.sleep(0.01)
            result["all answered s"] = time.perf_counter() - started
        seen.clear()
        for ceiling in args.inbox_fetch_max_wait_ms:
            seen.clear()
            transport = transport_for(args, run_id, ceiling)
            async with transport:
                inboxes = transport.inboxes(prefix)
                restart = await subscribe_all(inboxes, topics, seen)
                partitions = len(await transport.partitions(topics))
                wait = idle_fetch_wait(transport.settings, partitions)
                result[f"restart s (wait {wait} ms)"] = restart
                await asyncio.sleep(2)  # the assignment's own requests are over
                result[f"idle CPU % (wait {wait} ms)"] = await idle_cpu(args.idle)
                extra = f"bench.inboxes.{run_id}.extra{ceiling}"
                await transport.ensure_topics([extra])
                started = time.perf_counter()
                await inboxes.subscribe(extra, ignore)
                result[f"one more s (wait {wait} ms)"] = time.perf_counter() - started
            topics.append(extra)  # the next restart is a process with these
    finally:
        await delete_run_topics(args.bootstrap, run_id)
    return result


async def sequential(args: argparse.Namespace, count: int) -> float:
    """Seconds per subscribe when ``count`` are made one after another."""
    run_id = uuid.uuid4().hex[:8]
    topics = [f"bench.inboxes.{run_id}.agent{i}" for i in range(count)]
    try:
        transport = transport_for(args, run_id)
        async with transport:
            await transport.ensure_topics(topics)
            inboxes = transport.inboxes(f"bench.inboxes.{run_id}.inbox")
            started = time.perf_counter()
            for topic in topics:
                await inboxes.subscribe(topic, ignore)
            return (time.perf_counter() - started) / count
    finally:
        await delete_run_topics(args.bootstrap, run_id)


async def main(args: argparse.Namespace) -> None:
    for size in args.sizes:
        result = await measure(args, size)
        print(
            "  ".join(
                f"{k}: {v:.2f}" if isinstance(v, float) else f"{k}: {v}" for k, v in result.items()
            ),
            flush=True,
        )
    if args.sequential:
        per = await sequential(args, args.sequential)
        print(f"sequential: {args.sequential} subscribes one after another, {per:.2f} s each")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "bootstrap", nargs="?", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    )
    parser.add_argument(
        "--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[10, 100, 1000]
    )
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle CPU measurement")
    parser.add_argument(
        "--inbox-fetch-max-wait-ms",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[KafkaSettings().inbox_fetch_max_wait_ms],
        help="ceilings of the idle fetch wait: a restart and idle measurement each",
    )
    parser.add_argument("--sequential", type=int, default=0)
    asyncio.run(main(parser.parse_args()))
