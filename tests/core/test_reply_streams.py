"""Agent -> caller streams at the caller: a reader that falls behind (the generator
has sent every chunk, and the caller's node holds them back until the reader makes
room: at most 1,024 wait in the stream, and the reply topic waits for a reader that
stays behind only for a while), and a generator run again after its node died.
Both transports. The generator's side is tested in tests/hosting/test_outbound.py.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from a2a_bus import Bus, JsonRpcError, ReplyStream
from a2a_bus.protocol import ErrorCode
from tests.agents import Calc, Ticker
from tests.buses import WAIT, eventually, make_bus

__all__ = ["make_bus"]  # the fixture, shared with the behavioural suite

MakeBus = Callable[..., Awaitable[Bus]]

#: Chunks of a stream: well past what waits for the reader on its node.
CHUNKS = 3 * 1024
#: The per-chunk deadline of these streams.
TIMEOUT = 1.0


async def _read_one_then_fall_behind(bus: Bus) -> AsyncGenerator[Any, None]:
    """A stream whose first item was read and whose generator sent all the rest."""
    stream = bus.async_client().stream("ticker", "tick", [CHUNKS], timeout=TIMEOUT)
    assert await asyncio.wait_for(anext(stream), WAIT) == 0
    await eventually(Ticker.done.is_set)
    assert not Ticker.closed_early.is_set()
    return stream


async def _rest(stream: AsyncGenerator[Any, None]) -> list[Any]:
    return [item async for item in stream]


async def test_a_reader_behind_for_longer_than_the_deadline_gets_every_chunk(
    make_bus: MakeBus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deadline bounds the caller's wait for a chunk; here the chunks wait for it."""
    monkeypatch.setattr(ReplyStream, "grace", WAIT)  # the reply topic waits for the reader
    bus = await make_bus(Ticker)
    stream = await _read_one_then_fall_behind(bus)
    await asyncio.sleep(2 * TIMEOUT)  # the reader is busy elsewhere
    assert await asyncio.wait_for(_rest(stream), WAIT) == list(range(1, CHUNKS))
    assert bus.metrics.late_replies == 0
    await eventually(lambda: len(bus.dispatcher.correlator) == 0)


async def test_stop_with_a_reader_behind_ends_its_stream(
    make_bus: MakeBus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chunks waiting for the reader do not keep the bus from stopping."""
    monkeypatch.setattr(ReplyStream, "grace", WAIT)  # the reply topic waits for the reader
    bus = await make_bus(Ticker)
    stream = await _read_one_then_fall_behind(bus)
    await asyncio.wait_for(bus.astop(), WAIT)
    items = [0]
    with pytest.raises(JsonRpcError) as error:
        async for item in stream:
            items.append(item)
    assert error.value.code == ErrorCode.AGENT_UNAVAILABLE
    assert items == list(range(len(items)))  # what came before the end, in order
    assert len(bus.dispatcher.correlator) == 0


async def test_a_reader_that_stays_behind_does_not_hold_up_other_answers(
    make_bus: MakeBus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every answer to a node comes through its reply topic: waiting there for one
    reader that does not read would hold up every other caller. Past its grace the
    stream breaks instead, after the chunks it holds, and its generator is stopped."""
    monkeypatch.setattr(ReplyStream, "grace", 0.2)
    bus = await make_bus(Ticker, Calc)
    client = bus.async_client()
    stalled = client.stream("ticker", "tick", [20_000], timeout=WAIT)
    assert await asyncio.wait_for(anext(stalled), WAIT) == 0
    # Enough for the reader's stream and for what the reply topic takes in meanwhile.
    await eventually(lambda: Ticker.produced > 4 * 1024)
    # The reader is busy elsewhere; other callers on its node are still answered.
    others = [item async for item in client.stream("calc", "count", [3])]
    assert others == [0, 1, 2]
    assert await asyncio.wait_for(client.request("calc", "count", [2]), WAIT) == [0, 1]
    items = [0]
    with pytest.raises(JsonRpcError) as broken:
        async with asyncio.timeout(WAIT):
            async for item in stalled:
                items.append(item)
    assert broken.value.code == ErrorCode.STREAM_BROKEN
    assert "chunks unread for 0.2s" in str(broken.value.data)
    assert items == list(range(1 + 1024))  # the chunks it held, in order, then the break
    # Closing it stops the generator (which would otherwise run on, unread).
    await eventually(lambda: not bus.dispatcher.running_streams)
    await eventually(lambda: len(bus.dispatcher.correlator) == 0)


async def test_a_generator_that_starts_over_breaks_the_stream() -> None:
    """A repeat of seq 0 after later chunks is a second run of the generator (its
    node died and the request went to another): not joined to the first run's."""
    stream = ReplyStream()
    for seq, item in enumerate(["run 1 line 0", "run 1 line 1"]):
        await stream.put(seq, item)
    with pytest.raises(JsonRpcError) as broken:
        await stream.put(0, "run 2 line 0")
    assert broken.value.code == ErrorCode.STREAM_BROKEN
    assert "started over after 2 chunks" in str(broken.value.data)


def test_a_stream_settles_once_whichever_way_comes_first() -> None:
    """A stream that broke settles with its break, not again when its reader then
    leaves; one whose reader left settles without an error; a hook given after the
    stream settled is called at once."""
    broken = JsonRpcError(ErrorCode.STREAM_BROKEN, "Stream broken")
    settled: list[JsonRpcError | None] = []
    stream = ReplyStream()
    stream.on_settle(settled.append)
    assert settled == []
    stream.fail(broken)
    stream.abandon()
    stream.end(0, {"result": {"chunks": 0}})
    assert settled == [broken]

    left = ReplyStream()
    left.on_settle(settled.append)
    left.abandon()
    left.fail(broken)
    assert settled == [broken, None]
    left.on_settle(settled.append)
    assert settled == [broken, None, None]

    ended = ReplyStream()
    ended.end(None, {"error": {"code": -32050, "message": "dried up"}})
    ended.on_settle(settled.append)
    last = settled[-1]
    assert isinstance(last, JsonRpcError) and last.code == -32050


# -- a generator's node killed mid-stream (Kafka: its request goes to another node) -------

ROOT = Path(__file__).resolve().parents[2]
AGENTS = Path(__file__).with_name("stream_agents.py")


def _worker(bootstrap: str, prefix: str) -> subprocess.Popen[bytes]:
    """An ``a2a-bus serve`` process hosting the Narrator, ready when returned."""
    env = {k: v for k, v in os.environ.items() if "KAFKA_" not in k and "A2A_" not in k}
    env.update(PYTHONPATH=str(ROOT), A2A_KAFKA_SESSION_TIMEOUT_MS="6000")
    args = ["--kafka", bootstrap, "--prefix", prefix, f"{AGENTS}:Narrator"]
    process = subprocess.Popen(
        [sys.executable, "-m", "a2a_bus", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
    )
    assert process.stdout is not None
    for line in _lines(process.stdout):
        if b"worker: no HTTP gateway" in line:
            return process
    raise AssertionError("the worker did not start")


def _lines(stdout: Any) -> Iterator[bytes]:
    yield from iter(stdout.readline, b"")


@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_a_generator_run_again_on_another_node_is_not_joined_to_the_first(
    kafka_bootstrap: str,
) -> None:
    prefix = f"t{uuid.uuid4().hex[:10]}"
    workers = [await asyncio.to_thread(_worker, kafka_bootstrap, prefix) for _ in range(2)]
    options = {"prefix": prefix, "heartbeat": 60.0, "request_timeout": WAIT}
    bus = Bus.kafka(kafka_bootstrap, bus_options=options, metadata_max_age_ms=1000)
    await asyncio.wait_for(bus.astart(), WAIT)
    try:
        await eventually(lambda: bus.directory.known("narrator"))
        lines: list[str] = []
        with pytest.raises(JsonRpcError) as broken:
            async with asyncio.timeout(2 * WAIT):
                async for line in bus.async_client().stream("narrator", "lines", [300]):
                    lines.append(line)
                    if len(lines) == 3:  # kill -9 the node running the generator
                        os.kill(int(line.split()[0]), 9)
        assert broken.value.code == ErrorCode.STREAM_BROKEN
        assert "started over" in str(broken.value.data)
        tellers = {line.split()[0] for line in lines}
        assert len(tellers) == 1, lines  # one run's lines only, in order
        assert [line.split(" ", 1)[1] for line in lines] == [f"line {n}" for n in range(len(lines))]
    finally:
        await asyncio.wait_for(bus.astop(), WAIT)
        for worker in workers:
            worker.kill()
            worker.wait(WAIT)
