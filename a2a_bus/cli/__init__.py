"""The ``a2a-bus`` command line. Each sub-command lives in its own module and
attaches itself to :data:`~a2a_bus.cli.app.app` on import."""

from __future__ import annotations

import typer

from a2a_bus.cli import agents, bench, call, convert, demo, mcp, publish, read, serve, tail
from a2a_bus.cli.app import app
from a2a_bus.runtime.env import EnvError

#: The sub-command modules, imported for the commands they attach to ``app``.
COMMANDS = (agents, bench, call, convert, demo, mcp, publish, read, serve, tail)


def main() -> None:
    """Console-script entry point."""
    try:
        app(prog_name="a2a-bus")
    except EnvError as exc:  # e.g. A2A_EVENT_LOOP, read when a command makes its loop
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None


__all__ = ["COMMANDS", "app", "main"]
