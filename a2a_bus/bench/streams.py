"""Streams: an agent's generator read by its caller, chunks per second by stream length.

Each path streams :data:`LENGTHS` items of :data:`ITEM_CHARS` characters; a stream's
figure is its items over the time from the call to its last item, the median of
its repeats. The paths take turns, stream by stream, so that load from elsewhere on
the machine hits them alike.

In memory, always:

* bus: ``Bus.memory`` hosting an agent whose generator yields the items, read with
  the async client's ``stream`` (the chunk events, the reply topic, the caller's
  ``seq`` checks and the end marker);
* floor (the baseline): a bare pykka actor running the same generator, handing each
  item to the loop as agent actors report (one wake-up per burst) into an
  ``asyncio.Queue`` that the caller reads: the least any stream from an actor's
  thread to a reader on the loop does.

On Kafka, when a broker is given:

* bus: ``Bus.kafka`` with the same agent;
* raw (the baseline): one aiokafka producer with the bus's producer guarantees
  (idempotent, ``acks=all``) writing as many records, each the bytes of one of the
  bus's chunks, to a topic of one partition, all handed over before any is awaited,
  then every acknowledgement awaited: what the broker takes from one producer.
"""

from __future__ import annotations

import asyncio
import queue
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any

import pykka
from aiokafka import AIOKafkaProducer

from a2a_bus.bench import given_broker
from a2a_bus.bench.kafka_floor import echo_request
from a2a_bus.bench.kafka_raw import TUNING
from a2a_bus.bench.kafka_topics import create_run_topics, delete_run_topics
from a2a_bus.bench.load import stop_actors
from a2a_bus.bench.report import Curve, Point, Progress, Report, Row, quiet
from a2a_bus.bus import Bus
from a2a_bus.core.streams import chunk_event
from a2a_bus.hosting.actor import thread_safe
from a2a_bus.hosting.agent import Agent, method
from a2a_bus.protocol import Adaptor, record_key
from a2a_bus.protocol.formats import dump_structured
from a2a_bus.runtime import loops

TITLE = "Streams: chunks per second by stream length (same run)"
LENGTHS = (10, 100, 1000)
#: Characters of each item: a chunk of generated text.
ITEM_CHARS = 100
ITEM = "x" * ITEM_CHARS

#: One stream of ``n`` items through a path: its chunks per second.
Stream = Callable[[int], Awaitable[float]]
#: Per transport, per path: chunks per second at each length.
Found = dict[str, dict[str, dict[int, float]]]
#: The baseline of each transport's bus path.
BASELINES = {"memory": "floor", "kafka": "raw aiokafka"}


def repeats(length: int, quick: bool) -> int:
    """Streams per path at ``length``: more of the short ones, whose figures scatter."""
    if quick:
        return max(3, min(20, 2_000 // length))
    return max(5, min(100, 10_000 // length))


def generate(count: int) -> Iterator[str]:
    """``count`` items of :data:`ITEM_CHARS` characters: every path's generator."""
    for _ in range(count):
        yield ITEM


class Streamer(Agent):
    """Streams the items of :func:`generate`."""

    agent_id = "bench-streamer"

    @method
    def items(self, count: int) -> Iterator[str]:
        yield from generate(count)


async def _timed(items: AsyncIterator[Any], count: int) -> float:
    start = time.perf_counter()
    received = 0
    async for _ in items:
        received += 1
    if received != count:
        raise RuntimeError(f"a stream of {count} items gave {received}")
    return count / (time.perf_counter() - start)


def bus_stream(bus: Bus) -> Stream:
    """One stream of the bus path: the agent's items, read with ``stream``."""
    client = bus.async_client()

    async def stream(count: int) -> float:
        return await _timed(client.stream(Streamer.agent_id, "items", [count]), count)

    return stream


_END = object()


class _Yielder(pykka.ThreadingActor):
    """The floor's agent: runs the generator, handing each item to the loop."""

    @staticmethod
    def _create_actor_inbox() -> Any:
        return queue.SimpleQueue()  # as agent actors' (see a2a_bus.hosting.actor)

    def on_receive(self, message: Any) -> None:
        count, put = message
        for item in generate(count):
            put(item)
        put(_END)


async def _drained(items: asyncio.Queue[Any]) -> AsyncIterator[Any]:
    while (item := await items.get()) is not _END:
        yield item


async def on_memory(lengths: tuple[int, ...], quick: bool, progress: Progress) -> Found:
    """The bus and the floor in memory, taking turns stream by stream."""
    loop = asyncio.get_running_loop()
    items: asyncio.Queue[Any] = asyncio.Queue()
    put = thread_safe(loop, items.put_nowait)
    actor = _Yielder.start()

    async def floor(count: int) -> float:
        actor.tell((count, put))
        return await _timed(_drained(items), count)

    bus = Bus.memory(pin_cpu="off")
    bus.spawn(Streamer)
    try:
        async with bus:
            paths = {"bus": bus_stream(bus), "floor": floor}
            return {"memory": await _take_turns(paths, lengths, quick, "memory", progress)}
    finally:
        await stop_actors([actor])


class RawProducer:
    """The Kafka baseline: one producer, records of a bus chunk's bytes, one partition."""

    def __init__(self, bootstrap: str, run_id: str) -> None:
        self.bootstrap = bootstrap
        self.topic = f"bench.streams.raw.{run_id}"
        adaptor = Adaptor()
        request = echo_request(adaptor, 1, f"bench-streams-{run_id}", self.topic)
        chunk = chunk_event(adaptor, request, 0, ITEM, self.topic, self.topic)
        self.key, self.value = record_key(chunk), dump_structured(chunk)
        self.producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            enable_idempotence=True,
            acks="all",
            linger_ms=TUNING["linger_ms"],
        )

    async def start(self) -> None:
        await create_run_topics(self.bootstrap, {self.topic: 1})
        await self.producer.start()

    async def stream(self, count: int) -> float:
        """``count`` records handed over in order, then all their acknowledgements."""
        start = time.perf_counter()
        sent = [
            await self.producer.send(self.topic, self.value, key=self.key) for _ in range(count)
        ]
        await asyncio.gather(*sent)
        return count / (time.perf_counter() - start)

    async def stop(self) -> None:
        await self.producer.stop()


async def on_kafka(
    bootstrap: str, lengths: tuple[int, ...], quick: bool, progress: Progress
) -> Found:
    """The bus and raw aiokafka on the broker at ``bootstrap``, taking turns."""
    run_id = uuid.uuid4().hex[:8]
    raw = RawProducer(bootstrap, run_id)
    bus = Bus.kafka(bootstrap, bus_options={"prefix": f"bench{run_id}", "heartbeat": 60.0})
    bus.spawn(Streamer)
    try:
        await raw.start()
        async with bus:
            paths = {"bus": bus_stream(bus), "raw aiokafka": raw.stream}
            return {"kafka": await _take_turns(paths, lengths, quick, "Kafka", progress)}
    finally:
        await raw.stop()
        await delete_run_topics(bootstrap, run_id)


async def _take_turns(
    paths: Mapping[str, Stream],
    lengths: tuple[int, ...],
    quick: bool,
    where: str,
    progress: Progress,
) -> dict[str, dict[int, float]]:
    """Each path's median chunks per second at each length, the paths streaming in turns."""
    found: dict[str, dict[int, float]] = {name: {} for name in paths}
    for done, length in enumerate(lengths):
        progress(f"{where}: streams of {length:,} items", done, len(lengths))
        figures: dict[str, list[float]] = {name: [] for name in paths}
        for stream in paths.values():
            await stream(length)  # warm: topics, partitions, caches
        for _ in range(repeats(length, quick)):
            for name, stream in paths.items():
                figures[name].append(await stream(length))
        for name, rates in figures.items():
            found[name][length] = statistics.median(rates)
    return found


async def measure(
    lengths: tuple[int, ...], quick: bool, bootstrap: str | None, progress: Progress = quiet
) -> Found:
    """Memory always; Kafka too with a broker."""
    found = await on_memory(lengths, quick, progress)
    if bootstrap:
        found.update(await on_kafka(bootstrap, lengths, quick, progress))
    return found


def report(found: Found) -> Report:
    """A row per transport and length (the bus beside its baseline) and a curve per transport."""
    out = Report(TITLE)
    for transport, paths in found.items():
        bus, baseline = paths["bus"], paths[BASELINES[transport]]
        for length in bus:
            out.add(
                Row(
                    f"{transport}: stream of {length:,} items",
                    bus[length],
                    "chunks/s",
                    baseline[length],
                    BASELINES[transport],
                    higher_is_better=True,
                )
            )
        series = {
            name: [Point(length, rate) for length, rate in by.items()] for name, by in paths.items()
        }
        curve = Curve(
            f"streams-{transport}",
            f"{'In memory' if transport == 'memory' else 'On Kafka'}: chunks per second, "
            "by stream length",
            "items per stream",
            "chunks per second",
            series,
        )
        curve.log_y = True
        out.curves.append(curve)
    out.notes.append(
        f"items of {ITEM_CHARS} characters; a stream's time runs from the call to its "
        "last item; the median of its repeats"
    )
    out.notes.append(
        "memory baseline (floor): a bare pykka actor runs the same generator and hands "
        "each item to the loop as agent actors report, into a queue the caller reads"
    )
    if "kafka" in found:
        out.notes.append(
            "Kafka baseline (raw aiokafka): one idempotent acks=all producer writes as many "
            "records of a chunk's bytes to one partition, all sent, then all awaited"
        )
    else:
        out.notes.append(
            "Kafka: not measured, no broker (--kafka BOOTSTRAP or KAFKA_BOOTSTRAP_SERVERS)"
        )
    return out


def run(
    quick: bool = False, bootstrap: str | None = None, progress: Progress | None = None
) -> Report:
    """Measure in memory, and on the broker at ``bootstrap`` (default:
    ``KAFKA_BOOTSTRAP_SERVERS``) when there is one."""
    bootstrap = given_broker(bootstrap)
    return report(loops.run(measure(LENGTHS, quick, bootstrap, progress or quiet)))


if __name__ == "__main__":
    run(bootstrap=sys.argv[1] if len(sys.argv) > 1 else None).print()
