"""What a benchmark returns, and how it is shown."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

#: How a long benchmark says where it is: the step's name, steps done, steps in all.
Progress = Callable[[str, int, int], None]


def quiet(what: str, done: int, total: int) -> None:
    """The :data:`Progress` of a benchmark run with nobody watching."""


@dataclass
class Row:
    case: str
    value: float
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    #: Largest acceptable value/baseline ratio (or smallest, when ``higher_is_better``).
    target: float | None = None
    higher_is_better: bool = False
    #: Largest acceptable value itself, in ``unit`` (a target that is no ratio).
    limit: float | None = None

    @property
    def ratio(self) -> float | None:
        return None if not self.baseline else self.value / self.baseline

    @property
    def met(self) -> bool | None:
        if self.limit is not None:
            return self.value <= self.limit
        if self.target is None or self.ratio is None:
            return None
        return self.ratio >= self.target if self.higher_is_better else self.ratio <= self.target

    def target_text(self) -> str:
        """The target as the table shows it ("" when the row has none)."""
        if self.limit is not None:
            return f"<= {self.limit:g} {self.unit}"
        if self.target is None:
            return ""
        return f"{'>=' if self.higher_is_better else '<='} {self.target}x"


@dataclass(frozen=True)
class Point:
    """A figure at one scale (``x``: agents, subscribers...)."""

    x: float
    #: None: not measured at this scale (``note`` says why, e.g. did not finish).
    y: float | None
    note: str = ""


@dataclass(frozen=True)
class Target:
    """A target drawn on a curve: a line at ``y``, or with ``x`` a mark at one scale."""

    label: str
    y: float
    x: float | None = None
    #: Written beside a mark at one scale (the label is in the legend).
    short: str = ""


@dataclass
class Curve:
    """One figure measured at several scales: a series of points per transport (or per
    kind of count), drawn by ``a2a-bus bench --plot``."""

    #: File name of its plot, without extension.
    name: str
    title: str
    x_label: str  # with its unit
    y_label: str  # with its unit
    series: dict[str, list[Point]] = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)
    log_x: bool = True
    log_y: bool = False


@dataclass
class Report:
    title: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Scale series, for ``a2a-bus bench --plot``.
    curves: list[Curve] = field(default_factory=list)
    #: Printed after the rows (a benchmark's figures at each scale, say).
    tables: list[Table] = field(default_factory=list)

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        return row

    @property
    def all_met(self) -> bool:
        return all(row.met is not False for row in self.rows)

    def table(self) -> Table:
        table = Table(title=self.title)
        for column in ("case", "value", "baseline", "ratio", "target", "met"):
            table.add_column(column, justify="left" if column == "case" else "right")
        for row in self.rows:
            table.add_row(
                row.case,
                "n/a" if math.isnan(row.value) else f"{_number(row.value)} {row.unit}",
                f"{_number(row.baseline)} {row.unit} ({row.baseline_name})" if row.baseline else "",
                _ratio(row.ratio),
                row.target_text(),
                {True: "[green]yes[/]", False: "[red]no[/]", None: ""}[row.met],
            )
        return table

    def print(self, console: Console | None = None) -> None:
        console = console or Console()
        console.print(self.table())
        for table in self.tables:
            console.print(table)
        for note in self.notes:
            console.print(f"  {note}")


def _number(value: float) -> str:
    """Three significant digits; a whole count in full (1,000, not 1e+03)."""
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{value:,.0f}"
    return f"{value:,.3g}"


def _ratio(ratio: float | None) -> str:
    if ratio is None:
        return ""
    return "n/a" if math.isnan(ratio) else f"{ratio:.2f}x"


def per_call_us(fn: Callable[[], object], seconds: float = 0.3, repeats: int = 5) -> float:
    """Best-of-``repeats`` time of one call, in microseconds."""
    number = 1
    while True:  # calibrate so one repeat lasts about ``seconds``
        start = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds / 4:
            break
        number *= 4
    number = max(1, int(number * seconds / max(elapsed, 1e-9)))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best * 1e6
