"""The in-memory bus under load: throughput and CPU per request by requests in flight.

The memory benchmark (:mod:`a2a_bus.bench.memory`) times sequential requests; this
part drives the same paths with ``in_flight`` callers on the bus loop, each
waiting for its answer before it asks again: the bus (the async client, an agent
with room in its mailbox for every request in flight) beside the hand-off floor
(the loop ``tell``s a bare actor that answers with ``call_soon_threadsafe``). The
paths take turns at each level.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from a2a_bus.bench.load import IN_FLIGHT_LEVELS, Call, loaded
from a2a_bus.bench.report import Curve, Point


@dataclass(frozen=True)
class Level:
    """One path at one number of requests in flight."""

    per_sec: float
    cpu_us: float  # this process's CPU per request, all threads


async def by_in_flight(
    paths: Mapping[str, Call], seconds: float, levels: tuple[int, ...] = IN_FLIGHT_LEVELS
) -> dict[str, dict[int, Level]]:
    """Each of ``paths`` for ``seconds`` at each level; the paths take turns."""
    found: dict[str, dict[int, Level]] = {name: {} for name in paths}
    for level in levels:
        for name, call in paths.items():
            run = await loaded(call, level, seconds)
            cpu_us = run.cpu / run.requests * 1e6 if run.requests else 0.0
            found[name][level] = Level(run.requests / run.wall, cpu_us)
    return found


def curves(found: Mapping[str, Mapping[int, Level]]) -> list[Curve]:
    """Throughput and CPU per request of each path, by requests in flight."""
    shown = (
        ("memory-throughput-by-in-flight", "requests per second", "requests/s", "per_sec"),
        ("memory-cpu-by-in-flight", "CPU per request", "CPU per request (µs)", "cpu_us"),
    )
    return [
        Curve(
            name,
            f"In memory: {what}, by requests in flight",
            "requests in flight",
            y_label,
            {
                path: [Point(n, getattr(level, field)) for n, level in by.items()]
                for path, by in found.items()
            },
        )
        for name, what, y_label, field in shown
    ]


def note(found: Mapping[str, Mapping[int, Level]]) -> str:
    """The bus's throughput beside the floor's at each level, in one line."""
    bus, floor = found["bus"], found["floor"]
    levels = "; ".join(
        f"{n}: {bus[n].per_sec:,.0f} / {floor[n].per_sec:,.0f} "
        f"({bus[n].per_sec / floor[n].per_sec:.2f}x, "
        f"{bus[n].cpu_us:.0f} / {floor[n].cpu_us:.0f} us CPU)"
        for n in bus
        if n in floor and floor[n].per_sec
    )
    return f"by requests in flight, bus / floor requests per second (default bus): {levels}"
