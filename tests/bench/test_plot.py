"""``a2a-bus bench --plot``: scale curves drawn with matplotlib."""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib
import pytest

from a2a_bus.bench import plot
from a2a_bus.bench.report import Curve, Point, Target

matplotlib.use("Agg")

PNG = b"\x89PNG\r\n\x1a\n"


def _curve() -> Curve:
    return Curve(
        "spawn",
        "Spawn time",
        "agents in the process",
        "spawn time (s)",
        {
            "memory": [Point(10, 0.04), Point(100, 0.1), Point(1000, 2.0)],
            "kafka": [Point(10, 2.0), Point(100, 34.0), Point(1000, None, "did not finish")],
        },
        [
            Target("target: kafka, 1,000 agents in <= 15 s", 15.0, 1000, "kafka ≤ 15 s"),
            Target("target: flat", 1.0),
        ],
        log_y=True,
    )


def test_each_curve_is_a_png_named_after_it(tmp_path: Path) -> None:
    other = Curve("rss", "Memory", "agents", "MiB", {"memory": [Point(10, 1.0), Point(100, 9.0)]})
    written = plot.write([_curve(), other], tmp_path / "plots")
    assert written == [tmp_path / "plots" / "spawn.png", tmp_path / "plots" / "rss.png"]
    for path in written:
        assert path.read_bytes().startswith(PNG)


def test_a_curve_has_a_line_per_series_its_targets_and_labelled_axes() -> None:
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots()
    try:
        plot.draw(_curve(), axes)
        _, labels = axes.get_legend_handles_labels()
        assert labels == [
            "memory",
            "kafka",
            "target: kafka, 1,000 agents in <= 15 s",
            "target: flat",
        ]
        lines = {line.get_label(): line for line in axes.get_lines()}
        assert list(lines["kafka"].get_xdata()) == [10, 100]  # the unfinished scale is a mark
        assert (axes.get_xlabel(), axes.get_ylabel()) == ("agents in the process", "spawn time (s)")
        notes = [text.get_text() for text in axes.texts]
        assert "did not finish" in notes and "kafka ≤ 15 s" in notes
        assert [tick for tick in axes.get_xticks()] == [10, 100, 1000]
    finally:
        plt.close(figure)


def test_without_matplotlib_the_reason_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    assert plot.missing() is None
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    reason = plot.missing()
    assert reason is not None and "pip install 'a2a-bus[bench]'" in reason
