"""``a2a-bus agents``: the agents discovery knows, with their methods."""

from __future__ import annotations

import asyncio
import math
from typing import Annotated, Any

import typer
from rich.table import Table

from a2a_bus.cli.app import app
from a2a_bus.cli.common import (
    DEFAULT_URL,
    KafkaOption,
    PrefixOption,
    TokenOption,
    UrlOption,
    console,
    plural,
    print_json,
    run_on_kafka,
    run_remote,
)


def _method_names(card: dict[str, Any]) -> str:
    names = []
    for entry in card.get("methods", ()):
        name = str(entry.get("name"))
        streaming = entry.get("streaming")
        names.append(f"{name} ({streaming} stream)" if streaming else name)
    return "\n".join(names)


def table(cards: list[dict[str, Any]]) -> Table:
    out = Table(title=plural(len(cards), "agent"))
    for column in ("id", "methods", "subscriptions", "replicas", "description"):
        out.add_column(column, overflow="fold")
    for card in cards:
        out.add_row(
            str(card.get("id")),
            _method_names(card),
            "\n".join(card.get("subscriptions", ())),
            str(card.get("replicas", "")),
            str(card.get("description", "")).split("\n", 1)[0],
        )
    return out


@app.command()
def agents(
    url: UrlOption = DEFAULT_URL,
    kafka: KafkaOption = None,
    token: TokenOption = None,
    prefix: PrefixOption = None,
    json: Annotated[bool, typer.Option("--json", help="Print the cards as JSON.")] = False,
    wait: Annotated[
        float, typer.Option(min=0.0, help="With --kafka: seconds to read the registry.")
    ] = 2.0,
) -> None:
    """List the agents on the bus and their methods."""
    if not math.isfinite(wait):
        raise typer.BadParameter("must be a finite number of seconds", param_hint="--wait")
    if kafka:

        async def on_bus(bus: Any) -> list[dict[str, Any]]:
            await asyncio.sleep(wait)  # the registry is read from its beginning meanwhile
            cards: list[dict[str, Any]] = bus.directory.cards()
            return cards

        cards = run_on_kafka(kafka, prefix, on_bus)
    else:
        cards = run_remote(url, token, lambda gateway: gateway.agents())
    if json:
        print_json(cards)
    else:
        console().print(table(cards))
