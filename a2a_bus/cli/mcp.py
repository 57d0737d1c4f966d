"""``a2a-bus mcp``: the methods of the bus's agents as MCP tools, over stdio (for an
MCP host that starts the command) or streamable HTTP (``--http``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from a2a_bus.cli.app import app
from a2a_bus.cli.common import build_bus, fail, kafka_bootstrap, started
from a2a_bus.cli.http_server import SHUTDOWN_GRACE, bind, host_port, start_http
from a2a_bus.cli.serve import gateway_settings, spawn_agent, transport_where
from a2a_bus.cli.signals import Signals, run_async
from a2a_bus.cli.targets import AGENT_FILE_SUFFIXES, llm_warnings, load_targets
from a2a_bus.gateway.auth import Authenticator
from a2a_bus.hosting.agent import Agent
from a2a_bus.runtime.loops import stop_task

if TYPE_CHECKING:
    from a2a_bus.bus import Bus
    from a2a_bus.mcp import BusMcpServer

#: Seconds a stdio session gets to end after SIGINT/SIGTERM.
STDIO_GRACE = 1.0


def _fill_closed_stdin() -> None:
    """Put /dev/null on a closed stdin: else the next file opened lands on fd 0, taken
    for stdin (uvloop aborts the process closing such a one)."""
    try:
        os.fstat(0)
    except OSError:
        os.open(os.devnull, os.O_RDONLY)  # the lowest free descriptor: 0


def _status() -> Console:
    # stdout carries the MCP session over stdio: every word for people goes to stderr.
    return Console(stderr=True, highlight=False, soft_wrap=True)


async def _until(
    task: asyncio.Task[None], stop: asyncio.Event, timeout: float | None = None
) -> None:
    """Wait until ``task`` ends or ``stop`` is set (or ``timeout`` seconds passed)."""
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({task, stopping}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()


async def _serve_stdio(server: BusMcpServer, stop: asyncio.Event) -> None:
    session = asyncio.create_task(server.run_stdio())
    await _until(session, stop)
    if not session.done():
        session.cancel()
        # A read of stdin blocked in a thread cannot be interrupted: do not wait for it.
        await asyncio.wait({session}, timeout=STDIO_GRACE)
    elif session.exception() is not None:
        raise session.exception()  # type: ignore[misc]


async def _serve_http(
    server: BusMcpServer, sock: socket.socket, stop: asyncio.Event, out: Console
) -> None:
    from a2a_bus.mcp import http_app

    host, port = sock.getsockname()[:2]
    web, serving = await start_http(http_app(server, host), sock, "MCP server")
    url_host = f"[{host}]" if ":" in host else host
    out.print(f"a2a-bus: MCP server listening on http://{escape(url_host)}:{port}/mcp")
    await _until(serving, stop)
    web.should_exit = True
    await serving


async def _run(
    classes: list[type[Agent]],
    bus: Bus,
    replicas: int,
    sock: socket.socket | None,
    authenticator: Authenticator,
    out: Console,
    signals: Signals,
) -> bool:
    """Serve until the session ends; False when calls still running were left behind
    (their threads would keep the process alive)."""
    ended = asyncio.Event()
    hosting = asyncio.create_task(
        _host(classes, bus, replicas, sock, authenticator, out, signals, ended)
    )
    try:
        await _until(hosting, ended)
    except asyncio.CancelledError:  # a signal during the start: not waited for
        await stop_task(hosting)
        raise
    if not hosting.done():
        # The bus drains in-flight calls, which may never end: a grace, as serve gives
        # its connections, and a second signal ends the wait at once.
        await _until(hosting, signals.again, timeout=SHUTDOWN_GRACE)
    if not hosting.done():
        await stop_task(hosting)
        out.print("a2a-bus: stopped without waiting for the calls still running")
        return False
    hosting.result()
    return True


async def _host(
    classes: list[type[Agent]],
    bus: Bus,
    replicas: int,
    sock: socket.socket | None,
    authenticator: Authenticator,
    out: Console,
    signals: Signals,
    ended: asyncio.Event,
) -> None:
    """Host the agents and serve the session until it ends (``ended`` is set then)."""
    from a2a_bus.mcp import BusMcpServer

    async with started(bus):
        for agent_cls in classes:
            await spawn_agent(bus, agent_cls, replicas)
        server = BusMcpServer(bus.async_client(), authenticator=authenticator)
        await server.refresh()
        names = ", ".join(cls.agent_id for cls in classes) or "no agents of its own"
        out.print(f"a2a-bus: MCP server for {escape(names)} on {transport_where(bus)}")
        watcher = asyncio.create_task(server.watch())
        signals.serving()
        try:
            if sock is None:
                out.print("a2a-bus: MCP session on stdin/stdout")
                await _serve_stdio(server, signals.stop)
            else:
                await _serve_http(server, sock, signals.stop, out)
        finally:
            ended.set()
            server.close()
            await stop_task(watcher)
    out.print("a2a-bus: stopped")


@app.command("mcp")
def mcp_command(
    targets: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="TARGET",
            help="Agents to host: module:Class, path/to/file.py:Class, or an agent file "
            f"({'/'.join(AGENT_FILE_SUFFIXES)}). With --kafka, the agents of the bus are "
            "served too (none needed here).",
            show_default=False,
        ),
    ] = None,
    kafka: Annotated[
        str | None,
        typer.Option(
            "--kafka",
            metavar="BOOTSTRAP",
            help="Kafka bootstrap servers (default as for serve: A2A_KAFKA_BOOTSTRAP_SERVERS "
            "or KAFKA_BOOTSTRAP_SERVERS, else the in-memory transport).",
        ),
    ] = None,
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            metavar="HOST:PORT",
            help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.",
        ),
    ] = None,
    replicas: Annotated[int, typer.Option("--replicas", min=1, help="Actors per agent.")] = 1,
    prefix: Annotated[
        str | None, typer.Option("--prefix", help="Topic prefix (default: A2A_PREFIX, else a2a).")
    ] = None,
    tokens: Annotated[
        Path | None,
        typer.Option(
            "--tokens", help="With --http: YAML/JSON file of bearer tokens -> allow-lists."
        ),
    ] = None,
) -> None:
    """Serve the methods of the bus's agents as MCP tools named <agent>__<method>."""
    _fill_closed_stdin()
    out = _status()
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise fail("a2a-bus mcp needs the mcp package: pip install 'a2a-bus[mcp]'", 2) from None
    classes = load_targets(targets or [])
    if tokens is not None and http is None:
        raise typer.BadParameter(
            "tokens apply to --http (stdio has no callers to tell apart)", param_hint="--tokens"
        )
    # Over HTTP the gateway's tokens apply (--tokens, A2A_GATEWAY_TOKEN[S_FILE]).
    authenticator = Authenticator(gateway_settings(tokens).tokens if http is not None else {})
    bus = build_bus(kafka, prefix)
    if not classes and kafka_bootstrap(bus) is None:
        raise fail("nothing to serve: give agents to host (TARGET), or --kafka to reach a bus", 2)
    for warning in llm_warnings(targets or []):
        out.print(f"warning: {escape(warning)}")
    sock = bind(*host_port(http)) if http is not None else None
    with sock if sock is not None else contextlib.nullcontext():
        signals = Signals(signal.SIGINT, signal.SIGTERM)
        drained = run_async(
            _run(classes, bus, replicas, sock, authenticator, out, signals), signals
        )
    sys.stdout.flush()
    if not drained:
        sys.stderr.flush()
        os._exit(0)  # not waiting for the threads of calls that did not end
