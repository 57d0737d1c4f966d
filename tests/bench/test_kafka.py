"""The Kafka benchmark's report: publish cost by subscribers and CPU by requests in
flight as scale curves, the targets against the floor and raw, and the notes that
say how to read one run."""

from __future__ import annotations

from typing import Any

import pytest

from a2a_bus.bench.kafka import FLOOR_CPU_TARGET, P50_TARGET, PUBLISH_TARGET, report
from a2a_bus.bench.load import round_spread

PATH = {"p50_ms": 2.0, "p99_ms": 9.0, "rps_1": 400.0, "rps_many": 9000.0, "cpu_us": 80.0}


def measured(**figures: Any) -> dict[str, Any]:
    """A benchmark's results: every path at ``PATH``, publish costs of 900-1500 us,
    with ``figures`` on top."""
    paths = {name: dict(PATH) for name in ("raw", "bus", "exactly_once", "transport", "floor")}
    return paths | {
        "publish_us": {1: 900.0, 10: 1000.0, 50: 1500.0},
        "writes_per_publish": {1: 1.0, 10: 1.0, 50: 1.0},
        **figures,
    }


def test_the_publish_cost_by_subscribers_is_a_curve_with_its_target() -> None:
    [curve] = report(measured()).curves
    assert curve.name == "kafka-publish-cost"
    assert [(p.x, p.y) for p in curve.series["kafka"]] == [(1, 900.0), (10, 1000.0), (50, 1500.0)]
    [target] = curve.targets
    assert (target.x, target.y) == (None, PUBLISH_TARGET * 900.0)
    assert "subscri" in curve.x_label and "µs" in curve.y_label


def test_cpu_per_request_by_requests_in_flight_is_a_curve_beside_the_floor() -> None:
    by_level = {
        "bus": {1: 300.0, 16: 120.0, 64: 90.0, 256: 85.0},
        "floor": {1: 250.0, 16: 90.0, 64: 70.0, 256: 66.0},
    }
    out = report(measured(cpu_by_in_flight=by_level))
    curve = next(c for c in out.curves if c.name == "kafka-cpu-by-in-flight")
    assert [p.x for p in curve.series["bus"]] == [1, 16, 64, 256]
    assert [p.y for p in curve.series["bus"]] == [300.0, 120.0, 90.0, 85.0]
    assert [p.y for p in curve.series["floor"]] == [250.0, 90.0, 70.0, 66.0]
    [target] = curve.targets
    assert (target.x, target.y) == (64, FLOOR_CPU_TARGET * 70.0)
    assert any("by requests in flight" in note and "256: 85" in note for note in out.notes)


def test_the_bus_is_held_to_the_floor_at_64_in_flight_and_to_raw_at_p50() -> None:
    """The issue's targets: throughput >= 0.85x and CPU <= 1.25x the floor's, p50
    <= 1.3x raw; each row is met or not by its own ratio."""
    path = {"p50_ms": 2.0, "p99_ms": 9.0, "rps_1": 400.0, "rps_many": 9000.0, "cpu_us": 80.0}
    results = {name: dict(path) for name in ("raw", "exactly_once", "transport", "floor")} | {
        "bus": path | {"p50_ms": 2.7, "rps_many": 7200.0, "cpu_us": 104.0},
        "publish_us": {1: 900.0, 10: 900.0, 50: 900.0},
        "writes_per_publish": {1: 1.0, 10: 1.0, 50: 1.0},
    }
    rows = {row.case: row for row in report(results).rows}
    p50 = rows["request/response p50"]
    assert (p50.baseline_name, p50.target, p50.met) == ("raw", P50_TARGET, False)  # 1.35x
    throughput = rows["throughput, 64 in flight, vs floor"]
    assert (throughput.baseline, throughput.target, throughput.met) == (9000.0, 0.85, False)
    cpu = rows["CPU per request, 64 in flight, vs floor"]
    assert (cpu.baseline, cpu.target, cpu.met) == (80.0, 1.25, False)  # 1.3x
    results["bus"] |= {"p50_ms": 2.5, "rps_many": 7700.0, "cpu_us": 99.0}
    rows = {row.case: row for row in report(results).rows}
    assert all(rows[case].met for case in (p50.case, throughput.case, cpu.case))


def test_the_floor_s_p50_is_read_beside_raw_s_with_no_target() -> None:
    """The bus's p50 target is against raw; the floor's own p50 beside it says how
    much of that any bus on this stack adds."""
    results = measured()
    results["floor"]["p50_ms"] = 2.7
    row = next(r for r in report(results).rows if r.case == "floor: request/response p50")
    assert (row.value, row.baseline, row.baseline_name, row.target) == (2.7, 2.0, "raw", None)


def test_the_report_says_how_the_bus_to_floor_ratios_spread_over_the_rounds() -> None:
    """Paired round by round: the median, middle half and extremes of bus / floor,
    for throughput and CPU per request; one run's headline ratio is read against it."""
    bus_rounds = [(600.0, 120.0), (1000.0, 110.0), (800.0, 100.0), (700.0, 130.0), (900.0, 140.0)]
    floor_rounds = [(1000.0, 100.0)] * 5
    spread = round_spread(bus_rounds, floor_rounds)
    results = measured()
    results["bus"]["rounds"], results["floor"]["rounds"] = bus_rounds, floor_rounds
    notes = report(results).notes
    assert f"bus / floor at 64 in flight, round by round: {spread}" in notes
    assert not any("round by round" in note for note in report(measured()).notes)


def test_the_report_says_how_many_records_each_path_fetched_at_once() -> None:
    """64 records per fetch at 64 in flight: the requests travel as one wave."""
    results = measured()
    results["bus"]["records_per_fetch"], results["floor"]["records_per_fetch"] = 64.0, 32.12
    [note] = [n for n in report(results).notes if n.startswith("records per fetch")]
    assert "bus 64.0, floor 32.1;" in note
    assert "transport" not in note  # not counted in this run
    assert not any(n.startswith("records per fetch") for n in report(measured()).notes)


def test_the_report_splits_the_throughput_ratio_into_how_busy_and_what_each_request_cost() -> None:
    """Throughput is cores kept busy over CPU per request: a bus as cheap per request
    as the floor but waiting on the broker a tenth of the time gets 0.9x its rate."""
    results = measured()
    results["bus"] |= {"busy": 0.9, "cpu_us": 100.0}
    results["floor"] |= {"busy": 1.0, "cpu_us": 100.0}
    results["raw"]["busy"] = 0.95
    [note] = [n for n in report(results).notes if n.startswith("cores this process kept busy")]
    assert "raw 0.95, bus 0.90, floor 1.00;" in note
    assert "bus / floor throughput 0.90x = busy 0.90x / CPU per request 1.00x" in note
    results["bus"] |= {"busy": 1.2, "cpu_us": 150.0}
    [note] = [n for n in report(results).notes if n.startswith("cores this process kept busy")]
    assert "throughput 0.80x = busy 1.20x / CPU per request 1.50x" in note
    assert not any(n.startswith("cores this") for n in report(measured()).notes)


def test_kafka_benchmark_without_a_broker_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from a2a_bus.bench.kafka import run

    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    report = run(quick=True)
    assert report.rows == []
    assert "not run" in report.title
    assert "KAFKA_BOOTSTRAP_SERVERS" in report.notes[0]


def test_the_report_counts_writes_the_broker_refused_and_the_producer_sent_again() -> None:
    [note] = [n for n in report(measured(retried_writes=87)).notes if "NOT_ENOUGH_REPLICAS" in n]
    assert "sent again: 87 " in note
    assert not any("NOT_ENOUGH_REPLICAS" in n for n in report(measured()).notes)
    assert not any("NOT_ENOUGH_REPLICAS" in n for n in report(measured(retried_writes=0)).notes)
