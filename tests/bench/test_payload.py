"""The payload-size benchmark: its payloads, its report and curves, and real
measurements in memory and on a broker whose paths carry what they are given."""

from __future__ import annotations

import uuid

import orjson
import pytest

from a2a_bus.bench.kafka_floor import FloorRequests
from a2a_bus.bench.kafka_paths import BusRequests
from a2a_bus.bench.kafka_raw import RawPingPong
from a2a_bus.bench.kafka_topics import delete_run_topics
from a2a_bus.bench.payload import (
    ROUNDS,
    Sample,
    measure_kafka,
    measure_memory,
    payload_of,
    report,
    requests_at,
)


@pytest.mark.parametrize("size", [100, 1_000, 10_000, 900_000])
def test_a_payload_is_as_many_bytes_of_json_as_asked_within_one_record(size: int) -> None:
    written = len(orjson.dumps(payload_of(size)))
    record = len(orjson.dumps(payload_of(size)[-1])) + 1
    assert size - record < written <= size


def test_fewer_requests_are_made_as_each_carries_more_but_never_fewer_than_the_rounds() -> None:
    counts = [requests_at(size, quick=False) for size in (100, 10_000, 100_000, 900_000)]
    assert counts == sorted(counts, reverse=True) and counts[0] > counts[-1]
    assert requests_at(10_000_000, quick=True) >= ROUNDS


def _results() -> dict[str, dict[int, dict[str, Sample]]]:
    return {
        "memory": {
            100: {"bus": Sample(40.0, 60.0), "floor": Sample(20.0, 30.0)},
            900_000: {"bus": Sample(5000.0, 5200.0), "floor": Sample(4000.0, 4000.0)},
        },
        "kafka": {
            100: {
                "bus": Sample(2000.0, 1500.0),
                "floor": Sample(1900.0, 1400.0),
                "raw": Sample(1400.0, 1000.0),
            },
            900_000: {
                "bus": Sample(30000.0, 33000.0),
                "floor": Sample(25000.0, 30000.0),
                "raw": Sample(7000.0, 6600.0),
            },
        },
    }


def test_the_report_sets_the_bus_beside_each_baseline_at_every_size() -> None:
    out = report(_results())
    rows = {(row.case, row.baseline_name): row for row in out.rows}
    assert rows[("in memory, 900 kB: p50", "floor")].ratio == pytest.approx(1.25)
    assert rows[("Kafka, 100 B: p50", "raw")].ratio == pytest.approx(2000 / 1400)
    assert rows[("Kafka, 900 kB: p50", "floor")].ratio == pytest.approx(1.2)
    assert len(out.rows) == 2 + 2 * 2  # memory: floor; Kafka: floor and raw


def test_each_place_s_p50_and_cpu_by_size_are_curves() -> None:
    curves = {curve.name: curve for curve in report(_results()).curves}
    assert set(curves) == {"payload-memory-p50", "payload-memory-cpu"} | {
        "payload-kafka-p50",
        "payload-kafka-cpu",
    }
    kafka_cpu = curves["payload-kafka-cpu"]
    assert set(kafka_cpu.series) == {"bus", "floor", "raw"}
    assert [(p.x, p.y) for p in kafka_cpu.series["floor"]] == [(100, 1400.0), (900_000, 30000.0)]
    assert "bytes" in kafka_cpu.x_label and kafka_cpu.log_x and kafka_cpu.log_y


def test_the_notes_say_how_the_bus_s_cpu_ratio_moves_from_the_smallest_to_the_largest() -> None:
    notes = report(_results()).notes
    assert any("in memory" in n and "vs floor 2.00x -> 1.30x" in n for n in notes)
    kafka = "vs floor 1.07x -> 1.10x, vs raw 1.50x -> 5.00x"
    assert any("Kafka" in n and kafka in n for n in notes)


def test_without_a_broker_the_report_says_kafka_was_not_measured() -> None:
    results = _results()
    del results["kafka"]
    out = report(results)
    assert not any(curve.name.startswith("payload-kafka") for curve in out.curves)
    assert any("Kafka not measured" in note for note in out.notes)


async def test_in_memory_the_bus_and_its_floor_are_measured_at_each_size() -> None:
    sizes = (100, 50_000)
    results = await measure_memory(sizes, quick=True)
    assert list(results) == list(sizes)
    for paths in results.values():
        assert set(paths) == {"bus", "floor"}
        assert all(sample.p50_us > 0 and sample.cpu_us > 0 for sample in paths.values())


@pytest.mark.kafka
@pytest.mark.timeout(180)
async def test_each_kafka_path_carries_the_payload_it_is_given_there_and_back(
    kafka_bootstrap: str,
) -> None:
    run_id = uuid.uuid4().hex[:8]
    payload = payload_of(20_000)
    bus, floor, raw = (
        BusRequests(kafka_bootstrap, run_id),
        FloorRequests(kafka_bootstrap, run_id),
        RawPingPong(kafka_bootstrap, run_id),
    )
    try:
        for path in (bus, floor, raw):
            await path.start()
        bus.payload = floor.payload = payload
        raw.payload = orjson.dumps([payload])
        assert await bus.call() == payload
        assert (await floor.call())["result"] == [payload]
        assert await raw.call() == raw.payload
    finally:
        for path in (bus, floor, raw):
            await path.stop()
        await delete_run_topics(kafka_bootstrap, run_id)


@pytest.mark.kafka
@pytest.mark.timeout(300)
async def test_on_kafka_the_bus_floor_and_raw_are_measured_at_each_size(
    kafka_bootstrap: str,
) -> None:
    results = await measure_kafka(kafka_bootstrap, (100, 10_000), quick=True)
    assert list(results) == [100, 10_000]
    for paths in results.values():
        assert set(paths) == {"bus", "floor", "raw"}
        assert all(sample.p50_us > 0 and sample.cpu_us > 0 for sample in paths.values())
