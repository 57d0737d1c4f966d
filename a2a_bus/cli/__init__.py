"""The ``a2a-bus`` command line. Each sub-command lives in its own module."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="a2a-bus",
    help="Actor-based multi-agent collaboration bus: JSON-RPC 2.0 and CloudEvents.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # plain help: flags without a "<bool>" value column
)


@app.callback()
def _root() -> None:
    """Actor-based multi-agent collaboration bus: JSON-RPC 2.0 and CloudEvents."""


def _register() -> None:
    # Sub-command modules attach themselves to ``app`` on import.
    from a2a_bus.cli import (  # noqa: F401
        agents,
        bench,
        call,
        convert,
        demo,
        mcp,
        publish,
        read,
        serve,
        tail,
    )


def main() -> None:
    """Console-script entry point."""
    from a2a_bus.runtime.env import EnvError

    _register()
    try:
        app(prog_name="a2a-bus")
    except EnvError as exc:  # e.g. A2A_EVENT_LOOP, read when a command makes its loop
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
