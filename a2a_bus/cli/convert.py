"""``a2a-bus convert``: JSON-RPC <-> CloudEvents on the command line, one result per line."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import orjson
import typer

from a2a_bus.cli.app import app
from a2a_bus.protocol import DEFAULT_TYPE_PREFIX, Adaptor, Failure, to_structured


class Target(StrEnum):
    cloudevents = "cloudevents"
    jsonrpc = "jsonrpc"


def _read(source: str) -> bytes:
    if source == "-":
        return sys.stdin.buffer.read()
    path = Path(source)
    if not path.is_file():
        raise typer.BadParameter(f"no such file: {source}", param_hint="FILE")
    return path.read_bytes()


@app.command()
def convert(
    source: Annotated[
        str, typer.Argument(metavar="[FILE|-]", help="Input file; - reads stdin.")
    ] = "-",
    to: Annotated[
        Target, typer.Option("--to", help="Convert to CloudEvents (default) or back to JSON-RPC.")
    ] = Target.cloudevents,
    prefix: Annotated[str, typer.Option(help="Event type prefix.")] = DEFAULT_TYPE_PREFIX,
    source_attr: Annotated[
        str, typer.Option("--source", help="The 'source' attribute of created events.")
    ] = "a2a-bus",
) -> None:
    """Convert JSON-RPC 2.0 (single or batch) or CloudEvents (structured or batch).

    Prints one line per element: a structured-mode CloudEvent, a JSON-RPC message
    with --to jsonrpc, or the element's JSON-RPC error response. Exits 1 when any
    element failed.
    """
    adaptor = Adaptor(prefix=prefix, source=source_attr)
    failed = False
    out = sys.stdout.buffer
    for item in adaptor.from_bytes(_read(source)):
        if isinstance(item, Failure):
            failed = True
            line = item.response()
        elif to is Target.jsonrpc:
            line = adaptor.to_jsonrpc(item)
        else:
            line = to_structured(item)
        out.write(orjson.dumps(line) + b"\n")
    out.flush()
    raise typer.Exit(1 if failed else 0)
