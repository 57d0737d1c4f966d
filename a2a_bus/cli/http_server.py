"""The HTTP server of ``serve`` and ``mcp --http``: uvicorn on a socket bound up
front, stopped by the command (not by uvicorn's own signal handling), with the
requests still running at the end of the shutdown grace ended cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from typing import Any, NamedTuple

import typer
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from a2a_bus.cli.common import fail
from a2a_bus.gateway.responses import problem
from a2a_bus.protocol import whole_number


def host_port(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) -> (host, port); port 0 picks a free port."""
    host, _, port = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    number = whole_number(port, 5)
    if not host or number is None or number > 65535:
        raise typer.BadParameter(
            f"{value!r}: use HOST:PORT with a port from 1 to 65535 (0: any free port)",
            param_hint="--http",
        )
    return host, number


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
#: Seconds after that before uvicorn cancels what :class:`Closing` could not end.
_BACKSTOP = 2
#: The 503 of a request that the end of the shutdown grace found still running.
STOPPING = "the server is stopping: this request did not finish within its shutdown grace"


class Closing:
    """An ASGI app that ends, when told to, the HTTP requests it still runs: one not
    answered yet gets a 503, a stream (a live view) ends. Left to uvicorn, the end of
    the shutdown grace cancels them, which it logs as errors (with a traceback for a
    request not answered yet, which gets a bare 500)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._running: set[asyncio.Task[Any]] = set()
        self._ending = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        task = asyncio.current_task()
        if scope["type"] != "http" or task is None:
            await self.app(scope, receive, send)
            return
        started = complete = False

        async def sending(message: Message) -> None:
            nonlocal started, complete
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                complete = True
            await send(message)

        self._running.add(task)
        try:
            await self.app(scope, receive, sending)
        except asyncio.CancelledError:
            if not self._ending:
                raise
            task.uncancel()  # ended here, on purpose: the task goes on to answer
        finally:
            self._running.discard(task)
        if not self._ending or complete:
            return
        if started:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        else:
            await problem(503, STOPPING)(scope, receive, send)

    def end(self) -> None:
        """End every request still running (see the class docstring)."""
        self._ending = True
        for task in self._running:
            task.cancel()


class QuietServer(uvicorn.Server):
    """uvicorn without its own signal handling: ``serve`` stops it on SIGINT/SIGTERM and
    then shuts the bus down cleanly (uvicorn would re-raise the signal afterwards).
    Requests still running ``SHUTDOWN_GRACE`` seconds into its shutdown are ended
    by ``closing``."""

    def __init__(self, config: uvicorn.Config, closing: Closing) -> None:
        super().__init__(config)
        self._closing = closing

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        ending = asyncio.get_running_loop().call_later(SHUTDOWN_GRACE, self._closing.end)
        try:
            await super().shutdown(sockets)
        finally:
            ending.cancel()


class Http(NamedTuple):
    server: uvicorn.Server
    task: asyncio.Task[None]


async def start_http(app: ASGIApp, sock: socket.socket, what: str) -> Http:
    """``app`` (``what``: for the error) served by uvicorn on ``sock``, once it
    accepts connections."""
    closing = Closing(app)
    config = uvicorn.Config(
        closing,
        log_level="warning",
        lifespan="on",
        # Live views (SSE) never end by themselves: what is still open this long
        # after a stop signal is ended, so the server stops (Closing, else uvicorn).
        timeout_graceful_shutdown=SHUTDOWN_GRACE + _BACKSTOP,
    )
    server = QuietServer(config, closing)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started and not serving.done():
        await asyncio.sleep(0.02)
    if not server.started:
        raise fail(f"cannot serve HTTP: the {what} did not start (see the lines above)")
    return Http(server, serving)
