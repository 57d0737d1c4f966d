"""What the Kafka transport tests share: test events, a recording handler, a
wait for a condition, and worker processes that say when they are ready."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from a2a_bus.protocol import new_event
from a2a_bus.transport import Delivery
from a2a_bus.transport.kafka import KafkaTransport

#: Seconds; a guard against hangs, never a performance limit.
WAIT = 60.0


def event(n: int, key: str | None = None, **extra: Any) -> Any:
    """A test event carrying ``{"n": n}``, keyed by ``key`` (partitionkey) if given."""
    attributes: dict[str, Any] = {"type": "test.event", "source": "tests", **extra}
    if key is not None:
        attributes["partitionkey"] = key
    return new_event(attributes, {"n": n})


class Recorder:
    """A handler that keeps every delivery."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []

    async def __call__(self, delivery: Delivery) -> None:
        self.deliveries.append(delivery)

    def numbers(self) -> list[int]:
        return [d.event.get_data()["n"] for d in self.deliveries]  # type: ignore[index]


async def wait_until_committed(
    kafka: KafkaTransport, group: str, partitions: list[TopicPartition]
) -> None:
    """Wait until ``group`` committed the end of every one of ``partitions`` (so every
    redelivery has happened)."""
    reader = AIOKafkaConsumer(bootstrap_servers=kafka.settings.bootstrap_servers)
    await reader.start()
    try:
        ends = await reader.end_offsets(partitions)
        async with asyncio.timeout(WAIT):
            while True:
                found = await kafka.committed_offsets(group, partitions)
                if all(found.get(tp, (-1, ""))[0] == ends[tp] for tp in partitions):
                    return
                await asyncio.sleep(0.2)
    finally:
        await reader.stop()


class Worker:
    """One worker process; its standard error goes to ``errors``."""

    def __init__(self, process: asyncio.subprocess.Process, errors: Path) -> None:
        self.process = process
        self.errors = errors

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        self.process.kill()  # SIGKILL: no drain, no commit, no goodbye

    async def terminate(self) -> int:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(self.process.wait(), WAIT)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
            raise


async def start_worker(script: Path, args: list[str], errors: Path) -> Worker:
    """Run ``script`` with ``args`` in a new Python process and return once it
    printed ``ready``; fail the test (showing its standard error) if it did not."""
    with errors.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(script), *args, stdout=asyncio.subprocess.PIPE, stderr=stderr
        )
    worker = Worker(process, errors)
    assert process.stdout is not None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), WAIT)
    except TimeoutError:
        line = b""
    if line.strip() != b"ready":
        worker.kill()
        await process.wait()
        pytest.fail(f"worker did not start:\n{errors.read_text()[-3000:]}")
    return worker


async def kill_all(workers: list[Worker]) -> None:
    """Kill the workers still running (a test's leftovers)."""
    for worker in workers:
        if worker.process.returncode is None:
            worker.kill()
            await worker.process.wait()
