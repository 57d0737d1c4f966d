"""Agent -> caller streams through a broker fault: a generator agent on one bus, its
caller on another (two nodes, one process), and what the caller read, counted.

:class:`Numbers` streams ``0..total-1`` and pauses part way (:class:`Gate`), so a
test strikes (kills a broker) with chunks in flight and the rest still to come;
:func:`stream_through` runs one stream around such a fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from a2a_bus import Agent, Bus, JsonRpcError, method
from tests.transport.kafka.support import WAIT

#: Chunks a :class:`Numbers` stream writes past its pause before it waits to go on.
HELD_BACK = 1_000


@dataclass
class Gate:
    """Where a :class:`Numbers` stream stands: ``reached`` its pause point, told to
    ``go_on`` past it, ``closed`` by its host before its end (a chunk not sent)."""

    reached: threading.Event = field(default_factory=threading.Event)
    go_on: threading.Event = field(default_factory=threading.Event)
    closed: threading.Event = field(default_factory=threading.Event)


class Numbers(Agent):
    """Streams ``0..total-1``; at ``pause_at`` it says so (:class:`Gate`), writes
    :data:`HELD_BACK` more, then waits until told to go on: the fault strikes with
    chunks in flight, and the rest is written after it."""

    agent_id = "numbers"
    #: Runs of the generator, per token (a run again after a redelivery counts).
    runs: ClassVar[Counter[str]] = Counter()
    gates: ClassVar[dict[str, Gate]] = {}

    @method
    def count(self, token: str, total: int, pause_at: int) -> Iterator[int]:
        self.runs[token] += 1
        gate = self.gates[token]
        try:
            for n in range(total):
                if n == pause_at:
                    gate.reached.set()
                elif n == pause_at + HELD_BACK:
                    gate.go_on.wait(WAIT)
                yield n
        except GeneratorExit:
            gate.closed.set()
            raise


@dataclass
class StreamRead:
    """What a caller read of one stream."""

    items: list[Any] = field(default_factory=list)
    #: The JSON-RPC error that ended it (None: it completed).
    error: JsonRpcError | None = None
    #: Seconds between two chunks (or the request and the first, the last and the end).
    longest_wait: float = 0.0
    #: Runs of the generator.
    runs: int = 0

    def faults(self) -> tuple[int, int, int]:
        """Chunks lost (missing before the last one read), duplicated, out of order."""
        numbers = [n for n in self.items if isinstance(n, int)]
        seen = set(numbers)
        lost = max(numbers) + 1 - len(seen) if numbers else 0
        out_of_order = sum(1 for a, b in itertools.pairwise(numbers) if b < a)
        return lost, len(numbers) - len(seen), out_of_order

    def summary(self, total: int, caller: Bus) -> str:
        """One line for ``-s``: what was read, how it ended, what the caller dropped."""
        error = self.error
        end = f"{error.code} {error.message}: {error.data}" if error else "the end"
        metrics = caller.metrics
        return (
            f"read {len(self.items)} of {total}, then {end}; (lost, duplicated, out of "
            f"order) {self.faults()}; generator runs {self.runs}; repeats dropped "
            f"{metrics.stream_duplicates}, put back in order {metrics.stream_gaps}; "
            f"longest wait {self.longest_wait:.1f} s"
        )


async def read_stream(caller: Bus, token: str, total: int, pause_at: int) -> StreamRead:
    """``numbers.count`` streamed to ``caller``; an exception other than a JSON-RPC
    error fails the test."""
    read = StreamRead()
    loop = asyncio.get_running_loop()
    last = loop.time()
    try:
        stream = caller.async_client().stream("numbers", "count", [token, total, pause_at])
        async for item in stream:
            now = loop.time()
            read.longest_wait, last = max(read.longest_wait, now - last), now
            read.items.append(item)
    except JsonRpcError as exc:
        read.error = exc
    read.longest_wait = max(read.longest_wait, loop.time() - last)
    return read


async def stream_through(
    caller: Bus, total: int, fault: Callable[[Gate], Awaitable[None]]
) -> StreamRead:
    """Stream ``total`` numbers from the ``numbers`` agent to ``caller``; once 40 % of
    them were handed over, ``fault(gate)`` strikes (and sets ``gate.go_on``)."""
    token = uuid.uuid4().hex
    gate = Numbers.gates[token] = Gate()
    reading = asyncio.create_task(read_stream(caller, token, total, total * 2 // 5))
    try:
        reached = asyncio.ensure_future(asyncio.to_thread(gate.reached.wait, WAIT))
        await asyncio.wait({reading, reached}, return_when=asyncio.FIRST_COMPLETED)
        if not (reached.done() and reached.result()):
            pytest.fail(f"the stream did not get under way: {await reading}")
        await fault(gate)
        # The stream's own per-chunk deadline ends it; this only guards against a hang.
        read = await asyncio.wait_for(reading, 3 * WAIT)
    finally:
        gate.reached.set()  # lets the waiting thread go, should the stream not start
        gate.go_on.set()
        reading.cancel()
    read.runs = Numbers.runs[token]
    return read


def assert_whole_or_clear_error(read: StreamRead, total: int, request_timeout: float) -> None:
    """Chunks 0..k once each, in order; then the end (k = total - 1) or an error;
    and no wait for a chunk past the request timeout (a hang)."""
    assert read.faults() == (0, 0, 0), f"(lost, duplicated, out of order) {read.faults()}"
    assert read.items == list(range(len(read.items))), "not chunks 0..k"
    assert read.error is not None or len(read.items) == total, "ended early without an error"
    assert read.longest_wait < request_timeout + 5.0, f"waited {read.longest_wait:.1f} s"


def assert_written_once_in_order(caller: Bus) -> None:
    """No chunk reached ``caller`` twice or ahead of its turn: the producer wrote each
    once, in order (the caller's reader drops repeats and reorders, hiding both)."""
    found = (caller.metrics.stream_duplicates, caller.metrics.stream_gaps)
    assert found == (0, 0), f"(chunks that came twice, ahead of their turn) {found}"


@contextlib.asynccontextmanager
async def stream_buses(
    bootstrap: str, request_timeout: float, **kafka_options: Any
) -> AsyncIterator[Bus]:
    """The caller's bus, started beside a bus hosting :class:`Numbers` (another node);
    both stopped after."""
    options = {
        "prefix": f"sf{uuid.uuid4().hex[:10]}",
        "heartbeat": 60.0,
        "request_timeout": request_timeout,
    }
    agents = Bus.kafka(bootstrap, bus_options=options, **kafka_options)
    agents.spawn(Numbers)
    caller = Bus.kafka(bootstrap, bus_options=options, **kafka_options)
    await asyncio.wait_for(agents.astart(), WAIT)
    try:
        await asyncio.wait_for(caller.astart(), WAIT)
        try:
            yield caller
        finally:
            await asyncio.wait_for(caller.astop(), WAIT)
    finally:
        await asyncio.wait_for(agents.astop(), WAIT)
