"""``a2a-bus publish``: put one event on a pub/sub subject."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from a2a_bus.cli.app import app
from a2a_bus.cli.common import (
    DEFAULT_URL,
    KafkaOption,
    PrefixOption,
    TokenOption,
    UrlOption,
    fail,
    parse_json,
    run_on_kafka,
    run_remote,
)
from a2a_bus.core.routing import RoutingError, validate_subject
from a2a_bus.protocol import DEFAULT_TYPE_PREFIX, JsonRpcError, control_character

if TYPE_CHECKING:
    from a2a_bus.bus import Bus


@app.command()
def publish(
    topic: Annotated[str, typer.Argument(metavar="TOPIC", help="Subject, e.g. orders.eu.")],
    data: Annotated[str, typer.Argument(metavar="DATA_JSON", help="The event data (JSON).")],
    type: Annotated[
        str | None,
        typer.Option("--type", help=f"Event type (default: {DEFAULT_TYPE_PREFIX}.TOPIC)."),
    ] = None,
    url: UrlOption = DEFAULT_URL,
    kafka: KafkaOption = None,
    token: TokenOption = None,
    prefix: PrefixOption = None,
) -> None:
    """Publish DATA_JSON on TOPIC (every subscriber gets it); prints the event id."""
    try:
        validate_subject(topic)
    except RoutingError as exc:
        raise typer.BadParameter(str(exc), param_hint="TOPIC") from None
    value = parse_json(data, "DATA_JSON")
    if type is not None and not type.strip():
        raise typer.BadParameter("an event type cannot be empty", param_hint="--type")
    event_type = type or f"{DEFAULT_TYPE_PREFIX}.{topic}"
    problem = control_character({"type": event_type})
    if problem is not None:
        raise typer.BadParameter(problem, param_hint="--type")
    if kafka:

        async def on_bus(bus: Bus) -> str:
            try:
                event_id: str = await bus.async_client().publish(topic, value, type=event_type)
            except JsonRpcError as exc:  # refused before sending (a subject too long...)
                raise fail(f"not published: {exc}") from None
            return event_id

        event_id = run_on_kafka(kafka, prefix, on_bus)
    else:
        event_id = run_remote(url, token, lambda gw: gw.publish(topic, value, event_type))
    typer.echo(event_id)
