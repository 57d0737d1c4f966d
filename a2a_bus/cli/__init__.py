"""The ``a2a-bus`` command line. Each sub-command lives in its own module."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="a2a-bus",
    help="Actor-based multi-agent collaboration bus: JSON-RPC 2.0 and CloudEvents.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """Actor-based multi-agent collaboration bus: JSON-RPC 2.0 and CloudEvents."""


def _register() -> None:
    # Sub-command modules attach themselves to ``app`` on import.
    from a2a_bus.cli import agents, bench, call, convert, demo, publish, read, serve, tail  # noqa: F401


def main() -> None:
    """Console-script entry point."""
    _register()
    app()
