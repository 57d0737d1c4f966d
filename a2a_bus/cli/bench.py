"""``a2a-bus bench``: run the benchmarks and show each beside its baseline."""

from __future__ import annotations

import importlib
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from a2a_bus.cli.app import app

#: Benchmark name -> module with ``run(quick: bool) -> Report``.
BENCHMARKS: dict[str, str] = {
    "adaptor": "a2a_bus.bench.adaptor",
    "gateway": "a2a_bus.bench.gateway",
    "kafka": "a2a_bus.bench.kafka",
    "llm": "a2a_bus.bench.llm",
    "memory": "a2a_bus.bench.memory",
}


@app.command()
def bench(
    names: Annotated[
        list[str] | None, typer.Argument(help=f"Benchmarks to run: {', '.join(BENCHMARKS)}.")
    ] = None,
    quick: Annotated[bool, typer.Option(help="Shorter runs, noisier figures.")] = False,
) -> None:
    """Run benchmarks; each figure is a ratio to a baseline measured in the same run."""
    chosen = names or list(BENCHMARKS)
    unknown = [name for name in chosen if name not in BENCHMARKS]
    if unknown:
        raise typer.BadParameter(f"unknown benchmark(s): {', '.join(unknown)}")
    console = Console()
    reports = []
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console
    ) as progress:
        task = progress.add_task("benchmarks", total=len(chosen))
        for name in chosen:
            progress.update(task, description=f"running {name}")
            module = importlib.import_module(BENCHMARKS[name])
            reports.append(module.run(quick=quick))
            progress.advance(task)
    for report in reports:
        report.print(console)
    raise typer.Exit(0 if all(report.all_met for report in reports) else 1)
