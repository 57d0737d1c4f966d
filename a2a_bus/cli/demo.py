"""``a2a-bus demo``: a scripted multi-agent session with rich output."""

from __future__ import annotations

from typing import Annotated

import typer

from a2a_bus.cli import app


@app.command()
def demo(
    kafka: Annotated[
        str | None, typer.Option("--kafka", metavar="BOOTSTRAP", help="Run on Kafka.")
    ] = None,
) -> None:
    """Run agents on a bus: discovery, P2P, fan-out, streaming, request/response, an LLM agent."""
    from a2a_bus.demo import run

    raise typer.Exit(run(kafka))
