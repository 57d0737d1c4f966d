"""The agents benchmark: each scale in its own process, bounded in time, reported
with targets, a table and curves. Figures are not asserted, only that they are there."""

from __future__ import annotations

import math
import uuid
from typing import Any

import pytest

from a2a_bus.bench import census
from a2a_bus.bench.agents import THREADS_ALONE, Sizes, measure, report, run_scale
from a2a_bus.bench.agents_scale import Result, Spec
from a2a_bus.bench.kafka_topics import delete_run_topics

MIB = 1024 * 1024


async def test_each_scale_runs_in_a_process_of_its_own_and_reports_every_figure() -> None:
    steps: list[tuple[str, int, int]] = []
    results = await measure(
        Sizes(memory=(3, 12), kafka=(), budget=120, idle=0.2),
        None,
        lambda what, done, total: steps.append((what, done, total)),
    )
    assert [(r.transport, r.agents) for r in results] == [("memory", 3), ("memory", 12)]
    for result in results:
        assert result.finished and result.answered == result.spawned == result.agents
        assert result.note == ""
        assert result.spawn_s is not None and result.spawn_s > 0
        assert result.first_p50_ms is not None and result.first_p50_ms > 0
        assert result.rss_growth is not None
        assert result.idle_cpu_pct is not None and result.idle_cpu_pct >= 0
        assert result.consumers is None and result.connections is None  # no Kafka here
        assert result.threads_s is not None and result.threads_s > 0  # the floor beside it
    assert ("memory, 12 agents: spawn", 12, 12) in steps
    assert ("memory, 12 agents: first requests", 12, 12) in steps


async def test_a_scale_out_of_time_says_how_far_it_got_instead_of_hanging() -> None:
    result = await run_scale(Spec("memory", 50, budget=0, idle=0))
    assert not result.finished
    assert result.note == "did not finish in 0 s: 0 of 50 spawned, 0 answered"
    assert result.spawn_s is None and result.idle_cpu_pct is None


@pytest.mark.kafka
async def test_on_kafka_consumers_group_members_and_connections_are_counted(
    kafka_bootstrap: str,
) -> None:
    prefix = f"tbench{uuid.uuid4().hex[:8]}"
    brokers = await census.broker_endpoints(kafka_bootstrap)
    spec = Spec("kafka", 3, 120, 0.5, kafka_bootstrap, prefix, brokers)
    try:
        result = await run_scale(spec)
    finally:
        await delete_run_topics(kafka_bootstrap, f"{prefix}.")
    assert result.finished, result.note
    assert result.answered == 3
    assert result.threads_s is None  # a spawn on Kafka is not bound by thread starts
    # The reply and registry readers, and the inboxes: each consumer is one group member.
    assert result.consumers is not None and result.consumers > result.consumers_before >= 1
    assert result.members == result.consumers
    assert result.groups is not None and result.groups >= 2
    assert result.connections is not None and result.connections_before is not None
    assert result.connections >= result.connections_before >= 1


def _results() -> list[Result]:
    def done(transport: str, n: int, spawn_s: float, idle: float, **held: Any) -> Result:
        return Result(transport, n, n, True, spawn_s, n, 1.0, 2.0, n * 32_000, idle, **held)

    unfinished = Result(
        "kafka", 1000, spawned=140, consumers=142, members=142, connections=290,
        note="did not finish in 120 s: 140 of 1,000 spawned, 0 answered",
    )  # fmt: skip
    return [
        done("memory", 10, 0.04, 0.01, threads_s=0.01),
        done("memory", 1000, 2.0, 0.8, threads_s=0.2),
        done("memory", 10_000, 22.0, 7.5, threads_s=2.5),
        done("kafka", 10, 2.0, 8.0, consumers=12, members=12, connections=26),
        done("kafka", 100, 34.0, 23.0, consumers=102, members=102, connections=206),
        unfinished,
    ]


def test_the_report_checks_each_target_at_its_scale() -> None:
    out = report(_results(), Sizes.pick(quick=False, environ={}))
    rows = {row.case: row for row in out.rows}
    assert rows["memory, 10,000 agents: spawn"].met is False  # 22 s > 10 s
    spawn = rows[
        "kafka, 1,000 agents: spawn (did not finish in 120 s; 140 spawned)"
    ]  # no figure: not met
    assert math.isnan(spawn.value) and spawn.met is False
    assert rows["kafka, 1,000 agents: answering their first request"].met is False
    assert rows["memory, 1,000 agents idle: CPU"].met is True  # 0.8% <= 5%
    assert rows["kafka, 1,000 agents idle: CPU"].met is False  # not measured
    connections = rows["kafka: broker connections, 140 (of 1,000) vs 10 agents"]
    assert (connections.value, connections.baseline, connections.met) == (290, 26, False)
    assert not out.all_met
    assert out.tables and out.tables[0].row_count == len(_results())


def test_the_curves_show_every_scale_and_mark_the_one_that_did_not_finish() -> None:
    curves = {curve.name: curve for curve in report(_results(), Sizes.pick(False, {})).curves}
    assert set(curves) == {
        "agents-spawn",
        "agents-rss",
        "agents-idle-cpu",
        "agents-first-request",
        "agents-kafka-consumers",
        "agents-kafka-connections",
    }
    spawn = curves["agents-spawn"]
    assert [(p.x, p.y) for p in spawn.series["memory"]] == [(10, 0.04), (1000, 2.0), (10_000, 22.0)]
    assert [p.x for p in spawn.series["kafka"]] == [10, 100, 1000]
    floor = [(p.x, p.y) for p in spawn.series[THREADS_ALONE]]
    assert floor == [(10, 0.01), (1000, 0.2), (10_000, 2.5)]
    assert spawn.series["kafka"][-1].y is None
    assert spawn.series["kafka"][-1].note == "did not finish\nin 120 s"
    assert {(t.x, t.y) for t in spawn.targets} == {(10_000, 10.0), (1_000, 15.0)}
    # Held resources are counted with the agents hosted, finished or not.
    held = curves["agents-kafka-connections"]
    assert [(p.x, p.y) for p in held.series["kafka"]] == [(10, 26), (100, 206), (140, 290)]
    assert [(t.x, t.y) for t in held.targets] == [(None, 26)]  # flat: as at 10 agents


def test_scales_and_times_come_from_the_environment() -> None:
    sizes = Sizes.pick(
        False,
        {
            "BENCH_AGENTS_MEMORY": "5, 50",
            "BENCH_AGENTS_KAFKA": "",
            "BENCH_AGENTS_SECONDS": "30",
            "BENCH_AGENTS_IDLE": "1.5",
        },
    )
    assert sizes == Sizes((5, 50), (), 30.0, 1.5)
    assert Sizes.pick(False, {}).memory == (10, 100, 1_000, 10_000)
    assert Sizes.pick(True, {}).kafka == (10, 100)
