"""Bytecodes: the Python work of one Kafka request, counted, by package.

Timings on a shared machine move by a third from one second to the next, so a
change worth a few percent of CPU cannot be told from noise by timing it. This
benchmark counts instead: every bytecode the event loop's thread runs while a
path serves a fixed number of requests at 64 in flight, per request and by the
package (or ``a2a_bus`` subpackage) of the function that ran it. The counts do
not depend on what else the machine is doing; they move only with the way
requests travel together (waves of fetched records), a few percent from run to
run.

The paths are the Kafka benchmark's (:mod:`a2a_bus.bench.kafka`): raw aiokafka,
the floor (the least per-event work any bus on this stack must do), the bare
transport (two ``KafkaTransport`` instances, no agent, no correlator) and the bus;
the bus against the bare transport is what the layers above the transport add.
Tracing every bytecode slows the process down fifty-fold or more, so the counts
say how much Python each path runs, not how fast it runs. Every thread a path
starts is traced (the actor threads of the bus and of the floor alike), and the
report says how much of each path's count ran outside the event loop's thread.
A thread's long-running loop itself (pykka's inbox loop, started before the
count) is not counted; the calls it makes while counting are.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any

from rich.table import Table

from a2a_bus.bench import given_broker
from a2a_bus.bench.kafka import not_run
from a2a_bus.bench.kafka_floor import FloorRequests
from a2a_bus.bench.kafka_paths import BusRequests, TransportRequests
from a2a_bus.bench.kafka_raw import RawPingPong
from a2a_bus.bench.kafka_topics import delete_run_topics
from a2a_bus.bench.load import IN_FLIGHT, Call, Path, warm_up
from a2a_bus.bench.report import Progress, Report, Row, quiet
from a2a_bus.runtime import loops

TITLE = "Kafka: Python bytecodes per request (counted, not timed)"
#: Requests counted per path (quick runs count fewer).
REQUESTS = 2_000
QUICK_REQUESTS = 400
#: Packages shown in the table: those where the bus runs most more than the floor.
SHOWN = 14

_STDLIB = os.path.dirname(os.__file__)


def package_of(filename: str) -> str:
    """Where a function's code lives: ``a2a_bus/<subpackage>`` (a module directly
    in ``a2a_bus`` by its own name), a third-party package's name, ``asyncio``,
    ``stdlib``, ``generated`` (code made at run time: named tuples' ``__new__``,
    dataclasses' ``__init__``) or ``other``."""
    if filename.startswith("<"):
        return "generated"
    parts = filename.replace("\\", "/").split("/")
    if "a2a_bus" in parts:
        inner = parts[len(parts) - 1 - parts[::-1].index("a2a_bus") :]
        if len(inner) > 2:
            return "/".join(inner[:-1])
        return "/".join(inner)  # a2a_bus/settings.py, a2a_bus/demo.py
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1].removesuffix(".py")
    if filename.startswith(_STDLIB):
        return "asyncio" if "asyncio" in parts else "stdlib"
    return "other"


class BytecodeCounter:
    """Counts the bytecodes each function runs in the threads it traces: the
    thread that arms it and the threads started while it is armed (see
    :meth:`armed`), while it counts (:meth:`counting`)."""

    def __init__(self) -> None:
        self.by_code: Counter[CodeType] = Counter()
        #: Of those, the bytecodes run in threads other than the one that armed it.
        self.elsewhere = 0
        self._on = False
        self._home: int | None = None

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event != "call" or not self._on:  # (a coroutine's resumption is a call too)
            return None
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        code = frame.f_code
        counts = self.by_code
        home = threading.get_ident() == self._home

        def per_opcode(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "opcode" and self._on:
                counts[code] += 1
                if not home:
                    self.elsewhere += 1
            return per_opcode

        return per_opcode

    @contextmanager
    def armed(self) -> Iterator[None]:
        """Trace this thread and threads started meanwhile; nothing is counted
        outside :meth:`counting`."""
        previous, previous_threads = sys.gettrace(), threading.gettrace()
        self._home = threading.get_ident()
        threading.settrace(self._trace)
        sys.settrace(self._trace)
        try:
            yield
        finally:
            sys.settrace(previous)
            threading.settrace(previous_threads)
            self._home = None

    @contextmanager
    def counting(self) -> Iterator[None]:
        """Count while inside (arming the counter here unless it is armed).

        Garbage made before is collected first: a collection while counting would
        run its finalizers (closing coroutines of an earlier bus, say) inside the count.
        """
        gc.collect()
        with nullcontext() if self._home is not None else self.armed():
            self._on = True
            try:
                yield
            finally:
                self._on = False

    def by_package(self) -> Counter[str]:
        found: Counter[str] = Counter()
        for code, count in self.by_code.items():
            found[package_of(code.co_filename)] += count
        return found


@dataclass
class Counted:
    """Each path's bytecodes per request by package (all threads), the records per
    fetch of the paths that count their fetches, while counting (how requests
    travelled), and each path's share outside the event loop's thread."""

    bytecodes: dict[str, dict[str, float]] = field(default_factory=dict)
    records_per_fetch: dict[str, float] = field(default_factory=dict)
    #: Bytecodes per request run outside the event loop's thread (the actors'), by path.
    elsewhere: dict[str, float] = field(default_factory=dict)


async def requests_at(call: Call, in_flight: int, count: int) -> None:
    """Exactly ``count`` requests, by ``in_flight`` callers each waiting for its answer."""
    left = count

    async def caller() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await call()

    await asyncio.gather(*(caller() for _ in range(in_flight)))


async def per_request(call: Call, count: int, counter: BytecodeCounter) -> dict[str, float]:
    """Bytecodes per request by package, over ``count`` requests at ``IN_FLIGHT``
    (``counter`` armed before the path started, so its threads are traced)."""
    await requests_at(call, IN_FLIGHT, IN_FLIGHT * 10)  # waves formed before counting
    with counter.counting():
        await requests_at(call, IN_FLIGHT, count)
    return {package: n / count for package, n in counter.by_package().items()}


async def measure(bootstrap: str, count: int, progress: Progress) -> Counted:
    run_id = uuid.uuid4().hex[:8]
    floor, bus = FloorRequests(bootstrap, run_id), BusRequests(bootstrap, run_id)
    transport = TransportRequests(bootstrap, run_id)
    paths: dict[str, Path] = {
        "raw": RawPingPong(bootstrap, run_id),
        "floor": floor,
        "transport": transport,
        "bus": bus,
    }
    fetched = {"floor": floor.fetched, "transport": transport.fetched, "bus": bus.fetched}
    counted = Counted()
    try:
        for done, (name, path) in enumerate(paths.items()):
            progress(f"counting {name}", done, len(paths))
            counter = BytecodeCounter()
            with counter.armed():  # before the start: the threads it starts are traced
                await path.start()
                try:
                    await warm_up(path.call)
                    before = fetched[name]() if name in fetched else (0, 0)
                    counted.bytecodes[name] = await per_request(path.call, count, counter)
                    counted.elsewhere[name] = counter.elsewhere / count
                    if name in fetched:
                        fetches, records = (
                            a - b for a, b in zip(fetched[name](), before, strict=True)
                        )
                        counted.records_per_fetch[name] = records / fetches if fetches else 0.0
                finally:
                    await path.stop()
    finally:
        await delete_run_topics(bootstrap, run_id)
    return counted


def report(counted: Counted, count: int) -> Report:
    out = Report(TITLE)
    found = counted.bytecodes
    totals = {name: round(sum(packages.values())) for name, packages in found.items()}
    for name in ("bus", "floor", "transport"):
        if name in totals:
            out.add(Row(f"{name}: bytecodes per request", totals[name], "", totals["raw"], "raw"))
    out.add(
        Row("bus: bytecodes per request, vs floor", totals["bus"], "", totals["floor"], "floor")
    )
    if "transport" in totals:  # what the layers above the transport add
        out.add(
            Row(
                "bus: bytecodes per request, vs transport only",
                totals["bus"],
                "",
                totals["transport"],
                "transport",
            )
        )
    bus, floor = found["bus"], found["floor"]
    extra = sorted(bus.keys() | floor.keys(), key=lambda p: floor.get(p, 0) - bus.get(p, 0))
    paths = [name for name in ("raw", "floor", "transport", "bus") if name in found]
    table = Table(title="bytecodes per request by package, where the bus runs most more")
    for column in ("package", *paths, "bus - floor"):
        table.add_column(column, justify="left" if column == "package" else "right")
    for package in extra[:SHOWN]:
        figures = [found[name].get(package, 0.0) for name in paths]
        added = bus.get(package, 0.0) - floor.get(package, 0.0)
        table.add_row(package, *(f"{n:,.0f}" for n in figures), f"{added:+,.0f}")
    out.tables.append(table)
    out.notes.append(
        f"bytecodes run in every thread of the path, {count:,} requests per path at "
        f"{IN_FLIGHT} in flight after {IN_FLIGHT * 10} uncounted; counts move a few percent "
        "from run to run with how requests travel together, not with the machine's load"
    )
    if counted.elsewhere:
        shares = ", ".join(f"{name} {n:,.0f}" for name, n in counted.elsewhere.items())
        out.notes.append(
            f"of those, run outside the event loop's thread (the actors'): {shares} a request"
        )
    if counted.records_per_fetch:
        per_fetch = ", ".join(f"{name} {n:.1f}" for name, n in counted.records_per_fetch.items())
        out.notes.append(
            f"records per fetch while counting: {per_fetch} (a path slowed down by the count "
            "may travel in other waves than untraced; fewer records per fetch, more aiokafka "
            "work per request)"
        )
    return out


def run(
    quick: bool = False, bootstrap: str | None = None, progress: Progress | None = None
) -> Report:
    """Count on the broker at ``bootstrap`` (default: ``KAFKA_BOOTSTRAP_SERVERS``)."""
    bootstrap = given_broker(bootstrap)
    if not bootstrap:
        return not_run(TITLE)
    count = QUICK_REQUESTS if quick else REQUESTS
    found = loops.run(measure(bootstrap, count, progress or quiet))
    return report(found, count)
