"""``a2a-bus serve``: host agents on a bus and serve the HTTP gateway (and the Kafka ingress)."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import uvicorn
from rich.console import Console
from rich.markup import escape

from a2a_bus.cli.app import app
from a2a_bus.cli.common import (
    build_bus,
    bus_failure,
    console,
    fail,
    kafka_bootstrap,
    plural,
    started,
)
from a2a_bus.cli.targets import AGENT_FILE_SUFFIXES, llm_warnings, load_targets
from a2a_bus.cli.telemetry import TelemetryUnavailable, start_export
from a2a_bus.gateway import GatewaySettings, create_app, load_tokens
from a2a_bus.hosting.agent import Agent
from a2a_bus.runtime import loops
from a2a_bus.runtime.logs import json_handler

if TYPE_CHECKING:
    from a2a_bus.bus import Bus


def host_port(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) -> (host, port); port 0 picks a free port."""
    host, _, port = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or int(port) > 65535:
        raise typer.BadParameter(
            f"{value!r}: use HOST:PORT with a port from 1 to 65535 (0: any free port)",
            param_hint="--http",
        )
    return host, int(port)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``, bound here so that a port in use or an
    unknown host is one clean line, before any agent starts."""
    sock: socket.socket | None = None
    try:
        family, kind, _, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        sock.bind(address)
        sock.listen()
    except OSError as exc:
        if sock is not None:
            sock.close()
        raise fail(f"cannot serve HTTP on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


#: Seconds open HTTP connections get to finish after SIGINT/SIGTERM.
SHUTDOWN_GRACE = 5


class QuietServer(uvicorn.Server):
    """uvicorn without its own signal handling: ``serve`` stops it on SIGINT/SIGTERM and
    then shuts the bus down cleanly (uvicorn would re-raise the signal afterwards)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def transport_where(bus: Bus) -> str:
    bootstrap = kafka_bootstrap(bus)
    return f"Kafka at {bootstrap}" if bootstrap else "the in-memory transport"


async def spawn_agent(bus: Bus, agent_cls: type[Agent], replicas: int) -> None:
    """Start an agent's actors; one whose class cannot be made (its constructor
    raises) is a broken target, named with the error (exit 2)."""
    try:
        await bus.aspawn(agent_cls, replicas)
    except Exception as exc:
        failure = bus_failure(exc, bus)  # Kafka out of reach: exit 1
        if failure is exc:
            reason = f"{type(exc).__name__}: {exc}"
            failure = fail(f"cannot start agent {agent_cls.agent_id!r}: {reason}", 2)
        raise failure from None


async def _serve(
    classes: list[type[Agent]],
    bus: Bus,
    sock: socket.socket,
    replicas: int,
    settings: GatewaySettings,
    out: Console,
) -> None:
    from a2a_bus.gateway.ingress import Ingress

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with started(bus):
        for agent_cls in classes:
            await spawn_agent(bus, agent_cls, replicas)
        ingress = Ingress(bus.service) if kafka_bootstrap(bus) else None
        if ingress is not None:
            await ingress.start()
        config = uvicorn.Config(
            create_app(bus, settings),
            log_level="warning",
            lifespan="on",
            # Live views (SSE) never end by themselves: close what is still open
            # this long after a stop signal, so the server stops.
            timeout_graceful_shutdown=SHUTDOWN_GRACE,
        )
        server = QuietServer(config)
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not serving.done():
            await asyncio.sleep(0.02)
        if not server.started:
            raise fail("cannot serve HTTP: the gateway did not start (see the lines above)")
        host, port = sock.getsockname()[:2]
        names = ", ".join(cls.agent_id for cls in classes)
        each = plural(replicas, "replica")
        out.print(f"a2a-bus: serving {escape(names)} ({each} each) on {transport_where(bus)}")
        url_host = f"[{host}]" if ":" in host else host
        out.print(f"a2a-bus: HTTP gateway listening on http://{escape(url_host)}:{port}")
        if ingress is not None:
            out.print(f"a2a-bus: Kafka ingress on topic {ingress.topic}")
        sys.stdout.flush()
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        out.print("a2a-bus: shutting down")
        server.should_exit = True
        await serving
        stopping.cancel()
        if ingress is not None:
            await ingress.stop()
    out.print("a2a-bus: stopped")


class LogFormat(enum.StrEnum):
    TEXT = "text"
    JSON = "json"


def gateway_settings(tokens: Path | None) -> GatewaySettings:
    overrides: dict[str, Any] = {}
    if tokens is not None:
        try:
            overrides["tokens"] = load_tokens(tokens)
        except (OSError, ValueError) as exc:
            raise typer.BadParameter(str(exc), param_hint="--tokens") from None
    try:
        return GatewaySettings.from_env(**overrides)
    except (OSError, ValueError) as exc:  # an A2A_GATEWAY_* variable, named by the message
        raise fail(str(exc), 2) from None


@app.command()
def serve(
    targets: Annotated[
        list[str],
        typer.Argument(
            metavar="TARGET",
            help="module:Class, path/to/file.py:Class, or an agent file "
            f"({'/'.join(AGENT_FILE_SUFFIXES)}).",
        ),
    ],
    kafka: Annotated[
        str | None,
        typer.Option(
            "--kafka",
            metavar="BOOTSTRAP",
            help="Kafka bootstrap servers. Default: A2A_KAFKA_BOOTSTRAP_SERVERS or "
            "KAFKA_BOOTSTRAP_SERVERS (A2A_TRANSPORT=memory|kafka decides when set), "
            "else the in-memory transport.",
        ),
    ] = None,
    http: Annotated[
        str, typer.Option("--http", help="HOST:PORT of the gateway (port 0: any free port).")
    ] = "127.0.0.1:8080",
    replicas: Annotated[int, typer.Option("--replicas", min=1, help="Actors per agent.")] = 1,
    prefix: Annotated[
        str | None, typer.Option("--prefix", help="Topic prefix (default: A2A_PREFIX, else a2a).")
    ] = None,
    tokens: Annotated[
        Path | None,
        typer.Option("--tokens", help="YAML/JSON file: bearer token -> allow-lists."),
    ] = None,
    log_format: Annotated[
        LogFormat,
        typer.Option(
            "--log-format",
            help="text, or json: one JSON object per log line, with the trace_id, span_id, "
            "agent_id and method of the message being handled.",
        ),
    ] = LogFormat.TEXT,
) -> None:
    """Host agents and serve the HTTP gateway (plus the raw JSON-RPC ingress on Kafka).

    Traces go to an OTLP/HTTP collector when OTEL_EXPORTER_OTLP_ENDPOINT is set
    (OTEL_SERVICE_NAME names the process; needs the otel extra).
    """
    classes = load_targets(targets)
    host, port = host_port(http)
    settings = gateway_settings(tokens)
    if log_format is LogFormat.JSON:
        logging.getLogger().addHandler(json_handler())
    try:
        stop_export = start_export()  # before the bus: it takes the provider at start
    except TelemetryUnavailable as exc:
        raise fail(str(exc), 2) from None
    try:
        bus = build_bus(kafka, prefix)
        for warning in llm_warnings(targets):
            typer.echo(f"warning: {warning}", err=True)
        sock = bind(host, port)
        with sock:
            loops.run(_serve(classes, bus, sock, replicas, settings, console()))
    finally:
        if stop_export is not None:
            stop_export()  # the spans still batched are sent
