"""Replicas of one agent in separate processes on a real broker, including ``kill -9``.

Each worker process (``tests/transport/kafka/worker_main.py``) hosts one replica of the
``worker`` agent; the test process is the caller. Every handled request is a
line in a log file the workers share, so the test sees what each process did,
also for a process that was killed.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import TopicPartition

from a2a_bus import Bus
from a2a_bus.transport.kafka.groups import composition_group
from a2a_bus.transport.kafka.transport import KafkaTransport
from tests.transport.kafka.support import Worker, kill_all, wait_until_committed
from tests.transport.kafka.support import start_worker as start_worker_process

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

WORKER = Path(__file__).with_name("worker_main.py")
WAIT = 60.0  # upper bound on one await (start, stop, failover); never a performance limit
#: Per request: long enough for a killed worker's partitions to move (session timeout).
REQUEST_TIMEOUT = 120.0
IN_FLIGHT = 64


@pytest.fixture
def bootstrap(kafka_bootstrap: str) -> str:
    return kafka_bootstrap


@pytest.fixture
async def start_worker(
    bootstrap: str, tmp_path: Path
) -> AsyncIterator[Callable[[str, Path], Awaitable[Worker]]]:
    """Starts worker processes (ready when returned); kills leftovers afterwards."""
    started: list[Worker] = []

    async def start(prefix: str, log: Path) -> Worker:
        errors = tmp_path / f"worker-{len(started)}.err"
        worker = await start_worker_process(WORKER, [bootstrap, prefix, str(log)], errors)
        started.append(worker)
        return worker

    yield start
    await kill_all(started)


@pytest.fixture
def prefix() -> str:
    return f"mp{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def caller(bootstrap: str, prefix: str) -> AsyncIterator[Bus]:
    bus = Bus.kafka(
        bootstrap,
        bus_options={"prefix": prefix, "heartbeat": 60.0, "request_timeout": REQUEST_TIMEOUT},
    )
    await asyncio.wait_for(bus.astart(), WAIT)
    yield bus
    await asyncio.wait_for(bus.astop(), WAIT)


def read_log(log: Path) -> list[dict[str, Any]]:
    """Handled requests in the order they were handled (one shared append-only file)."""
    return [orjson.loads(line) for line in log.read_bytes().splitlines()]


async def send_all(
    bus: Bus, count: int, on_answer: Callable[[int], None] = lambda done: None
) -> list[Any]:
    """``work(n)`` for n in range(count), ``IN_FLIGHT`` at a time; the results in order."""
    client = bus.async_client()
    slots = asyncio.Semaphore(IN_FLIGHT)
    done = 0

    async def one(n: int) -> Any:
        nonlocal done
        async with slots:
            result = await client.request("worker", "work", {"n": n})
        done += 1
        on_answer(done)
        return result

    return await asyncio.gather(*(one(n) for n in range(count)))


async def wait_until_committed_inbox(bus: Bus) -> None:
    """Wait until the workers' inbox group committed the end of every inbox partition,
    so every redelivery has happened (bounded by ``WAIT``)."""
    transport = bus.transport
    assert isinstance(transport, KafkaTransport)
    topic = bus.topics.agent("worker")
    group = composition_group(f"{bus.topics.prefix}.inbox", [topic])
    partitions = [TopicPartition(topic, p) for p in range(transport.settings.partitions)]
    await wait_until_committed(transport, group, partitions)


async def test_two_worker_processes_share_the_load_and_answer_once(
    start_worker: Callable[[str, Path], Awaitable[Worker]],
    caller: Bus,
    bootstrap: str,
    prefix: str,
    tmp_path: Path,
) -> None:
    log = tmp_path / "handled.jsonl"
    workers = [await start_worker(prefix, log) for _ in range(2)]

    results = await send_all(caller, 300)

    assert results == list(range(300))  # every caller got its own answer
    await wait_until_committed_inbox(caller)
    for worker in workers:
        assert await worker.terminate() == 0
    handled = read_log(log)
    assert sorted(entry["n"] for entry in handled) == list(range(300))  # each exactly once
    by_pid = Counter(entry["pid"] for entry in handled)
    assert set(by_pid) == {w.pid for w in workers}  # both replicas took a share
    assert not any(entry["redelivered"] for entry in handled)
    assert caller.metrics.duplicate_replies == 0


async def test_kill_9_of_a_worker_loses_nothing_and_flags_every_repeat(
    start_worker: Callable[[str, Path], Awaitable[Worker]],
    caller: Bus,
    bootstrap: str,
    prefix: str,
    tmp_path: Path,
) -> None:
    total, kill_after = 2_000, 500
    log = tmp_path / "handled.jsonl"
    victim = await start_worker(prefix, log)
    survivor = await start_worker(prefix, log)
    replacement: list[Worker] = []
    killed = asyncio.Event()

    def on_answer(done: int) -> None:
        if done == kill_after:
            victim.kill()
            killed.set()

    async def restart_after_kill() -> None:
        await killed.wait()
        await victim.process.wait()
        replacement.append(await start_worker(prefix, log))

    restarting = asyncio.create_task(restart_after_kill())
    results = await send_all(caller, total, on_answer)
    await asyncio.wait_for(restarting, WAIT)

    # None lost and none answered twice: every request got exactly its own answer.
    assert results == list(range(total))
    assert victim.process.returncode == -signal.SIGKILL
    await wait_until_committed_inbox(caller)
    for worker in (survivor, *replacement):
        assert await worker.terminate() == 0

    handled = read_log(log)
    times = Counter(entry["n"] for entry in handled)
    assert set(times) == set(range(total))  # every request handled at least once
    first_by: dict[int, int] = {}
    for entry in handled:
        if entry["n"] in first_by:
            # a repeat must be a flagged redelivery, never a silent second run,
            # and only work of the killed process comes back
            assert entry["redelivered"], entry
            assert first_by[entry["n"]] == victim.pid, entry
        else:
            first_by[entry["n"]] = entry["pid"]
    repeats = sum(times.values()) - total
    victim_count = sum(1 for entry in handled if entry["pid"] == victim.pid)
    assert 0 < victim_count < total
    # A second answer to a request is dropped by the caller and counted, never delivered.
    assert caller.metrics.duplicate_replies + caller.metrics.late_replies <= repeats
