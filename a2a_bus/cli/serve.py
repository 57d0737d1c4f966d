"""``a2a-bus serve``: host agents on a bus, serve the HTTP gateway, or both (and the
Kafka ingress).

Three shapes: agents and a gateway in one process (in memory always, on Kafka with
``--http``); on Kafka a worker (agents, no HTTP: any number start on one host); on
Kafka a gateway to agents hosted elsewhere (``--http``, no TARGET).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from a2a_bus.cli.app import app
from a2a_bus.cli.common import (
    StatusConsole,
    build_bus,
    bus_failure,
    fail,
    kafka_bootstrap,
    plural,
    started,
)
from a2a_bus.cli.http_server import bind, host_port, start_http
from a2a_bus.cli.signals import Signals, run_async
from a2a_bus.cli.targets import AGENT_FILE_SUFFIXES, llm_warnings, load_targets
from a2a_bus.cli.telemetry import TelemetryUnavailable, start_export
from a2a_bus.gateway import GatewaySettings, create_app, load_tokens
from a2a_bus.gateway.a2a.stores import check_task_store
from a2a_bus.gateway.ingress import Ingress
from a2a_bus.hosting.agent import Agent
from a2a_bus.hosting.host import FAILED, AgentHost
from a2a_bus.runtime.logs import json_handler

if TYPE_CHECKING:
    from a2a_bus.bus import Bus


TASK_STORE_ENV = "A2A_GATEWAY_A2A_TASK_STORE"
#: Where the gateway listens in memory when ``--http`` does not say.
DEFAULT_HTTP = "127.0.0.1:8080"


def transport_where(bus: Bus) -> str:
    bootstrap = kafka_bootstrap(bus)
    return f"Kafka at {bootstrap}" if bootstrap else "the in-memory transport"


async def spawn_agent(bus: Bus, agent_cls: type[Agent], replicas: int) -> AgentHost:
    """Start an agent's actors; one whose class cannot be made (its constructor
    raises) is a broken target, named with the error (exit 2)."""
    try:
        return await bus.aspawn(agent_cls, replicas)
    except Exception as exc:
        failure = bus_failure(exc, bus)  # Kafka out of reach: exit 1
        if failure is exc:
            reason = f"{type(exc).__name__}: {exc}"
            failure = fail(f"cannot start agent {agent_cls.agent_id!r}: {reason}", 2)
        raise failure from None


def kafka_ingress(bus: Bus) -> Ingress | None:
    """The raw JSON-RPC ingress of a bus on Kafka (None in memory), made before
    anything starts: a bad ``A2A_INGRESS_REPLY_TOPICS`` is one line (exit 2)."""
    if kafka_bootstrap(bus) is None:
        return None
    try:
        return Ingress(bus.service)
    except ValueError as exc:  # the message names A2A_INGRESS_REPLY_TOPICS
        raise fail(str(exc), 2) from None


async def _serve(
    classes: list[type[Agent]],
    bus: Bus,
    sock: socket.socket | None,
    replicas: int,
    settings: GatewaySettings,
    out: StatusConsole,
    ingress: Ingress | None,
    signals: Signals,
) -> None:
    """Host ``classes`` on ``bus``, serve the gateway on ``sock`` (None: a worker) and
    the Kafka ingress, until SIGINT/SIGTERM (or, in a worker, until every agent failed).
    A signal during the start ends it at once (see :class:`Signals`)."""
    stop = signals.stop
    gave_up: str | None = None
    async with started(bus):
        hosts = [await spawn_agent(bus, agent_cls, replicas) for agent_cls in classes]
        if ingress is not None:
            await ingress.start()
        signals.serving()  # the HTTP server, once started, is stopped below
        server = (
            None if sock is None else await start_http(create_app(bus, settings), sock, "gateway")
        )
        _banner(out, bus, classes, replicas, sock, ingress, settings.a2a_root)
        if out.closed:  # nobody reads what it serves (| head -1): stop, as on a signal
            stop.set()
        stopping = asyncio.create_task(stop.wait())
        waiting: set[asyncio.Future[Any]] = {stopping}
        if server is not None:
            waiting.add(server.task)
        while not stop.is_set() and not (server is not None and server.task.done()):
            await asyncio.wait(waiting, timeout=WATCH_INTERVAL)
            if server is None and (gave_up := all_failed(hosts)) is not None:
                break  # a worker without agents serves nothing: let its supervisor restart it
        out.print("a2a-bus: shutting down")
        if server is not None:
            server.server.should_exit = True
            await server.task
        stopping.cancel()
        if ingress is not None:
            await ingress.stop()
    out.print("a2a-bus: stopped")
    if gave_up is not None:
        raise fail(f"every agent of this worker failed: {gave_up}")
    if out.closed:
        raise typer.Exit(1)  # as any command whose output was closed


#: Seconds between a worker's looks at whether its agents all failed.
WATCH_INTERVAL = 0.5


def all_failed(hosts: Sequence[AgentHost]) -> str | None:
    """Why every agent in ``hosts`` failed (each one's reason), or None if one runs."""
    failures = [f"{host.agent_id}: {host.failure}" for host in hosts if host.status == FAILED]
    if not hosts or len(failures) < len(hosts):
        return None
    return "; ".join(failures)


def _banner(
    out: Console,
    bus: Bus,
    classes: list[type[Agent]],
    replicas: int,
    sock: socket.socket | None,
    ingress: Ingress | None,
    a2a_root: str | None = None,
) -> None:
    """What this process serves, and where."""
    where = transport_where(bus)
    if classes:
        names = ", ".join(cls.agent_id for cls in classes)
        each = plural(replicas, "replica")
        out.print(f"a2a-bus: serving {escape(names)} ({each} each) on {where}")
    else:
        out.print(f"a2a-bus: gateway to the agents on {where} (none hosted here)")
    if sock is None:
        out.print("a2a-bus: worker: no HTTP gateway here (--http HOST:PORT serves one)")
    else:
        host, port = sock.getsockname()[:2]
        url_host = f"[{host}]" if ":" in host else host
        out.print(f"a2a-bus: HTTP gateway listening on http://{escape(url_host)}:{port}")
        if a2a_root is not None:
            out.print(
                f"a2a-bus: A2A agent {escape(a2a_root)} at the root: http://{escape(url_host)}:{port}/"
            )
    if ingress is not None:
        out.print(f"a2a-bus: Kafka ingress on topic {ingress.topic}")
    sys.stdout.flush()


def http_address(
    http: tuple[str, int] | None, classes: Sequence[type[Agent]], on_kafka: bool
) -> tuple[str, int] | None:
    """Where this process serves HTTP (None: nowhere, a worker), from ``--http`` and
    the transport; a process that would serve nothing is bad usage (exit 2).

    In memory the gateway is the only way in: it is served, on ``DEFAULT_HTTP``
    unless ``--http`` says where, and agents are needed. On Kafka HTTP is served
    only with ``--http`` (any number of workers start on one host), and a
    process with no agents is a gateway to those hosted elsewhere.
    """
    if not on_kafka:
        if not classes:
            raise fail(
                "nothing to serve: on the in-memory transport a gateway reaches only the "
                "agents of its own process; name agents to host (TARGET), or use --kafka "
                "BOOTSTRAP to reach agents hosted elsewhere",
                2,
            )
        return http or host_port(DEFAULT_HTTP)
    if http is None and not classes:
        raise fail(
            "nothing to serve: name agents to host (TARGET), or give --http HOST:PORT to "
            "run a gateway to the agents on Kafka",
            2,
        )
    return http


def root_hosted(agent_id: str | None, classes: Sequence[type[Agent]], on_kafka: bool) -> None:
    """In memory the root agent must be one hosted here (exit 2 otherwise): nothing
    else could ever answer there. On Kafka it may be hosted elsewhere."""
    hosted = [cls.agent_id for cls in classes]
    if agent_id is not None and not on_kafka and agent_id not in hosted:
        raise fail(
            f"--a2a-root {agent_id}: no such agent among those hosted here "
            f"({', '.join(hosted)}); on the in-memory transport the root agent is one of them",
            2,
        )


class LogFormat(enum.StrEnum):
    TEXT = "text"
    JSON = "json"


def gateway_settings(tokens: Path | None, a2a_root: str | None = None) -> GatewaySettings:
    overrides: dict[str, Any] = {}
    if a2a_root is not None:
        overrides["a2a_root"] = a2a_root
    if tokens is not None:
        try:
            overrides["tokens"] = load_tokens(tokens)
        except (OSError, ValueError) as exc:
            raise typer.BadParameter(str(exc), param_hint="--tokens") from None
    try:
        return GatewaySettings.from_env(**overrides)
    except (OSError, ValueError) as exc:  # an A2A_GATEWAY_* variable, named by the message
        raise fail(str(exc), 2) from None


def task_store_usable(settings: GatewaySettings) -> None:
    """Open the gateway's SQLite task store, if it has one: one that cannot be used
    fails here in one line (exit 2), not inside uvicorn's start-up with a traceback."""
    try:
        check_task_store(settings.a2a_task_store)
    except ValueError as exc:
        raise fail(f"{TASK_STORE_ENV}={settings.a2a_task_store!r}: {exc}", 2) from None


@app.command()
def serve(
    targets: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="TARGET",
            help="Agents to host: module:Class, path/to/file.py:Class, or an agent file "
            f"({'/'.join(AGENT_FILE_SUFFIXES)}). None on Kafka: a gateway to the agents "
            "hosted elsewhere.",
            show_default=False,
        ),
    ] = None,
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
        str | None,
        typer.Option(
            "--http",
            metavar="HOST:PORT",
            help=f"Serve the HTTP gateway there (port 0: any free port). In memory the "
            f"default is {DEFAULT_HTTP}; on Kafka only with --http: without it the process "
            "is a worker (agents only, no HTTP).",
            show_default=False,
        ),
    ] = None,
    replicas: Annotated[int, typer.Option("--replicas", min=1, help="Actors per agent.")] = 1,
    prefix: Annotated[
        str | None, typer.Option("--prefix", help="Topic prefix (default: A2A_PREFIX, else a2a).")
    ] = None,
    tokens: Annotated[
        Path | None,
        typer.Option("--tokens", help="YAML/JSON file: bearer token -> allow-lists."),
    ] = None,
    a2a_root: Annotated[
        str | None,
        typer.Option(
            "--a2a-root",
            metavar="AGENT",
            help="Serve this agent at the root as an A2A agent: its card at "
            "/.well-known/agent-card.json, its JSON-RPC endpoint POST / (for clients that "
            "know only a host). Default: A2A_GATEWAY_A2A_ROOT, else the gateway's card.",
            show_default=False,
        ),
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
    """Host agents, serve the HTTP gateway, or both (plus the raw JSON-RPC ingress on Kafka).

    Traces go to an OTLP/HTTP collector when OTEL_EXPORTER_OTLP_ENDPOINT is set
    (OTEL_SERVICE_NAME names the process; needs the otel extra).
    """
    classes = load_targets(targets or [])
    address = host_port(http) if http is not None else None
    bus = build_bus(kafka, prefix)
    address = http_address(address, classes, kafka_bootstrap(bus) is not None)
    for given, hint in ((tokens, "--tokens"), (a2a_root, "--a2a-root")):
        if address is None and given is not None:
            raise typer.BadParameter(
                f"{hint} applies to the HTTP gateway: give --http HOST:PORT too", param_hint=hint
            )
    # A worker serves no HTTP: the gateway's settings are not its concern.
    settings = gateway_settings(tokens, a2a_root) if address is not None else GatewaySettings()
    if address is not None:
        task_store_usable(settings)
    root_hosted(settings.a2a_root, classes, kafka_bootstrap(bus) is not None)
    ingress = kafka_ingress(bus)
    if log_format is LogFormat.JSON:
        logging.getLogger().addHandler(json_handler())
    try:
        stop_export = start_export()  # before the bus starts: it takes the provider then
    except TelemetryUnavailable as exc:
        raise fail(str(exc), 2) from None
    try:
        for warning in llm_warnings(targets or []):
            typer.echo(f"warning: {warning}", err=True)
        sock = bind(*address) if address is not None else None
        with sock if sock is not None else contextlib.nullcontext():
            signals = Signals(signal.SIGINT, signal.SIGTERM)
            out = StatusConsole()
            run_async(
                _serve(classes, bus, sock, replicas, settings, out, ingress, signals), signals
            )
    finally:
        if stop_export is not None:
            stop_export()  # the spans still batched are sent
