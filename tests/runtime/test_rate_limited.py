"""A flood of log lines: the first few written, then one count per interval."""

from __future__ import annotations

import asyncio
import logging

import pytest

from a2a_bus.runtime.rate_limited import RateLimitedLog

INTERVAL = 0.05  # short: the summaries come from the loop's timers


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "tests.flood"]


def _summaries(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [line.split(" since ")[0] for line in _lines(caplog) if " more on " in line]


def _flood_log() -> RateLimitedLog:
    return RateLimitedLog(
        logging.getLogger("tests.flood"), "%d more on %s since %s", burst=3, interval=INTERVAL
    )


async def test_a_flood_is_written_as_its_first_lines_then_one_count_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lines = _flood_log()
    with caplog.at_level(logging.WARNING, logger="tests.flood"):
        for n in range(10):
            lines.log("a", "line %d", n)
        lines.log("b", "other %d", 0)  # another key has a flood of its own
        assert _lines(caplog) == ["line 0", "line 1", "line 2", "other 0"]
        # Timers run in the order they are due: the summary's before this wake-up,
        # the next interval's after it.
        await asyncio.sleep(1.5 * INTERVAL)
        assert _summaries(caplog) == ["7 more on a"]
        for n in range(10, 12):  # the flood goes on: counted still
            lines.log("a", "line %d", n)
        await asyncio.sleep(INTERVAL)
        assert _summaries(caplog) == ["7 more on a", "2 more on a"]
        await asyncio.sleep(3 * INTERVAL)  # a quiet interval: the flood is over
        lines.log("a", "line %d", 12)
        assert _lines(caplog)[-1] == "line 12"
    lines.close()


async def test_closing_writes_what_is_counted_still(caplog: pytest.LogCaptureFixture) -> None:
    lines = _flood_log()
    lines.interval = 60.0  # no summary before the close
    with caplog.at_level(logging.WARNING, logger="tests.flood"):
        for n in range(5):
            lines.log("a", "line %d", n)
        assert _summaries(caplog) == []
        lines.close()
        assert _summaries(caplog) == ["2 more on a"]
        lines.close()  # nothing counted: nothing written
        assert _summaries(caplog) == ["2 more on a"]


def test_without_a_running_loop_every_line_is_written(caplog: pytest.LogCaptureFixture) -> None:
    lines = _flood_log()
    with caplog.at_level(logging.WARNING, logger="tests.flood"):
        for n in range(5):
            lines.log("a", "line %d", n)
    assert _lines(caplog) == [f"line {n}" for n in range(5)]
