"""``a2a-bus convert``: JSON-RPC <-> CloudEvents on the command line, one result per line.

What the bus would refuse to route is refused here too, with the bus's own checks
(:func:`~a2a_bus.core.routing.decide` on a bus with the default topic prefix): an
invalid agent id or subject, or one whose topic name would be too long.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from cloudevents.core.v1.event import CloudEvent

from a2a_bus.cli.app import app
from a2a_bus.core.routing import RoutingError, Topics, decide
from a2a_bus.protocol import (
    DEFAULT_TYPE_PREFIX,
    Adaptor,
    Failure,
    Kind,
    error_response,
    event_kind,
    ext,
    jsonrpc_of,
    to_structured,
)

_TOPICS = Topics()


class Target(StrEnum):
    cloudevents = "cloudevents"
    jsonrpc = "jsonrpc"


def _read(source: str) -> bytes:
    """The bytes of ``source``: stdin for ``-``, else any file that can be read (a
    pipe such as ``<(...)`` or ``/dev/stdin`` too)."""
    if source == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(source).read_bytes()
    except FileNotFoundError:
        raise typer.BadParameter(f"no such file: {source}", param_hint="FILE") from None
    except OSError as exc:  # a directory, no permission...
        reason = exc.strerror or str(exc)
        raise typer.BadParameter(f"cannot read {source}: {reason}", param_hint="FILE") from None


def _refusal(event: CloudEvent) -> dict[str, Any] | None:
    """The error the bus would answer for the agent id or subject ``event`` names,
    else None. Where a method or an answer goes only a running bus knows (the
    method's owner, the caller's reply topic): those are not checked."""
    attributes = event.get_attributes()
    names = ext.TARGET_AGENT in attributes or "subject" in attributes
    if not names or event_kind(event) is Kind.RESPONSE:
        return None
    try:
        decide(event, _TOPICS)
    except RoutingError as exc:
        error = exc.json_rpc_error()
        message = jsonrpc_of(event.get_data())
        id = message.get("id") if message is not None else event.get_id()
        return error_response(error.code, error.message, id, error.data)
    return None


def _line(item: CloudEvent | Failure, adaptor: Adaptor, to: Target) -> tuple[Any, bool]:
    """What to print for one element, and whether it failed."""
    if isinstance(item, Failure):
        return item.response(), True
    refused = _refusal(item)
    if refused is not None:
        return refused, True
    return (adaptor.to_jsonrpc(item) if to is Target.jsonrpc else to_structured(item)), False


@app.command()
def convert(
    source: Annotated[
        str, typer.Argument(metavar="FILE|-", help="Input file; - reads stdin.")
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
    with --to jsonrpc, or the element's JSON-RPC error response (also for an agent
    id or subject the bus would refuse). Exits 1 when any element failed.
    """
    adaptor = Adaptor(prefix=prefix, source=source_attr)
    failed = False
    out = sys.stdout.buffer
    for item in adaptor.from_bytes(_read(source)):
        line, refused = _line(item, adaptor, to)
        failed = failed or refused
        out.write(orjson.dumps(line) + b"\n")
    out.flush()
    raise typer.Exit(1 if failed else 0)
