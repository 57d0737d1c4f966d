"""``a2a-bus read``: a page of the events a pub/sub subject retains."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer

from a2a_bus.cli.app import app
from a2a_bus.cli.common import (
    DEFAULT_URL,
    KafkaOption,
    PrefixOption,
    TokenOption,
    UrlOption,
    fail,
    plural,
    run_on_kafka,
    run_remote,
)
from a2a_bus.cli.tail import Printer
from a2a_bus.core.routing import RoutingError, is_wildcard, validate_subject
from a2a_bus.protocol import to_structured

if TYPE_CHECKING:
    from a2a_bus.bus import Bus


@app.command()
def read(
    topic: Annotated[
        str, typer.Argument(metavar="TOPIC", help="Subject, e.g. orders.eu (no wildcards).")
    ],
    limit: Annotated[int, typer.Option("--limit", help="At most this many events (1-1000).")] = 100,
    cursor: Annotated[
        str | None, typer.Option("--cursor", help="Go on after the page that printed it.")
    ] = None,
    newest: Annotated[
        bool, typer.Option("--newest", help="The last LIMIT events instead of the oldest.")
    ] = False,
    url: UrlOption = DEFAULT_URL,
    kafka: KafkaOption = None,
    token: TokenOption = None,
    prefix: PrefixOption = None,
    json: Annotated[
        bool, typer.Option("--json", help='One JSON object: {"events", "cursor", "undecodable"}.')
    ] = False,
) -> None:
    """Show events retained on TOPIC, oldest first, and the cursor of the next page."""
    try:
        # What is no subject at all ('', 'a/b') never reaches a gateway's route to be
        # named there; wildcards are refused where the events are read, with the reason.
        if not is_wildcard(topic):
            validate_subject(topic)
    except RoutingError as exc:
        raise fail(str(exc)) from None
    if kafka:

        async def on_bus(bus: Bus) -> dict[str, Any]:
            page = await bus.async_client().read(topic, limit=limit, cursor=cursor, newest=newest)
            events = [to_structured(event) for event in page.events]
            return {"events": events, "cursor": page.cursor, "undecodable": page.undecodable}

        try:
            page = run_on_kafka(kafka, prefix, on_bus)
        except ValueError as exc:  # limit, cursor, subject
            raise fail(str(exc)) from None
    else:
        page = run_remote(
            url, token, lambda gw: gw.history(topic, limit=limit, cursor=cursor, newest=newest)
        )
    if json:
        sys.stdout.write(orjson.dumps(page).decode() + "\n")
        return
    printer = Printer(False)
    for event in page["events"]:
        printer.show(event)
    skipped = f", {page['undecodable']} undecodable skipped" if page["undecodable"] else ""
    count = plural(len(page["events"]), "event")
    printer.console.print(f"[dim]{count}{skipped}; next page: --cursor {page['cursor']}[/]")
