"""``a2a-bus bench`` runs benchmarks and reports ratios (figures are not asserted)."""

from __future__ import annotations

import os
import subprocess
import sys


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
