"""``a2a-bus demo``: a scripted multi-agent session with rich output."""

from __future__ import annotations

from typing import Annotated

import typer

from a2a_bus.cli import app
from a2a_bus.cli.common import kafka_failure, kafka_logs_held


@app.command()
def demo(
    kafka: Annotated[
        str | None, typer.Option("--kafka", metavar="BOOTSTRAP", help="Run on Kafka.")
    ] = None,
) -> None:
    """Run agents on a bus: discovery, P2P, fan-out, streaming, request/response, an LLM agent."""
    from a2a_bus.demo import run

    with kafka_logs_held() as held:
        try:
            code = run(kafka)
        except Exception as exc:
            raise kafka_failure(exc, kafka, held.last) from None
    raise typer.Exit(code)
