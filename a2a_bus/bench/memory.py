"""In-memory request/response through the bus, beside a raw pykka ``ask``.

Both run in the same process and the same run. The baseline is the least a
threaded actor round trip costs: a plain thread asks a pykka actor and blocks
on the answer. The bus path is a full JSON-RPC request: event mapping,
routing, the in-memory transport's consumer group, a supervised pykka actor
(``tell`` in, ``call_soon_threadsafe`` out) and correlation — measured with
the async client on the bus loop (two thread hand-offs, like ``ask``) and with
the sync client from another thread (four hand-offs). Target: async p50 <= 2x ``ask``.

A third path shows the floor of the bus's design: the loop ``tell``s a bare
actor that answers with ``call_soon_threadsafe``, the same two hand-offs with
no bus code. What the bus adds is its p50 minus the floor's.

The async path runs twice: on a bus as it comes by default, its threads
wherever the OS puts them, and on a bus whose threads are kept on one CPU
(``pin_cpu``, see :mod:`a2a_bus.runtime.affinity`); the ``ask`` baseline is not pinned.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pykka

from a2a_bus.bench.report import Report, Row
from a2a_bus.bus import Bus
from a2a_bus.hosting.agent import Agent, method

TARGET = 2.0
#: The longest a KVM guest's idle CPU polls before it halts (0: it halts at once).
HALT_POLL = Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns")


class _Echo(pykka.ThreadingActor):
    def on_receive(self, message: Any) -> Any:
        return message


class _Reporter(pykka.ThreadingActor):
    """Answers a (loop, future, value) message the way agent actors report."""

    def on_receive(self, message: Any) -> None:
        loop, future, value = message
        loop.call_soon_threadsafe(future.set_result, value)


class Calc(Agent):
    agent_id = "bench-calc"

    @method
    def subtract(self, minuend: int, subtrahend: int) -> int:
        return minuend - subtrahend


@dataclass(frozen=True)
class Timings:
    p50_us: float
    p99_us: float
    per_sec: float

    @classmethod
    def of(cls, samples: list[float]) -> Timings:
        ordered = sorted(samples)
        return cls(
            statistics.median(ordered) * 1e6,
            ordered[max(0, int(len(ordered) * 0.99) - 1)] * 1e6,
            len(ordered) / sum(ordered),
        )


def _timed(call: Callable[[int], Any], n: int, samples: list[float]) -> None:
    for i in range(n):
        start = time.perf_counter()
        call(i)
        samples.append(time.perf_counter() - start)


async def _hand_off(actor: pykka.ActorRef[_Reporter], n: int, samples: list[float]) -> None:
    loop = asyncio.get_running_loop()
    for i in range(n):
        start = time.perf_counter()
        future = loop.create_future()
        actor.tell((loop, future, i))
        await future
        samples.append(time.perf_counter() - start)


async def _bus_async(bus: Bus, n: int, samples: list[float]) -> None:
    client = bus.async_client()
    for i in range(n):
        start = time.perf_counter()
        await client.request("bench-calc", "subtract", [i, 1])
        samples.append(time.perf_counter() - start)


def idle_note(halt_poll: Path = HALT_POLL) -> str | None:
    """What the report should say when idle CPUs here halt without polling: every
    wake-up of a thread sleeping on another CPU is then a VM exit, and the
    unpinned round trip pays two of them."""
    try:
        polled_ns = int(halt_poll.read_text())
    except (OSError, ValueError):
        return None  # not a KVM guest with haltpoll, or unreadable: nothing to say
    if polled_ns > 0:
        return None
    return (
        "idle CPUs here halt without polling (haltpoll guest_halt_poll_ns=0): each wake-up "
        "of a thread on the other CPU is a VM exit, paid twice per unpinned round trip "
        "(see docs/bus.md)"
    )


def run(quick: bool = False, requests: int | None = None, rounds: int = 10) -> Report:
    """Sequential requests; ratios are against the pykka ``ask`` of the same run.

    The paths take turns in ``rounds`` blocks, so a change in the
    machine's load during the run weighs on all of them alike.
    """
    n = requests or (1000 if quick else 5000)
    block = max(1, n // rounds)
    ask_samples: list[float] = []
    async_samples: list[float] = []
    sync_samples: list[float] = []
    floor_samples: list[float] = []
    pinned_samples: list[float] = []
    actor = _Echo.start()
    reporter = _Reporter.start()
    try:
        with Bus.memory(pin_cpu="off") as bus, Bus.memory(pin_cpu="auto") as pinned_bus:
            bus.spawn(Calc)
            pinned_bus.spawn(Calc)
            client = bus.client()

            def ask(i: int) -> Any:
                return actor.ask({"minuend": i, "subtrahend": 1})

            def request(i: int) -> Any:
                return client.request("bench-calc", "subtract", [i, 1])

            def on_loop(count: int, samples: list[float], on: Bus = bus) -> None:
                asyncio.run_coroutine_threadsafe(_bus_async(on, count, samples), on.loop).result()

            def on_pinned_loop(count: int, samples: list[float]) -> None:
                on_loop(count, samples, pinned_bus)

            def floor(count: int, samples: list[float]) -> None:
                coro = _hand_off(reporter, count, samples)
                asyncio.run_coroutine_threadsafe(coro, bus.loop).result()

            # Warm-up, not measured.
            _timed(ask, min(block, 500), [])
            on_loop(min(block, 500), [])
            _timed(request, min(block, 500), [])
            floor(min(block, 500), [])
            on_pinned_loop(min(block, 500), [])
            for _ in range(rounds):
                _timed(ask, block, ask_samples)
                on_loop(block, async_samples)
                _timed(request, block, sync_samples)
                floor(block, floor_samples)
                on_pinned_loop(block, pinned_samples)
    finally:
        actor.stop()
        reporter.stop()
    ask_t, on_loop_t, sync_t, floor_t, pinned_t = (
        Timings.of(s)
        for s in (ask_samples, async_samples, sync_samples, floor_samples, pinned_samples)
    )
    report = Report(
        f"In-memory request/response, {block * rounds:,} sequential requests per path"
        " (lower is better)"
    )
    baseline = "pykka ask"
    report.add(
        Row(
            "p50, async client on the bus loop",
            on_loop_t.p50_us,
            "us",
            ask_t.p50_us,
            baseline,
            TARGET,
        )
    )
    report.add(
        Row("p99, async client on the bus loop", on_loop_t.p99_us, "us", ask_t.p99_us, baseline)
    )
    report.add(
        Row(
            "p50, async client, bus threads on one CPU (pin_cpu='auto')",
            pinned_t.p50_us,
            "us",
            ask_t.p50_us,
            baseline,
            TARGET,
        )
    )
    report.add(Row("p50, sync client from a thread", sync_t.p50_us, "us", ask_t.p50_us, baseline))
    report.add(Row("p99, sync client from a thread", sync_t.p99_us, "us", ask_t.p99_us, baseline))
    report.add(
        Row(
            "p50, floor: tell from the loop, answer by call_soon_threadsafe",
            floor_t.p50_us,
            "us",
            ask_t.p50_us,
            baseline,
        )
    )
    report.notes.append(
        f"the hand-off floor alone is {floor_t.p50_us / ask_t.p50_us:.1f}x ask; the bus adds "
        f"{on_loop_t.p50_us - floor_t.p50_us:.0f} us (p50) over the floor"
    )
    if (note := idle_note()) is not None:
        report.notes.append(note)
    report.notes.append(
        f"requests/s: pykka ask {ask_t.per_sec:,.0f}, bus async {on_loop_t.per_sec:,.0f}, "
        f"bus sync {sync_t.per_sec:,.0f}"
    )
    return report


if __name__ == "__main__":
    run().print()
