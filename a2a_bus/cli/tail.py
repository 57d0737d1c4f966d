"""``a2a-bus tail``: a live view of the events published on subjects."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer
from rich.markup import escape

from a2a_bus.cli.app import app
from a2a_bus.cli.common import (
    DEFAULT_URL,
    KafkaOption,
    PrefixOption,
    TokenOption,
    UrlOption,
    build_bus,
    bus_failure,
    console,
    fail,
    gateway_failure,
    gateway_url,
    started,
)
from a2a_bus.cli.http_client import GatewayClient
from a2a_bus.cli.signals import run_async
from a2a_bus.core.routing import RoutingError, validate_subject
from a2a_bus.core.watch import watch
from a2a_bus.protocol import to_structured
from a2a_bus.transport.base import Delivery
from a2a_bus.transport.dedup import DedupWindow

if TYPE_CHECKING:
    from a2a_bus.bus import Bus


#: Events remembered to show each one once: enough for the copies of one event, which
#: arrive close together, as each overlapping subject's view brings its own.
SHOWN_IDS = 10_000


class Printer:
    """One line per event: rich and readable, or one JSON object per line."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.console = console()

    def show(self, event: dict[str, Any]) -> None:
        if self.as_json:
            sys.stdout.write(orjson.dumps(event).decode() + "\n")
            sys.stdout.flush()
            return
        data = event.get("data", event.get("data_base64"))
        parts = [
            f"[dim]{escape(str(event['time']))}[/]" if event.get("time") else "",
            f"[bold cyan]{escape(str(event.get('subject', '')))}[/]",
            f"[magenta]{escape(str(event.get('type', '')))}[/]",
            f"[dim]id={escape(str(event.get('id', '')))} "
            f"source={escape(str(event.get('source', '')))}[/]",
        ]
        self.console.print(
            " ".join(part for part in parts if part) + f"\n  {escape(orjson.dumps(data).decode())}"
        )


async def _from_gateway(
    url: str, token: str | None, subjects: list[str]
) -> AsyncGenerator[Any, None]:
    queue: asyncio.Queue[Any] = asyncio.Queue()

    async def pump(gateway: GatewayClient, subject: str) -> None:
        try:
            async for event in gateway.tail(subject):
                await queue.put(event)
        except Exception as exc:  # ends the whole view with the reason
            await queue.put(exc)

    async with GatewayClient(url, token=token) as gateway:
        tasks = [asyncio.create_task(pump(gateway, subject)) for subject in subjects]
        try:
            while True:
                item = await queue.get()
                if isinstance(item, Exception):
                    raise item
                yield item
        finally:
            for task in tasks:
                task.cancel()


async def _from_kafka(bus: Bus, subjects: list[str]) -> AsyncGenerator[Any, None]:
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def on_event(delivery: Delivery) -> None:
        await queue.put(to_structured(delivery.event))

    async with started(bus):
        subscriptions = [await watch(bus.context, subject, on_event) for subject in subjects]
        try:
            while True:
                yield await queue.get()
        finally:
            for subscription in subscriptions:
                await subscription.stop()


@app.command()
def tail(
    topics: Annotated[list[str], typer.Argument(metavar="TOPIC", help="Subjects (* and #).")],
    url: UrlOption = DEFAULT_URL,
    kafka: KafkaOption = None,
    token: TokenOption = None,
    prefix: PrefixOption = None,
    json: Annotated[bool, typer.Option("--json", help="One JSON CloudEvent per line.")] = False,
) -> None:
    """Show events published on TOPIC... from now on, until Ctrl-C."""
    for topic in topics:
        try:
            validate_subject(topic, wildcards=True)
        except RoutingError as exc:
            raise typer.BadParameter(str(exc), param_hint="TOPIC") from None
    bus = build_bus(kafka, prefix) if kafka else None
    if bus is None:
        gateway_url(url)
    printer = Printer(json)
    if not json:
        where = f"Kafka at {kafka}" if kafka else url
        printer.console.print(f"[dim]tailing {', '.join(topics)} on {where} (Ctrl-C stops)[/]")

    subjects = list(dict.fromkeys(topics))  # one view per subject, however often named

    async def go() -> None:
        events = _from_kafka(bus, subjects) if bus else _from_gateway(url, token, subjects)
        # Subjects that overlap (orders.eu and orders.*) each bring the same event.
        shown = DedupWindow(SHOWN_IDS)
        # Closed here when printing fails (a closed pipe): left to the end of the loop,
        # the bus would stop after its Kafka connections were cancelled.
        async with contextlib.aclosing(events):
            async for event in events:
                key = (event.get("source"), event.get("id"))
                if key in shown:
                    continue
                shown.claim(key)
                printer.show(event)

    try:
        run_async(go())
    except KeyboardInterrupt:
        return
    except RoutingError as exc:  # a subject the bus cannot watch (its topic too long)
        raise fail(str(exc)) from None
    except Exception as exc:
        raise (bus_failure(exc, bus) if bus else gateway_failure(exc, url)) from None
