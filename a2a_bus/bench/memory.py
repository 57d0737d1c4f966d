"""In-memory request/response through the bus, beside a raw pykka ``ask`` and the hand-off floor.

All paths run in the same process and the same run, taking turns in rounds.
The baseline is the least a threaded actor round trip costs: a plain thread
asks a pykka actor and blocks on the answer. The bus path is a full JSON-RPC
request: event mapping, routing, the in-memory transport's consumer group, a
supervised pykka actor (``tell`` in, ``call_soon_threadsafe`` out) and
correlation — measured with the async client on the bus loop (two thread
hand-offs, like ``ask``) and with the sync client from another thread (four).

The floor is the least the bus's design costs: the loop ``tell``s a bare actor
that answers with ``call_soon_threadsafe``, the same two hand-offs with no bus
code. What the bus adds is its p50 minus the floor's.

Everything but ``ask`` is measured twice: on a bus as it comes by default, its
threads wherever the OS puts them, and on a bus whose threads are kept on one
CPU (``pin_cpu="auto"``, see :mod:`a2a_bus.runtime.affinity`; that bus's floor
actor is started from its loop thread, so it shares the CPU). The ``ask``
baseline is not pinned.

Targets: the bus adds at most :data:`ADDED_LIMIT_US` p50 over the floor (by
default), and pinned, its p50 is at most :data:`PINNED_TARGET` times ``ask``'s.
The report also says how often each path's loop thread and actor ran on one CPU:
by default the floor's p50 moves with it.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pykka

from a2a_bus.bench import memory_load
from a2a_bus.bench.kafka_paths import BenchEcho
from a2a_bus.bench.memory_load import Level
from a2a_bus.bench.report import Progress, Report, Row
from a2a_bus.bus import Bus
from a2a_bus.hosting.agent import Agent, method
from a2a_bus.runtime.affinity import current_cpu

#: Microseconds (p50) the bus may add over the hand-off floor, by default.
ADDED_LIMIT_US = 40.0
#: Largest p50 of the pinned bus, as a multiple of ``ask``'s.
PINNED_TARGET = 2.0
#: The longest a KVM guest's idle CPU polls before it halts (0: it halts at once).
HALT_POLL = Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns")


class _Echo(pykka.ThreadingActor):
    def on_receive(self, message: Any) -> Any:
        return message


class _Reporter(pykka.ThreadingActor):
    """Answers a (loop, future) message the way agent actors report, with the CPU
    it ran on."""

    def on_receive(self, message: Any) -> None:
        loop, future = message
        loop.call_soon_threadsafe(future.set_result, current_cpu())


#: The CPU each ``subtract`` ran on, in order (requests are sequential): read by
#: the async bus path, to tell whether the loop and the actor shared a CPU.
_ACTOR_CPUS: deque[int | None] = deque()


class Calc(Agent):
    agent_id = "bench-calc"

    @method
    def subtract(self, minuend: int, subtrahend: int) -> int:
        _ACTOR_CPUS.append(current_cpu())
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


@dataclass(frozen=True)
class Setting:
    """The bus paths of one setting (default or pinned), measured in the same run;
    for the async bus and the floor, the share of round trips whose two threads
    ran on one CPU (None where the CPU cannot be read)."""

    bus: Timings
    floor: Timings
    sync: Timings
    bus_together: float | None = None
    floor_together: float | None = None

    @property
    def added_us(self) -> float:
        """What the bus adds over the hand-off floor, p50."""
        return self.bus.p50_us - self.floor.p50_us


def _timed(call: Callable[[int], Any], n: int, samples: list[float]) -> None:
    for i in range(n):
        start = time.perf_counter()
        call(i)
        samples.append(time.perf_counter() - start)


async def _hand_off(
    actor: pykka.ActorRef[_Reporter], n: int, samples: list[float], together: list[bool]
) -> None:
    loop = asyncio.get_running_loop()
    for _ in range(n):
        start = time.perf_counter()
        cpu = current_cpu()
        future = loop.create_future()
        actor.tell((loop, future))
        actor_cpu = await future
        samples.append(time.perf_counter() - start)
        if cpu is not None and actor_cpu is not None:
            together.append(cpu == actor_cpu)


async def _hand_off_once(actor: pykka.ActorRef[_Reporter]) -> Any:
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    actor.tell((loop, future))
    return await future


async def _bus_async(bus: Bus, n: int, samples: list[float], together: list[bool]) -> None:
    client = bus.async_client()
    _ACTOR_CPUS.clear()  # the sync client's requests left theirs
    for i in range(n):
        start = time.perf_counter()
        cpu = current_cpu()
        await client.request("bench-calc", "subtract", [i, 1])
        samples.append(time.perf_counter() - start)
        actor_cpu = _ACTOR_CPUS.popleft() if _ACTOR_CPUS else None
        if cpu is not None and actor_cpu is not None:
            together.append(cpu == actor_cpu)


async def _start_reporter() -> pykka.ActorRef[_Reporter]:
    # Started from the loop thread: its thread inherits that thread's CPU affinity.
    return _Reporter.start()


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


class _Paths:
    """The paths of one bus (its async and sync clients, and its floor), in samples."""

    def __init__(self, bus: Bus, reporter: pykka.ActorRef[_Reporter]) -> None:
        self.bus = bus
        self.reporter = reporter
        self.client = bus.client()
        self.samples: dict[str, list[float]] = {"bus": [], "floor": [], "sync": []}
        #: Per round trip of the async bus and of the floor: its threads on one CPU.
        self.together: dict[str, list[bool]] = {"bus": [], "floor": []}

    def run(self, count: int, measured: bool = True) -> None:
        samples = self.samples if measured else {name: [] for name in self.samples}
        together = self.together if measured else {name: [] for name in self.together}
        loop = self.bus.loop
        coro = _bus_async(self.bus, count, samples["bus"], together["bus"])
        asyncio.run_coroutine_threadsafe(coro, loop).result()
        _timed(self._request, count, samples["sync"])
        coro = _hand_off(self.reporter, count, samples["floor"], together["floor"])
        asyncio.run_coroutine_threadsafe(coro, loop).result()

    def _request(self, i: int) -> Any:
        return self.client.request("bench-calc", "subtract", [i, 1])

    def under_load(self, seconds: float) -> dict[str, dict[int, Level]]:
        """The bus and the floor with callers in flight (see :mod:`memory_load`)."""
        client = self.bus.async_client()

        async def on_bus() -> Any:
            return await client.request(BenchEcho.agent_id, "echo", [1])

        async def on_floor() -> Any:
            return await _hand_off_once(self.reporter)

        paths = {"bus": on_bus, "floor": on_floor}
        coro = memory_load.by_in_flight(paths, seconds)
        return asyncio.run_coroutine_threadsafe(coro, self.bus.loop).result()

    def setting(self) -> Setting:
        bus, floor, sync = (Timings.of(self.samples[name]) for name in ("bus", "floor", "sync"))
        together = self.together
        return Setting(bus, floor, sync, _share(together["bus"]), _share(together["floor"]))


def _share(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def run(
    quick: bool = False,
    requests: int | None = None,
    rounds: int = 10,
    load_seconds: float | None = None,
    progress: Progress | None = None,
) -> Report:
    """Sequential requests; ratios are against the pykka ``ask`` of the same run.

    The paths take turns in ``rounds`` blocks, so a change in the
    machine's load during the run weighs on all of them alike. Then the default
    bus and its floor with callers in flight, ``load_seconds`` per path and level.
    """
    n = requests or (1000 if quick else 5000)
    block = max(1, n // rounds)
    ask_samples: list[float] = []
    actor = _Echo.start()
    reporters: list[pykka.ActorRef[_Reporter]] = []
    try:
        with Bus.memory(pin_cpu="off") as bus, Bus.memory(pin_cpu="auto") as pinned_bus:
            bus.spawn(Calc)
            bus.spawn(BenchEcho)
            pinned_bus.spawn(Calc)
            reporters.append(_Reporter.start())
            reporters.append(pinned_bus.portal.run(_start_reporter()))
            default = _Paths(bus, reporters[0])
            pinned = _Paths(pinned_bus, reporters[1])

            def ask(i: int) -> Any:
                return actor.ask({"minuend": i, "subtrahend": 1})

            warm_up = min(block, 500)
            _timed(ask, warm_up, [])
            default.run(warm_up, measured=False)
            pinned.run(warm_up, measured=False)
            for done in range(rounds):
                if progress is not None:
                    progress("sequential requests, in rounds", done, rounds + 1)
                _timed(ask, block, ask_samples)
                default.run(block)
                pinned.run(block)
            if progress is not None:
                progress("requests in flight", rounds, rounds + 1)
            load = default.under_load(load_seconds or (0.3 if quick else 1.0))
    finally:
        actor.stop()
        for reporter in reporters:
            reporter.stop()
    settings = (Timings.of(ask_samples), default.setting(), pinned.setting())
    return report(*settings, block * rounds, load)


def report(
    ask: Timings,
    default: Setting,
    pinned: Setting,
    count: int,
    load: dict[str, dict[int, Level]] | None = None,
) -> Report:
    out = Report(
        f"In-memory request/response, {count:,} sequential requests per path (lower is better)"
    )
    baseline = "pykka ask"
    for name, setting in (("default", default), ("pinned", pinned)):
        out.add(
            Row(
                f"bus adds over the hand-off floor, p50 ({name})",
                setting.added_us,
                "us",
                limit=ADDED_LIMIT_US if name == "default" else None,
            )
        )
        out.add(
            Row(
                f"p50, async client on the bus loop ({name})",
                setting.bus.p50_us,
                "us",
                ask.p50_us,
                baseline,
                PINNED_TARGET if name == "pinned" else None,
            )
        )
        out.add(
            Row(f"p50, floor: tell, call_soon_threadsafe back ({name})", setting.floor.p50_us, "us")
        )
        out.add(Row(f"p50, sync client from a thread ({name})", setting.sync.p50_us, "us"))
        out.add(Row(f"p99, async client on the bus loop ({name})", setting.bus.p99_us, "us"))
    out.add(Row("p50, pykka ask from a thread (not pinned)", ask.p50_us, "us"))
    out.notes.extend(_verdicts(ask, default, pinned))
    if (note := idle_note()) is not None:
        out.notes.append(note)
    out.notes.append(
        f"requests/s: pykka ask {ask.per_sec:,.0f}; bus async {default.bus.per_sec:,.0f} "
        f"default, {pinned.bus.per_sec:,.0f} pinned; bus sync {default.sync.per_sec:,.0f} "
        f"default, {pinned.sync.per_sec:,.0f} pinned"
    )
    if (note := _placement_note(default, pinned)) is not None:
        out.notes.append(note)
    if load is not None:
        out.curves.extend(memory_load.curves(load))
        out.notes.append(memory_load.note(load))
    return out


def _placement_note(default: Setting, pinned: Setting) -> str | None:
    """How often each path's two threads shared a CPU: the scheduler tends to put
    the floor's actor beside the loop (a waker that sleeps at once), which makes
    its hand-offs cheaper than any spread over two CPUs (see docs/bus.md)."""

    def share(value: float | None) -> str:
        return "?" if value is None else f"{value:.0%}"

    if default.bus_together is None and default.floor_together is None:
        return None
    return (
        "round trips with the loop and the actor on one CPU: default: floor "
        f"{share(default.floor_together)}, bus {share(default.bus_together)}; pinned: floor "
        f"{share(pinned.floor_together)}, bus {share(pinned.bus_together)}"
    )


def _verdicts(ask: Timings, default: Setting, pinned: Setting) -> list[str]:
    """The two targets, each with its figures and whether it is met."""

    def verdict(met: bool) -> str:
        return "met" if met else "NOT met"

    added = default.added_us
    ratio = pinned.bus.p50_us / ask.p50_us
    return [
        f"target: the bus adds <= {ADDED_LIMIT_US:g} us p50 over the hand-off floor, by "
        f"default: {added:.0f} us ({default.bus.p50_us:.0f} - {default.floor.p50_us:.0f}): "
        f"{verdict(added <= ADDED_LIMIT_US)} (pinned it adds {pinned.added_us:.0f} us)",
        f"target: pinned p50 <= {PINNED_TARGET:g}x ask: {pinned.bus.p50_us:.0f} us vs "
        f"{ask.p50_us:.0f} us = {ratio:.2f}x: {verdict(ratio <= PINNED_TARGET)} "
        f"(default: {default.bus.p50_us / ask.p50_us:.2f}x)",
    ]


if __name__ == "__main__":
    run().print()
