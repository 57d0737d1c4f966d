"""``a2a-bus bench``: run the benchmarks and show each beside its baseline."""

from __future__ import annotations

import importlib
import inspect
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from a2a_bus.bench import plot as plots
from a2a_bus.cli.app import app
from a2a_bus.cli.common import check_bootstrap, kafka_failure

#: Where the Kafka benchmarks find a broker without --kafka.
BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"

#: Benchmark name -> module with ``run(quick: bool, ...) -> Report``; a ``run`` that
#: takes ``bootstrap`` gets ``--kafka``, one that takes ``progress`` reports its steps.
BENCHMARKS: dict[str, str] = {
    "adaptor": "a2a_bus.bench.adaptor",
    "gateway": "a2a_bus.bench.gateway",
    "kafka": "a2a_bus.bench.kafka",
    "llm": "a2a_bus.bench.llm",
    "memory": "a2a_bus.bench.memory",
    "tracing": "a2a_bus.bench.tracing",
    "agents": "a2a_bus.bench.agents",
    "payload": "a2a_bus.bench.payload",
    "fanout": "a2a_bus.bench.fanout",
    "bytecodes": "a2a_bus.bench.bytecodes",
    "streams": "a2a_bus.bench.streams",
}


@app.command()
def bench(
    names: Annotated[
        list[str] | None,
        typer.Argument(metavar="NAME", help=f"Benchmarks to run: {', '.join(BENCHMARKS)}."),
    ] = None,
    quick: Annotated[bool, typer.Option(help="Shorter runs, noisier figures.")] = False,
    kafka: Annotated[
        str | None,
        typer.Option(
            "--kafka",
            metavar="BOOTSTRAP",
            help="Kafka bootstrap servers for the Kafka benchmarks "
            "(default: KAFKA_BOOTSTRAP_SERVERS; without one they say so and measure nothing).",
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            metavar="DIR",
            file_okay=False,
            help="Also draw each scale curve (figure by number of agents, subscribers...) "
            "as a PNG in DIR; needs matplotlib (pip install 'a2a-bus[bench]').",
        ),
    ] = None,
) -> None:
    """Run benchmarks; each figure is a ratio to a baseline measured in the same run."""
    chosen = names or list(BENCHMARKS)
    unknown = [name for name in chosen if name not in BENCHMARKS]
    if unknown:
        raise typer.BadParameter(f"unknown benchmark(s): {', '.join(unknown)}")
    if plot is not None and (why := plots.missing()) is not None:
        raise typer.BadParameter(why, param_hint="--plot")  # before a long run, not after
    if kafka:
        check_bootstrap(kafka, "--kafka")
    elif os.environ.get(BOOTSTRAP_ENV):
        check_bootstrap(os.environ[BOOTSTRAP_ENV], BOOTSTRAP_ENV)
    console = Console()
    reports = []
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("benchmarks", total=len(chosen))
        step = progress.add_task("", visible=False)

        def show_step(what: str, done: int, total: int) -> None:
            progress.update(step, description=f"  {what}", completed=done, total=total)
            progress.update(step, visible=True)

        for name in chosen:
            progress.update(task, description=f"running {name}")
            module = importlib.import_module(BENCHMARKS[name])
            options = _options(module.run, bootstrap=kafka, progress=show_step)
            try:
                reports.append(module.run(quick=quick, **options))
            except Exception as exc:  # a broker out of reach: one line, exit 1
                bootstrap = kafka or os.environ.get(BOOTSTRAP_ENV)
                raise kafka_failure(exc, bootstrap) from None
            progress.update(step, visible=False)
            progress.advance(task)
    for report in reports:
        report.print(console)
    if plot is not None:
        curves = [curve for report in reports for curve in report.curves]
        for path in plots.write(curves, plot):
            console.print(f"wrote {path}")
        if not curves:
            console.print("no scale curves to plot in the benchmarks run")
    raise typer.Exit(0 if all(report.all_met for report in reports) else 1)


def _options(run: Any, **available: Any) -> dict[str, Any]:
    """The options among ``available`` that the benchmark's ``run`` takes."""
    accepted = inspect.signature(run).parameters
    return {name: value for name, value in available.items() if name in accepted}
