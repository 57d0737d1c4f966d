"""The Kafka benchmark's report: its publish cost by subscribers is a scale curve."""

from __future__ import annotations

from a2a_bus.bench.kafka import PUBLISH_TARGET, report


def test_the_publish_cost_by_subscribers_is_a_curve_with_its_target() -> None:
    path = {"p50_ms": 2.0, "p99_ms": 9.0, "rps_1": 400.0, "rps_many": 9000.0, "cpu_us": 80.0}
    results = {
        name: dict(path) for name in ("raw", "bus", "exactly_once", "transport", "floor")
    } | {
        "publish_us": {1: 900.0, 10: 1000.0, 50: 1500.0},
        "writes_per_publish": {1: 1.0, 10: 1.0, 50: 1.0},
    }
    [curve] = report(results).curves
    assert curve.name == "kafka-publish-cost"
    assert [(p.x, p.y) for p in curve.series["kafka"]] == [(1, 900.0), (10, 1000.0), (50, 1500.0)]
    [target] = curve.targets
    assert (target.x, target.y) == (None, PUBLISH_TARGET * 900.0)
    assert "subscri" in curve.x_label and "µs" in curve.y_label
