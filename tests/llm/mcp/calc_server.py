"""A real MCP server written with the SDK, for the tests: stdio by default,
streamable HTTP with ``--http`` (on ``--port``, default any free one: it prints
``port <n>`` once it listens).

``--pid-file PATH`` writes its process id there, so a test can see it stop;
``--fail-start`` writes a line to stderr and exits before serving.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

server = MCPServer("calc")


class Weather(BaseModel):
    city: str
    celsius: float


@server.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@server.tool()
def weather(city: str) -> Weather:
    """Today's weather in a city."""
    return Weather(city=city, celsius=21.5)


@server.tool(structured_output=False)
def shout(text: str) -> str:
    """The text in capitals."""
    return text.upper()


@server.tool()
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    if b == 0:
        raise ToolError("cannot divide by zero")
    return a / b


@server.tool()
def header(name: str, ctx: Context) -> str:
    """The value of an HTTP request header (empty on stdio)."""
    return (ctx.headers or {}).get(name.lower(), "")


@server.tool()
def die() -> str:
    """Exit the server process at once."""
    os._exit(3)


async def serve_http(port: int) -> None:
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    print(f"port {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    await uvicorn.Server(config).serve(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--pid-file")
    parser.add_argument("--fail-start", action="store_true")
    options = parser.parse_args()
    if options.pid_file:
        Path(options.pid_file).write_text(str(os.getpid()))
    if options.fail_start:
        print("calc: no licence for the calculator", file=sys.stderr, flush=True)
        sys.exit(1)
    if options.http:
        asyncio.run(serve_http(options.port))
    else:
        server.run()


if __name__ == "__main__":
    main()
