"""What a benchmark returns, and how it is shown."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table


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


@dataclass
class Report:
    title: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

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
                f"{row.value:,.3g} {row.unit}",
                f"{row.baseline:,.3g} {row.unit} ({row.baseline_name})" if row.baseline else "",
                f"{row.ratio:.2f}x" if row.ratio is not None else "",
                row.target_text(),
                {True: "[green]yes[/]", False: "[red]no[/]", None: ""}[row.met],
            )
        return table

    def print(self, console: Console | None = None) -> None:
        console = console or Console()
        console.print(self.table())
        for note in self.notes:
            console.print(f"  {note}")


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
