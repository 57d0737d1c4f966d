"""``scripts/test.sh``: the tests not marked slow in ``A2A_TEST_WORKERS`` processes,
then the slow ones in one."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import SCRIPTS

TEST_SCRIPT = SCRIPTS / "test.sh"
#: A quick file of pure tests, run through the script.
SAMPLE = "tests/protocol/test_event_kind.py"

#: Tests that note where they ran: a file named for the test and its process
#: (``main`` when not in a pytest-xdist worker) in the folder ``RAN_IN`` names.
MARKED_SAMPLE = """
import os
from pathlib import Path

import pytest


def _ran(name):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    (Path(os.environ["RAN_IN"]) / f"{name}.{worker}").touch()


def test_quick():
    _ran("quick")


@pytest.mark.slow
def test_slow():
    _ran("slow")
    assert os.environ.get("SLOW_FAILS") != "1"


@pytest.mark.other
def test_other_quick():
    _ran("other")
"""


def _run(
    workers: str | None, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    # The servers are named (unused by the samples): the script starts none. What
    # pytest (and a pytest-xdist worker running this test) set is left out.
    inherited = {
        name: value
        for name, value in os.environ.items()
        if name != "A2A_TEST_WORKERS" and not name.startswith("PYTEST_")
    }
    environment = {
        **inherited,
        **({} if workers is None else {"A2A_TEST_WORKERS": workers}),
        "KAFKA_BOOTSTRAP_SERVERS": os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1"),
        "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:1/0"),
        **(env or {}),
    }
    return subprocess.run(
        [str(TEST_SCRIPT), *args], env=environment, capture_output=True, text=True, timeout=240
    )


def _cpus() -> int:
    return len(os.sched_getaffinity(0))


@pytest.fixture
def marked_sample(tmp_path: Path) -> tuple[Path, Path]:
    """The sample file, and the folder its tests note where they ran in."""
    sample = tmp_path / "test_marked_sample.py"
    sample.write_text(MARKED_SAMPLE)
    ran_in = tmp_path / "ran"
    ran_in.mkdir()
    return sample, ran_in


def _where(ran_in: Path) -> dict[str, str]:
    """Each test that ran, and the process it ran in."""
    where = {}
    for path in ran_in.iterdir():
        test, process = path.name.split(".", 1)
        where[test] = process
    return where


def _run_sample(
    marked_sample: tuple[Path, Path], workers: str, *args: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """The script run on the sample (``args`` after it); where each test ran."""
    sample, ran_in = marked_sample
    done = _run(
        workers, str(sample), "-p", "no:cacheprovider", *args, env={"RAN_IN": str(ran_in), **env}
    )
    return done, _where(ran_in)


def _said(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout[-2000:] + done.stderr[-2000:]


def test_a_worker_count_that_is_no_whole_number_is_refused_before_anything_starts() -> None:
    done = _run("two")
    assert done.returncode == 1
    assert "A2A_TEST_WORKERS must be a whole number, not 'two'" in done.stderr
    assert "creating .venv" not in done.stderr and "took" not in done.stderr


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("workers", "spread"), [("2", True), ("0", False), (None, _cpus() >= 2)])
def test_the_tests_are_spread_over_workers_unless_told_0_or_on_one_cpu(
    workers: str | None, spread: bool
) -> None:
    done = _run(workers, SAMPLE, "-p", "no:cacheprovider", "-v")
    assert done.returncode == 0, _said(done)
    assert ("[gw1]" in done.stdout or "[gw0]" in done.stdout) is spread
    assert " passed" in done.stdout


@pytest.mark.timeout(300)
def test_slow_tests_run_in_one_process_after_the_others_ran_in_workers(
    marked_sample: tuple[Path, Path],
) -> None:
    done, where = _run_sample(marked_sample, "2")
    assert done.returncode == 0, _said(done)
    assert where["slow"] == "main"
    assert where["quick"].startswith("gw") and where["other"].startswith("gw")
    said = done.stderr
    assert said.index("not marked slow, in 2 workers") < said.index("marked slow, in one process")


@pytest.mark.timeout(300)
def test_with_0_workers_every_test_runs_once_in_one_process(
    marked_sample: tuple[Path, Path],
) -> None:
    done, where = _run_sample(marked_sample, "0")
    assert done.returncode == 0, _said(done)
    assert where == {"quick": "main", "slow": "main", "other": "main"}
    assert "3 passed" in done.stdout


@pytest.mark.timeout(300)
def test_a_marker_expression_given_is_kept_in_both_runs(marked_sample: tuple[Path, Path]) -> None:
    done, where = _run_sample(marked_sample, "2", "-m", "not other")
    assert done.returncode == 0, _said(done)
    assert "other" not in where
    assert where["slow"] == "main" and where["quick"].startswith("gw")


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("selection", "code", "ran"),
    [
        # No slow test selected: the slow run's "no tests" is no failure (and -mEXPR
        # is read as -m EXPR).
        (["-mother"], 0, {"other"}),
        (["-m", "slow"], 0, {"slow"}),  # nor the other run's
        (["-m", "nothing"], 5, set()),  # neither run has a test: pytest's "no tests"
    ],
)
def test_no_tests_is_reported_only_when_neither_run_had_any(
    marked_sample: tuple[Path, Path], selection: list[str], code: int, ran: set[str]
) -> None:
    done, where = _run_sample(marked_sample, "2", *selection)
    assert done.returncode == code, _said(done)
    assert set(where) == ran


@pytest.mark.timeout(300)
def test_a_slow_test_failing_fails_the_run_though_the_others_passed(
    marked_sample: tuple[Path, Path],
) -> None:
    done, where = _run_sample(marked_sample, "2", SLOW_FAILS="1")
    assert done.returncode == 1, _said(done)
    assert set(where) == {"quick", "slow", "other"}
