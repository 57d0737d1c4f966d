"""``a2a-bus bench`` runs benchmarks and reports ratios (figures are not asserted)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


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
