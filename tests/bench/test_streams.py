"""The streams benchmark: its report and curves, and real runs in which every path
streams every item, in memory and on a broker, and through ``a2a-bus bench streams``
(figures are not asserted)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from a2a_bus.bench.report import quiet
from a2a_bus.bench.streams import Found, measure, on_kafka, repeats, report

FOUND: Found = {
    "memory": {"bus": {10: 20_000.0, 1000: 40_000.0}, "floor": {10: 100_000.0, 1000: 800_000.0}},
    "kafka": {"bus": {10: 500.0, 1000: 8_000.0}, "raw aiokafka": {10: 5_000.0, 1000: 20_000.0}},
}


def test_short_streams_are_repeated_more_than_long_ones_but_never_fewer_than_the_least() -> None:
    for quick in (False, True):
        counts = [repeats(length, quick) for length in (10, 100, 1000, 100_000)]
        assert counts == sorted(counts, reverse=True) and counts[0] > counts[2]
    assert repeats(100_000, quick=True) == 3 and repeats(100_000, quick=False) == 5


def test_the_report_sets_the_bus_beside_its_transport_s_baseline_at_each_length() -> None:
    out = report(FOUND)
    rows = {row.case: row for row in out.rows}
    assert set(rows) == {
        "memory: stream of 10 items",
        "memory: stream of 1,000 items",
        "kafka: stream of 10 items",
        "kafka: stream of 1,000 items",
    }
    assert rows["memory: stream of 1,000 items"].ratio == pytest.approx(0.05)
    kafka = rows["kafka: stream of 1,000 items"]
    assert (kafka.baseline_name, kafka.ratio, kafka.unit) == ("raw aiokafka", 0.4, "chunks/s")
    assert all(row.higher_is_better and row.met is None for row in out.rows)  # no targets
    curves = {curve.name: curve for curve in out.curves}
    assert set(curves) == {"streams-memory", "streams-kafka"}
    assert [(p.x, p.y) for p in curves["streams-kafka"].series["bus"]] == [
        (10, 500.0),
        (1000, 8_000.0),
    ]
    assert not any("not measured" in note for note in out.notes)


def test_without_a_broker_the_report_says_kafka_was_not_measured() -> None:
    out = report({"memory": FOUND["memory"]})
    assert {row.case.split(":")[0] for row in out.rows} == {"memory"}
    assert any("Kafka: not measured" in note for note in out.notes)


@pytest.mark.timeout(120)
async def test_the_bus_and_the_floor_stream_every_item_in_memory() -> None:
    found = await measure((1, 12), quick=True, bootstrap=None)
    assert set(found) == {"memory"}
    for path in ("bus", "floor"):
        assert set(found["memory"][path]) == {1, 12}
        assert all(rate > 0 for rate in found["memory"][path].values())


@pytest.mark.kafka
@pytest.mark.timeout(300)
async def test_the_bus_and_raw_aiokafka_stream_every_item_on_kafka(kafka_bootstrap: str) -> None:
    found = await on_kafka(kafka_bootstrap, (5,), True, quiet)
    for path in ("bus", "raw aiokafka"):
        assert found["kafka"][path][5] > 0


@pytest.mark.timeout(300)
def test_a2a_bus_bench_streams_prints_the_table_and_without_a_broker_says_so() -> None:
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    done = subprocess.run(
        [sys.executable, "-m", "a2a_bus", "bench", "streams", "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**env, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr  # no targets: nothing to miss
    assert "memory: stream of 1,000 items" in done.stdout and "(floor)" in done.stdout
    assert "Kafka: not measured" in done.stdout
