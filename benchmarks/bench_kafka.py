"""Request/response and publish cost on Kafka, beside a raw aiokafka ping-pong.

Run as a script (``python benchmarks/bench_kafka.py [bootstrap]``) to print a
table, or import ``run(bootstrap) -> dict``. Both sides run in the same
process, on the same broker, in the same run:

* raw: an aiokafka producer/consumer pair answering on a reply topic (same
  producer guarantees: idempotent, ``acks=all``; the responder auto-commits);
* bus: requests as CloudEvents through ``KafkaTransport`` (consumer groups,
  in-order manual commits, dedup, leases), answered with
  ``Adaptor.response_event`` and correlated by ``collaborationid`` — the path
  the bus takes for ``request()``. When ``Bus.kafka`` is available the same is
  measured through the bus API as well.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from a2a_bus.bench.report import Report, Row
from a2a_bus.protocol import Adaptor, Failure, ext, new_event
from a2a_bus.transport import Delivery
from a2a_bus.transport.kafka import KafkaTransport

REQUESTS = int(os.environ.get("BENCH_KAFKA_REQUESTS", "400"))
THROUGHPUT_SECONDS = float(os.environ.get("BENCH_KAFKA_SECONDS", "4"))
PUBLISHES = int(os.environ.get("BENCH_KAFKA_PUBLISHES", "200"))
SUBSCRIBERS = (1, 10, 50)
TUNING: dict[str, Any] = {"linger_ms": 0, "fetch_max_wait_ms": 100, "max_poll_records": 500}

Call = Callable[[], Awaitable[None]]


async def latencies(call: Call, count: int) -> list[float]:
    for _ in range(20):  # warm-up: connections, metadata, JIT on the broker
        await call()
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return samples


async def throughput(call: Call, in_flight: int, seconds: float) -> float:
    done = 0
    stop_at = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            await call()
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return done / (time.perf_counter() - start)


def p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


class RawPingPong:
    """The baseline: plain aiokafka, one request topic, one reply topic."""

    def __init__(self, bootstrap: str, run_id: str) -> None:
        self.bootstrap = bootstrap
        self.requests = f"bench.raw.req.{run_id}"
        self.replies = f"bench.raw.rep.{run_id}"
        self.waiting: dict[bytes, asyncio.Future[None]] = {}
        self.counter = 0
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        common = {"bootstrap_servers": self.bootstrap}
        self.producer = AIOKafkaProducer(
            enable_idempotence=True, acks="all", linger_ms=TUNING["linger_ms"], **common
        )
        self.server_producer = AIOKafkaProducer(
            enable_idempotence=True, acks="all", linger_ms=TUNING["linger_ms"], **common
        )
        self.server = AIOKafkaConsumer(
            self.requests,
            group_id=f"{self.requests}.server",
            fetch_max_wait_ms=TUNING["fetch_max_wait_ms"],
            auto_offset_reset="earliest",
            **common,
        )
        self.client = AIOKafkaConsumer(
            self.replies,
            group_id=f"{self.replies}.client",
            fetch_max_wait_ms=TUNING["fetch_max_wait_ms"],
            auto_offset_reset="earliest",
            **common,
        )
        for part in (self.producer, self.server_producer, self.server, self.client):
            await part.start()
        self.tasks = [asyncio.create_task(self._serve()), asyncio.create_task(self._collect())]

    async def _serve(self) -> None:
        async for record in self.server:
            await self.server_producer.send(self.replies, record.value, key=record.key)

    async def _collect(self) -> None:
        async for record in self.client:
            future = self.waiting.pop(record.value or b"", None)
            if future is not None and not future.done():
                future.set_result(None)

    async def call(self) -> None:
        self.counter += 1
        token = str(self.counter).encode()
        future = asyncio.get_running_loop().create_future()
        self.waiting[token] = future
        await self.producer.send_and_wait(self.requests, token, key=token)
        await future

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for part in (self.client, self.server, self.producer, self.server_producer):
            await part.stop()


class TransportRequestReply:
    """Request/response as the bus does it, over two KafkaTransports."""

    def __init__(self, bootstrap: str, run_id: str) -> None:
        self.adaptor = Adaptor()
        self.inbox = f"bench.a2a.agent.echo.{run_id}"
        self.reply_topic = f"bench.a2a.reply.{run_id}"
        self.run_id = run_id
        self.client = KafkaTransport(bootstrap, dlq_topic=f"bench.dlq.{run_id}", **TUNING)
        self.server = KafkaTransport(bootstrap, dlq_topic=f"bench.dlq.{run_id}", **TUNING)
        self.waiting: dict[str, asyncio.Future[Any]] = {}
        self.counter = 0

    async def start(self) -> None:
        await self.client.start()
        await self.server.start()
        await self.server.subscribe([self.inbox], f"echo.{self.run_id}", self._serve)
        await self.client.subscribe([self.reply_topic], f"node.{self.run_id}", self._collect)

    async def _serve(self, delivery: Delivery) -> None:
        request = delivery.event
        data = request.get_data()
        assert isinstance(data, dict)
        response = {"jsonrpc": "2.0", "result": data.get("params"), "id": data.get("id")}
        reply_to = request.get_extension(ext.REPLY_TO)
        await self.server.publish(reply_to, self.adaptor.response_event(request, response))

    async def _collect(self, delivery: Delivery) -> None:
        future = self.waiting.pop(str(delivery.event.get_extension(ext.COLLABORATION)), None)
        if future is not None and not future.done():
            future.set_result(delivery.event.get_data())

    async def call(self) -> None:
        self.counter += 1
        message = {"jsonrpc": "2.0", "method": "echo", "params": [self.counter], "id": 1}
        [request] = self.adaptor.from_jsonrpc(message)
        if isinstance(request, Failure):
            raise RuntimeError(request.message)
        # a bus-unique event id; the caller's JSON-RPC id stays in the data
        event_id = f"{self.run_id}-{self.counter}"
        attributes = request.get_attributes()
        attributes["id"] = event_id
        attributes[ext.REPLY_TO] = self.reply_topic
        future = asyncio.get_running_loop().create_future()
        self.waiting[event_id] = future
        await self.client.publish(self.inbox, request)
        await future

    async def stop(self) -> None:
        await self.client.stop()
        await self.server.stop()


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


async def publish_cost(bootstrap: str, run_id: str, subscribers: int) -> tuple[float, float]:
    """Median microseconds per acknowledged publish with ``subscribers`` groups
    listening (in another process, so their work does not share this loop), and
    records written per publish."""
    topic = f"bench.fanout.{subscribers}.{run_id}"
    publisher = KafkaTransport(bootstrap, dlq_topic=f"bench.dlq.{run_id}", **TUNING)
    await publisher.start()
    await publisher.ensure_topics([topic])
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
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
        for _ in range(PUBLISHES):
            event = new_event({"type": "bench", "source": "bench"}, {"x": 1})
            start = time.perf_counter()
            await publisher.publish(topic, event)
            samples.append(time.perf_counter() - start)
        writes = (publisher.metrics.produced - produced) / PUBLISHES
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


async def measure(bootstrap: str) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:8]
    results: dict[str, Any] = {}
    raw = RawPingPong(bootstrap, run_id)
    await raw.start()
    try:
        samples = await latencies(raw.call, REQUESTS)
        results["raw"] = {
            "p50_ms": p(samples, 0.5),
            "p99_ms": p(samples, 0.99),
            "rps_1": await throughput(raw.call, 1, THROUGHPUT_SECONDS),
            "rps_64": await throughput(raw.call, 64, THROUGHPUT_SECONDS),
        }
    finally:
        await raw.stop()
    bus = TransportRequestReply(bootstrap, run_id)
    await bus.start()
    try:
        samples = await latencies(bus.call, REQUESTS)
        results["bus"] = {
            "p50_ms": p(samples, 0.5),
            "p99_ms": p(samples, 0.99),
            "rps_1": await throughput(bus.call, 1, THROUGHPUT_SECONDS),
            "rps_64": await throughput(bus.call, 64, THROUGHPUT_SECONDS),
        }
    finally:
        await bus.stop()
    results["publish_us"] = {}
    results["writes_per_publish"] = {}
    for n in SUBSCRIBERS:
        cost, writes = await publish_cost(bootstrap, run_id, n)
        results["publish_us"][n] = cost
        results["writes_per_publish"][n] = writes
    return results


def report(results: dict[str, Any]) -> Report:
    raw, bus = results["raw"], results["bus"]
    out = Report("Kafka: bus vs raw aiokafka (same broker, same run)")
    out.add(Row("request/response p50", bus["p50_ms"], "ms", raw["p50_ms"], "raw", 1.5))
    out.add(Row("request/response p99", bus["p99_ms"], "ms", raw["p99_ms"], "raw"))
    out.add(Row("throughput, 1 in flight", bus["rps_1"], "req/s", raw["rps_1"], "raw", None, True))
    out.add(
        Row("throughput, 64 in flight", bus["rps_64"], "req/s", raw["rps_64"], "raw", 0.7, True)
    )
    base = results["publish_us"][SUBSCRIBERS[0]]
    for n, cost in results["publish_us"].items():
        target = 1.5 if n != SUBSCRIBERS[0] else None
        out.add(Row(f"publish, {n} subscribers", cost, "us", base, "1 subscriber", target))
    writes = ", ".join(f"{n}: {w:g}" for n, w in results["writes_per_publish"].items())
    out.notes.append(f"records written per publish by number of subscribers: {writes}")
    return out


def run(bootstrap: str | None = None) -> dict[str, Any]:
    """Measure and return the figures (and whether the targets were met)."""
    bootstrap = bootstrap or os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    results = asyncio.run(measure(bootstrap))
    results["targets_met"] = report(results).all_met
    return results


if __name__ == "__main__" and sys.argv[1:2] == ["--listen"]:
    asyncio.run(listen(sys.argv[2], sys.argv[3], int(sys.argv[4])))
elif __name__ == "__main__":
    figures = run(sys.argv[1] if len(sys.argv) > 1 else None)
    report(figures).print()
    raise SystemExit(0 if figures["targets_met"] else 1)
