"""``a2a-bus bench --plot DIR``: each scale curve of the reports as a PNG.

matplotlib comes with the ``bench`` extra (``pip install 'a2a-bus[bench]'``);
without it :func:`missing` says so before anything runs.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from a2a_bus.bench.report import Curve

TARGET_COLOUR = "tab:red"
#: (marker, line style) of the first, second... series of a plot.
STYLES = (("o", "-"), ("s", "--"), ("^", ":"))


def missing() -> str | None:
    """Why plots cannot be drawn here, or None when they can."""
    if importlib.util.find_spec("matplotlib") is None:
        return "--plot needs matplotlib, which is not installed: pip install 'a2a-bus[bench]'"
    return None


def write(curves: Iterable[Curve], directory: Path) -> list[Path]:
    """Draw each of ``curves`` into ``directory`` (made if missing); the files written."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for curve in curves:
        figure, axes = plt.subplots(figsize=(7.5, 4.8), dpi=120)
        try:
            draw(curve, axes)
            figure.tight_layout()
            path = directory / f"{curve.name}.png"
            figure.savefig(path)
            written.append(path)
        finally:
            plt.close(figure)
    return written


def draw(curve: Curve, axes: Any) -> None:
    """``curve`` on matplotlib ``axes``: a line per series, its unfinished scales
    marked along the top, its targets in red."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    scales: set[float] = set()
    unfinished = False
    for index, (name, points) in enumerate(curve.series.items()):
        scales.update(point.x for point in points)
        done = [point for point in points if point.y is not None]
        marker, style = STYLES[index % len(STYLES)]  # series that coincide stay visible
        (line,) = axes.plot(
            [point.x for point in done],
            [point.y for point in done],
            marker=marker,
            linestyle=style,
            label=name,
        )
        for point in points:
            if point.y is None:
                unfinished = True
                _mark_unfinished(axes, point.x, point.note, line.get_color())
    for target in curve.targets:
        if target.x is None:
            axes.axhline(target.y, color=TARGET_COLOUR, linestyle="--", label=target.label)
            continue
        # A ceiling at one scale: a bar at the most allowed, its value above it.
        scales.add(target.x)
        axes.plot(
            [target.x],
            [target.y],
            marker="_",
            markersize=26,
            markeredgewidth=3,
            linestyle="none",
            color=TARGET_COLOUR,
            label=target.label,
        )
        if target.short:
            axes.annotate(
                target.short,
                (target.x, target.y),
                xytext=(0, 7),
                textcoords="offset points",
                ha="center",
                fontsize=8,
                color=TARGET_COLOUR,
            )
    if curve.log_x:
        axes.set_xscale("log")
    if curve.log_y:
        axes.set_yscale("log")
    else:
        axes.set_ylim(bottom=0)
    if unfinished:  # room along the top for the marks, clear of the lines
        bottom, top = axes.get_ylim()
        axes.set_ylim(bottom, top * 6 if curve.log_y else top * 1.3)
    axes.set_xticks(sorted(scales))
    axes.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
    axes.xaxis.set_minor_formatter(NullFormatter())
    axes.set_title(curve.title)
    axes.set_xlabel(curve.x_label)
    axes.set_ylabel(curve.y_label)
    axes.grid(True, which="major", alpha=0.3)
    axes.legend(fontsize=8)


def _mark_unfinished(axes: Any, x: float, note: str, colour: str) -> None:
    """An X at scale ``x`` along the top edge (x in data, y in axes coordinates)."""
    top = axes.get_xaxis_transform()
    axes.plot([x], [0.95], marker="X", markersize=10, color=colour, transform=top)
    axes.annotate(
        note,
        (x, 0.95),
        xycoords=top,
        xytext=(0, -10),
        textcoords="offset points",
        ha="center",
        va="top",
        fontsize=8,
        color=colour,
    )
