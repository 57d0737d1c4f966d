"""``scripts/test.sh``: ``A2A_TEST_WORKERS`` runs the tests in that many processes."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import SCRIPTS

TEST_SCRIPT = SCRIPTS / "test.sh"
#: A quick file of pure tests, run through the script.
SAMPLE = "tests/protocol/test_event_kind.py"


def _run(workers: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    # The servers are named (unused by the sample): the script starts none.
    env = {
        **{name: value for name, value in os.environ.items() if name != "A2A_TEST_WORKERS"},
        **({} if workers is None else {"A2A_TEST_WORKERS": workers}),
        "KAFKA_BOOTSTRAP_SERVERS": os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1"),
        "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:1/0"),
    }
    return subprocess.run(
        [str(TEST_SCRIPT), *args], env=env, capture_output=True, text=True, timeout=240
    )


def test_a_worker_count_that_is_no_whole_number_is_refused_before_anything_starts() -> None:
    done = _run("two")
    assert done.returncode == 1
    assert "A2A_TEST_WORKERS must be a whole number, not 'two'" in done.stderr
    assert "creating .venv" not in done.stderr and "pytest took" not in done.stderr


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("workers", "spread"), [("2", True), ("0", False), (None, False)])
def test_the_tests_are_spread_over_workers_only_when_asked(
    workers: str | None, spread: bool
) -> None:
    done = _run(workers, SAMPLE, "-p", "no:cacheprovider", "-v")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert ("[gw1]" in done.stdout or "[gw0]" in done.stdout) is spread
    assert " passed" in done.stdout
