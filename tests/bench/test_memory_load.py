"""The in-memory benchmark under load: each path at each number of requests in
flight, as curves and a note beside the floor."""

from __future__ import annotations

import asyncio

from a2a_bus.bench.load import Call
from a2a_bus.bench.memory_load import Level, by_in_flight, curves, note

FOUND = {
    "bus": {1: Level(10_000.0, 70.0), 64: Level(40_000.0, 25.0)},
    "floor": {1: Level(20_000.0, 40.0), 64: Level(160_000.0, 6.0)},
}


def test_throughput_and_cpu_by_requests_in_flight_are_curves_of_both_paths() -> None:
    throughput, cpu = curves(FOUND)
    assert throughput.name == "memory-throughput-by-in-flight"
    assert [(p.x, p.y) for p in throughput.series["floor"]] == [(1, 20_000.0), (64, 160_000.0)]
    assert [(p.x, p.y) for p in cpu.series["bus"]] == [(1, 70.0), (64, 25.0)]
    assert "in flight" in cpu.x_label and "µs" in cpu.y_label


def test_the_note_sets_the_bus_beside_the_floor_at_each_level() -> None:
    line = note(FOUND)
    assert "1: 10,000 / 20,000 (0.50x, 70 / 40 us CPU)" in line
    assert "64: 40,000 / 160,000 (0.25x, 25 / 6 us CPU)" in line


async def test_each_path_runs_at_each_level_with_that_many_callers_in_flight() -> None:
    most: dict[str, int] = {"slow": 0, "fast": 0}
    waiting: dict[str, int] = {"slow": 0, "fast": 0}

    def path(name: str, pause: float) -> Call:
        async def call() -> None:
            waiting[name] += 1
            most[name] = max(most[name], waiting[name])
            await asyncio.sleep(pause)
            waiting[name] -= 1

        return call

    found = await by_in_flight(
        {"slow": path("slow", 0.01), "fast": path("fast", 0.0)},
        0.1,
        levels=(1, 8),
    )
    assert most == {"slow": 8, "fast": 8}
    assert set(found["slow"]) == {1, 8}
    # Eight callers each waiting 10 ms do about eight times the work of one.
    assert found["slow"][8].per_sec > 4 * found["slow"][1].per_sec
