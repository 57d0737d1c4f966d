"""No request, answer or stream chunk is lost when the broker fails (a broker of the
test's own).

Requests: an agent in an ``a2a-bus serve`` worker process, the caller in the test
process; the worker's handler appends a line per request it runs to a file, so the
test counts what was handled (and how often) as well as what was answered. Streams:
a generator agent on one bus, its caller on another (two nodes, one process), the
chunks counted as the caller reads them. The broker is killed with SIGKILL part way
through and started again on its data.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from a2a_bus import Bus, JsonRpcError
from a2a_bus.protocol import ErrorCode
from tests.transport.kafka.own_kafka import OwnKafka, running_kafka
from tests.transport.kafka.stream_faults import (
    Gate,
    assert_whole_or_clear_error,
    assert_written_once_in_order,
    stream_buses,
    stream_through,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(600)]

AGENTS = Path(__file__).with_name("fault_agents.py")
WAIT = 120.0  # upper bound on one await (start, stop); never a performance limit


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[OwnKafka]:
    with running_kafka(tmp_path / "kafka") as kafka:
        yield kafka


class ServeWorker:
    """``a2a-bus serve fault_agents.py:Worker`` on ``bootstrap``, a worker process."""

    def __init__(
        self,
        bootstrap: str,
        prefix: str,
        log: Path,
        errors: Path,
        settings: dict[str, str] | None = None,
    ) -> None:
        self.log, self.errors, self.prefix = log, errors, prefix
        self.settings = settings or {}
        self._args = [
            sys.executable,
            "-m",
            "a2a_bus",
            "serve",
            f"{AGENTS}:Worker",
            "--kafka",
            bootstrap,
            "--prefix",
            prefix,
        ]
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        env = {**os.environ, **self.settings, "FAULTS_LOG": str(self.log)}
        with self.errors.open("wb") as stderr:
            self.process = await asyncio.create_subprocess_exec(
                *self._args, env=env, stdout=asyncio.subprocess.PIPE, stderr=stderr
            )
        assert self.process.stdout is not None
        async with asyncio.timeout(WAIT):
            while b"serving" not in (line := await self.process.stdout.readline()):
                if not line:
                    pytest.fail(f"the worker did not start:\n{self.errors.read_text()[-3000:]}")

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), WAIT)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()

    def handled(self) -> Counter[int]:
        """How often the handler ran for each n."""
        lines = self.log.read_bytes().splitlines() if self.log.exists() else []
        return Counter(orjson.loads(line)["n"] for line in lines)


@pytest.fixture
async def worker(broker: OwnKafka, tmp_path: Path) -> AsyncIterator[ServeWorker]:
    prefix = f"bf{uuid.uuid4().hex[:10]}"
    served = ServeWorker(broker.bootstrap, prefix, tmp_path / "handled.jsonl", tmp_path / "w.err")
    try:
        await served.start()
        yield served
    finally:
        await served.stop()


@dataclass
class Load:
    """Counts of one run of ``work(n)`` requests."""

    answers: Counter[int] = field(default_factory=Counter)
    wrong: list[tuple[int, Any]] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)
    #: loop time of each answer, in order
    answered_at: list[float] = field(default_factory=list)


async def run_load(
    bus: Bus, total: int, in_flight: int, on_answered: dict[int, asyncio.Event]
) -> Load:
    """``work(n)`` for n in range(total), ``in_flight`` at a time; ``on_answered[k]``
    is set once k requests were answered."""
    client = bus.async_client()
    slots = asyncio.Semaphore(in_flight)
    load = Load()
    loop = asyncio.get_running_loop()

    async def one(n: int) -> None:
        async with slots:
            try:
                result = await client.request("worker", "work", {"n": n})
            except JsonRpcError as exc:
                load.errors.append((n, f"{exc.code} {exc.message}"))
            except Exception as exc:
                load.errors.append((n, repr(exc)))
            else:
                load.answers[n] += 1
                if result != n:
                    load.wrong.append((n, result))
                load.answered_at.append(loop.time())
        done = len(load.answered_at) + len(load.errors)
        if done in on_answered:
            on_answered[done].set()

    await asyncio.gather(*(one(n) for n in range(total)))
    return load


async def test_a_broker_killed_mid_load_loses_no_request_and_no_answer(
    broker: OwnKafka, worker: ServeWorker
) -> None:
    total, in_flight, kill_after = 600, 32, 200
    bus = Bus.kafka(
        broker.bootstrap,
        bus_options={"prefix": worker.prefix, "heartbeat": 60.0, "request_timeout": WAIT},
    )
    await asyncio.wait_for(bus.astart(), WAIT)
    loop = asyncio.get_running_loop()
    third = asyncio.Event()
    back_at: list[float] = []

    async def crash_and_restart() -> None:
        await third.wait()
        broker.kill()  # SIGKILL, a third of the way through
        await asyncio.sleep(3)
        await asyncio.to_thread(broker.start)  # on its data
        back_at.append(loop.time())

    try:
        chaos = asyncio.create_task(crash_and_restart())
        load = await run_load(bus, total, in_flight, {kill_after: third})
        await chaos
    finally:
        await asyncio.wait_for(bus.astop(), WAIT)
    handled = worker.handled()

    assert load.errors == []  # nobody got a timeout or an error
    assert load.wrong == []
    assert sorted(load.answers) == list(range(total))  # every caller got its answer
    assert max(load.answers.values()) == 1  # once
    assert bus.metrics.duplicate_replies == 0
    assert sorted(handled) == list(range(total))  # every request reached the handler
    assert [n for n, times in handled.items() if times > 1] == []  # and ran once
    # The figures docs/reliability.md reports (-s shows them).
    after = [t for t in load.answered_at if t >= back_at[0]]
    gap = max(b - a for a, b in zip(load.answered_at, load.answered_at[1:], strict=False))
    recovery = f"{after[0] - back_at[0]:.2f}" if after else "-"
    print(f"\nbroker ready -> first answer {recovery} s; longest wait between answers {gap:.1f} s")


async def refused_by(kafka: OwnKafka, node: int = 1) -> None:
    """Until the killed broker's port refuses connections (its process may hold the
    port a little after its memory, and a start on a port in use fails)."""
    async with asyncio.timeout(WAIT):
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", kafka.port(node))
            except ConnectionRefusedError:
                return
            writer.close()
            await asyncio.sleep(0.05)


async def test_a_stream_written_across_a_broker_restart_arrives_whole_or_ends_in_an_error(
    broker: OwnKafka,
) -> None:
    """5,000 chunks; the broker killed (SIGKILL) with chunks in flight and started
    again on its data while the rest are written: the caller gets chunks 0..k once
    each, in order, then the end or a JSON-RPC error, never a silent gap; and none
    came twice or ahead of its turn (which its reader would hide). The producer's
    request timeout is shorter than the restart: aiokafka gives up on the batches
    waiting for the broker, and the transport hands them over again, in order (with
    a longer one aiokafka retries them itself, which the same checks passed in 14 runs)."""
    total, request_timeout, request_timeout_ms = 5_000, 60.0, 5_000

    async def restart(gate: Gate) -> None:
        broker.kill()
        await refused_by(broker)
        gate.go_on.set()  # the rest is written while the broker is away
        await asyncio.to_thread(broker.start)

    async with stream_buses(
        broker.bootstrap, request_timeout, request_timeout_ms=request_timeout_ms
    ) as caller:
        read = await stream_through(caller, total, restart)
    print(f"\n{read.summary(total, caller)}")
    assert_whole_or_clear_error(read, total, request_timeout)
    assert_written_once_in_order(caller)


async def test_a_stream_whose_chunks_outlive_their_delivery_timeout_ends_in_an_error(
    broker: OwnKafka,
) -> None:
    """The same with a 4 s delivery timeout, the broker started again only once the
    agent gave up on a chunk: chunks 0..k, then -32001 (the stream's error, or the
    caller's deadline when the end itself was not delivered), within the deadline."""
    total, request_timeout = 5_000, 20.0

    async def restart_too_late(gate: Gate) -> None:
        broker.kill()
        await refused_by(broker)
        gate.go_on.set()
        given_up = await asyncio.to_thread(gate.closed.wait, WAIT)
        await asyncio.to_thread(broker.start)
        assert given_up, "the generator was not closed after a chunk was not delivered"

    async with stream_buses(broker.bootstrap, request_timeout, delivery_timeout_ms=4_000) as caller:
        read = await stream_through(caller, total, restart_too_late)
    print(f"\n{read.summary(total, caller)}")
    assert_whole_or_clear_error(read, total, request_timeout)
    assert read.error is not None and read.error.code == ErrorCode.TIMEOUT
    assert read.runs == 1
