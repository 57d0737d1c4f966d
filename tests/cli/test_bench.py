"""``a2a-bus bench`` runs benchmarks and reports ratios (figures are not asserted),
draws scale curves with ``--plot`` and takes the broker from ``--kafka``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ports import free_ports


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "a2a_bus", "bench", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_adaptor_benchmark_prints_a_table_beside_its_baseline() -> None:
    done = run("adaptor", "--quick")
    assert done.returncode in (0, 1), done.stderr  # 1 only means a target was missed
    assert "orjson.loads" in done.stdout and "batch of 100" in done.stdout


def test_unknown_benchmark_is_a_usage_error() -> None:
    done = run("nope")
    assert done.returncode == 2
    assert "unknown benchmark" in done.stderr


def test_the_memory_benchmark_names_idle_cpus_that_halt_without_polling(tmp_path: Path) -> None:
    from a2a_bus.bench.memory import idle_note

    halt_poll = tmp_path / "guest_halt_poll_ns"
    halt_poll.write_text("0\n")
    note = idle_note(halt_poll)
    assert note is not None and "guest_halt_poll_ns=0" in note
    halt_poll.write_text("200000\n")
    assert idle_note(halt_poll) is None  # they poll first: nothing to say
    assert idle_note(tmp_path / "missing") is None  # no haltpoll here


#: The CLI in a process where matplotlib cannot be imported (as if not installed).
WITHOUT_MATPLOTLIB = (
    "import sys; sys.modules['matplotlib'] = None; from a2a_bus.cli import main; main()"
)


def _small_agents_run(**extra: str) -> dict[str, str]:
    """The environment of an agents benchmark on two small in-memory scales only."""
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    env.update(BENCH_AGENTS_MEMORY="3,12", BENCH_AGENTS_KAFKA="", BENCH_AGENTS_IDLE="0.2")
    return {**env, "COLUMNS": "200", **extra}


def test_plot_without_matplotlib_is_refused_before_anything_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_MATPLOTLIB, "bench", "adaptor", "--plot", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 2
    assert "needs matplotlib" in done.stderr and "a2a-bus[bench]" in done.stderr
    assert "orjson.loads" not in done.stdout  # the benchmark did not run


def test_the_agents_benchmark_prints_each_scale_and_plots_its_curves(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "a2a_bus", "bench", "agents", "--plot", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=_small_agents_run(),
    )
    assert done.returncode in (0, 1), done.stderr
    assert "At each scale" in done.stdout and "Kafka not measured" in done.stdout
    drawn = sorted(path.name for path in tmp_path.iterdir())
    assert drawn == [
        "agents-first-request.png",
        "agents-idle-cpu.png",
        "agents-rss.png",
        "agents-spawn.png",
    ]


def test_the_payload_benchmark_runs_in_memory_without_a_broker_and_plots_its_curves(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    done = subprocess.run(
        [sys.executable, "-m", "a2a_bus", "bench", "payload", "--quick", "--plot", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**env, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr  # no targets: only a failure exits 1
    assert "in memory, 900 kB: p50" in done.stdout and "Kafka not measured" in done.stdout
    drawn = sorted(path.name for path in tmp_path.iterdir())
    assert drawn == ["payload-memory-cpu.png", "payload-memory-p50.png"]


def test_the_fanout_benchmark_prints_each_count_and_plots_its_curves(tmp_path: Path) -> None:
    done = run("fanout", "--quick", "--plot", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "100 subscribers" in done.stdout and "CPU per added subscriber" in done.stdout
    assert sorted(path.name for path in tmp_path.iterdir()) == ["fanout-cpu.png", "fanout-p50.png"]


def test_a_kafka_out_of_reach_is_one_error_line(tmp_path: Path) -> None:
    [port] = free_ports(1)  # nothing listens on it
    done = subprocess.run(
        [sys.executable, "-m", "a2a_bus", "bench", "agents", "--kafka", f"127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=_small_agents_run(BENCH_AGENTS_MEMORY=""),
    )
    assert done.returncode == 1
    assert f"error: cannot reach Kafka at 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_bootstrap_servers_aiokafka_cannot_parse_are_refused_before_anything_runs() -> None:
    done = run("adaptor", "--kafka", "broker:port")
    assert done.returncode == 2
    assert done.stderr == "error: --kafka='broker:port': expected HOST[:PORT], comma-separated\n"


def test_the_tracing_benchmark_sets_the_trace_work_against_a_request() -> None:
    done = run("tracing", "--quick")
    assert done.returncode in (0, 1), done.stderr  # 1 only means a target was missed
    assert "API-only trace work per request, in memory" in done.stdout
    assert "SDK + batch processor" in done.stdout


@pytest.mark.kafka
@pytest.mark.timeout(300)
def test_the_bytecodes_benchmark_prints_each_path_s_count_and_the_packages_table(
    kafka_bootstrap: str,
) -> None:
    done = run("bytecodes", "--quick", "--kafka", kafka_bootstrap)
    assert done.returncode == 0, done.stderr  # no targets: nothing to miss
    assert "bus: bytecodes per request, vs floor" in done.stdout
    assert "vs transport only" in done.stdout
    assert "a2a_bus/transport/kafka" in done.stdout and "records per fetch" in done.stdout


def _readme_benchmarks() -> set[str]:
    """The names in the first column of the README's benchmark table."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Benchmarks", 1)[1].split("\n## ", 1)[0]
    return {
        line.split("|")[1].strip().strip("`")
        for line in section.splitlines()
        if line.startswith("| `")
    }


def test_the_readme_benchmark_table_has_rows_for_every_benchmark_and_no_other() -> None:
    from a2a_bus.cli.bench import BENCHMARKS

    assert _readme_benchmarks() == set(BENCHMARKS)
