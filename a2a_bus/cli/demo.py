"""``a2a-bus demo``: a scripted multi-agent session with rich output."""

from __future__ import annotations

from typing import Annotated

import typer

from a2a_bus.cli.app import app
from a2a_bus.cli.common import build_bus, bus_failure, kafka_logs_held


@app.command()
def demo(
    kafka: Annotated[
        str | None,
        typer.Option(
            "--kafka",
            metavar="BOOTSTRAP",
            help="Run on Kafka (on a fresh topic prefix); the other A2A_KAFKA_* settings "
            "(SASL/SSL too) come from the environment.",
        ),
    ] = None,
) -> None:
    """Run agents on a bus: discovery, P2P, fan-out, streaming, request/response, an LLM agent."""
    from a2a_bus.demo import fresh_prefix, run

    # In memory unless --kafka: the demo runs anywhere, whatever the environment says.
    bus = build_bus(kafka, fresh_prefix()) if kafka else None
    with kafka_logs_held() as held:
        try:
            code = run(kafka, bus=bus)
        except Exception as exc:
            raise (bus_failure(exc, bus, held.last) if bus else exc) from None
    raise typer.Exit(code)
