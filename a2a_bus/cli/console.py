"""The ``a2a-bus`` command with every sub-command attached. Each sub-command lives
in its own module and attaches itself to :data:`~a2a_bus.cli.app.app` on import."""

from __future__ import annotations

import sys

import typer

from a2a_bus.cli import agents, bench, call, convert, demo, mcp, publish, read, serve, tail
from a2a_bus.cli.app import app
from a2a_bus.runtime.env import EnvError

#: The sub-command modules, imported for the commands they attach to ``app``.
COMMANDS = (agents, bench, call, convert, demo, mcp, publish, read, serve, tail)


def undecodable(args: list[str]) -> str | None:
    """The first of ``args`` that is not UTF-8 text, its bad bytes written ``\\xff``
    (Python keeps them as lone surrogates, which no encoder or JSON parser takes)."""
    for arg in args:
        raw = arg.encode("utf-8", "surrogateescape")
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw.decode("utf-8", "backslashreplace")
    return None


def run() -> None:
    """Run the command line given in ``sys.argv``."""
    bad = undecodable(sys.argv[1:])
    if bad is not None:
        typer.echo(f"error: argument '{bad}' is not UTF-8 text", err=True)
        raise SystemExit(2)
    try:
        app(prog_name="a2a-bus")
    except EnvError as exc:  # e.g. A2A_EVENT_LOOP, read when a command makes its loop
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None


__all__ = ["COMMANDS", "app", "run"]
