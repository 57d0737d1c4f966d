"""``a2a-bus demo``: a scripted multi-agent session with rich output."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from a2a_bus.cli.app import app
from a2a_bus.cli.common import build_bus, bus_failure, fail, kafka_logs_held

if TYPE_CHECKING:
    from a2a_bus.bus import Bus


def memory_bus() -> Bus:
    """The demo's in-memory bus; a setting it cannot use (``A2A_PIN_CPU``,
    ``A2A_GC_THRESHOLD``...) ends the command (exit 2) with its name, as in ``serve``."""
    from a2a_bus.demo import demo_bus

    try:
        return demo_bus()
    except ValueError as exc:  # EnvError too: the message names the variable
        raise fail(str(exc), 2) from None


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
    bus = build_bus(kafka, fresh_prefix()) if kafka else memory_bus()
    with kafka_logs_held() as held:
        try:
            code = run(kafka, bus=bus)
        except Exception as exc:
            raise bus_failure(exc, bus, held.last) from None
    raise typer.Exit(code)
