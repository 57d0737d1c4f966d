"""The typer application every sub-command attaches itself to."""

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
