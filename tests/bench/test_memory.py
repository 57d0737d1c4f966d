"""The in-memory benchmark: its report with the load curves, and a short real run
that says where it is as it goes."""

from __future__ import annotations

from a2a_bus.bench.memory import Setting, Timings, report, run
from a2a_bus.bench.memory_load import Level
from a2a_bus.runtime.affinity import current_cpu

FOUND = {
    "bus": {1: Level(10_000.0, 70.0), 64: Level(40_000.0, 25.0)},
    "floor": {1: Level(20_000.0, 40.0), 64: Level(160_000.0, 6.0)},
}


def test_the_memory_report_carries_the_curves_when_the_load_was_measured() -> None:
    timings = Timings(50.0, 90.0, 20_000.0)
    setting = Setting(timings, Timings(20.0, 40.0, 40_000.0), timings)
    out = report(timings, setting, setting, 1000, FOUND)
    assert {c.name for c in out.curves} == {
        "memory-throughput-by-in-flight",
        "memory-cpu-by-in-flight",
    }
    assert any(n.startswith("by requests in flight") for n in out.notes)
    assert not report(timings, setting, setting, 1000).curves


def test_the_report_says_how_often_each_paths_threads_shared_a_cpu() -> None:
    timings = Timings(50.0, 90.0, 20_000.0)
    default = Setting(timings, timings, timings, bus_together=0.25, floor_together=0.9)
    pinned = Setting(timings, timings, timings, bus_together=1.0, floor_together=1.0)
    notes = report(timings, default, pinned, 1000).notes
    assert (
        "round trips with the loop and the actor on one CPU: default: floor 90%, bus 25%; "
        "pinned: floor 100%, bus 100%"
    ) in notes
    unread = Setting(timings, timings, timings)  # where the CPU cannot be read
    assert not any("on one CPU" in n for n in report(timings, unread, unread, 1000).notes)


def test_a_run_reports_each_round_then_the_load_and_ends_with_its_curves() -> None:
    steps: list[tuple[str, int, int]] = []
    out = run(
        requests=40,
        rounds=2,
        load_seconds=0.05,
        progress=lambda what, done, total: steps.append((what, done, total)),
    )
    assert steps == [
        ("sequential requests, in rounds", 0, 3),
        ("sequential requests, in rounds", 1, 3),
        ("requests in flight", 2, 3),
    ]
    assert {c.name for c in out.curves} == {
        "memory-throughput-by-in-flight",
        "memory-cpu-by-in-flight",
    }
    if current_cpu() is not None:  # the pinned bus's threads share one CPU by construction
        (placement,) = [n for n in out.notes if n.startswith("round trips with the loop")]
        assert placement.endswith("pinned: floor 100%, bus 100%")
