"""The bus as an MCP server: the methods of its agents as MCP tools.

The tools are what discovery knows (the bus's ``methods/list``), read again every
``interval`` seconds; when they change, clients hear it: a ``tools/list_changed``
notification on a handshake-era connection (that listed the tools), a
``ToolsListChanged`` event on a ``subscriptions/listen`` stream on a 2026-era one.
A call is a JSON-RPC request through the bus's async client; a streaming method's
chunks are reported as progress notifications (when the caller asked for
progress) and all of them are the result. A JSON-RPC error is a tool error.

Over HTTP every request may carry a bearer token of the gateway's (``--tokens``,
``A2A_GATEWAY_TOKEN``): a token sees and calls only what its allow-lists allow.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import sys
from collections.abc import AsyncIterator, Mapping
from typing import Any

import mcp_types as types
from mcp.server import InitializationOptions, Server
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from a2a_bus import __version__
from a2a_bus.core.payload import MAX_PAYLOAD_BYTES
from a2a_bus.core.streams import Collected
from a2a_bus.gateway.auth import OPEN, Access, Authenticator
from a2a_bus.mcp.catalog import BusTool, catalog
from a2a_bus.protocol import JsonRpcError, ext, new_event
from a2a_bus.protocol.errors import data_text

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "The agents of an a2a-bus. Each tool calls one method of one agent and is named "
    "<agent>__<method>; the list follows agents joining and leaving the bus."
)
#: The longest line (one JSON-RPC message) read from stdin.
MAX_LINE = 64 * 1024 * 1024
#: Handshake-era connections kept for list-changed notifications at most.
MAX_LEGACY_CONNECTIONS = 1024


def allows(access: Access, tool: BusTool) -> bool:
    """Whether ``access`` may call ``tool`` (the gateway's own rule for a request)."""
    probe = new_event({"source": "a2a-bus/mcp", "type": "a2a.mcp", ext.METHOD: tool.method}, None)
    return access.denies(probe, tool.agent) is None


class BusMcpServer:
    """An MCP server (the SDK's low-level ``Server``) in front of a bus's async client."""

    def __init__(
        self,
        client: Any,
        *,
        authenticator: Authenticator | None = None,
        interval: float = 1.0,
        name: str = "a2a-bus",
    ) -> None:
        self.client = client
        self.interval = interval
        self.authenticator = authenticator or Authenticator({})
        self.tools: dict[str, BusTool] = {}
        self._events = InMemorySubscriptionBus()
        self._listen = ListenHandler(self._events)
        #: Handshake-era connections that listed the tools: told when they change.
        self._legacy: dict[int, ServerSession] = {}
        #: What the last listing left out: each is logged once, not on every refresh.
        self._left_out: set[str] = set()
        self.server: Server[Any] = _BusServer(
            name,
            version=__version__,
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self._listen,
        )

    # -- the catalog ------------------------------------------------------------------

    async def refresh(self) -> bool:
        """Read the methods of the live agents; tell clients when the tools changed."""
        listing = await self.client.request(None, "methods/list")
        problems: list[str] = []
        entries = listing.get("methods", ()) if isinstance(listing, Mapping) else ()
        tools = catalog(entries, problems=problems)
        for problem in problems:
            if problem not in self._left_out:
                log.warning("MCP server: %s", problem)
        self._left_out = set(problems)
        if tools == self.tools:
            return False
        self.tools = tools
        await self._changed()
        return True

    async def watch(self) -> None:
        """Refresh every ``interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.refresh()
            except Exception as exc:  # the bus stopping, a timeout: try again later
                log.warning("MCP server: reading the agents failed: %s", exc)

    async def _changed(self) -> None:
        await self._events.publish(ToolsListChanged())
        for key, session in list(self._legacy.items()):
            try:
                await session.send_tool_list_changed()
            except Exception:  # that client has gone
                self._legacy.pop(key, None)

    def _remember(self, ctx: ServerRequestContext[Any]) -> None:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return  # told through subscriptions/listen
        session = ctx.session
        key = id(session.client_params) if session.client_params is not None else id(session)
        self._legacy.pop(key, None)
        self._legacy[key] = session
        while len(self._legacy) > MAX_LEGACY_CONNECTIONS:
            self._legacy.pop(next(iter(self._legacy)))

    # -- requests -------------------------------------------------------------------

    def _access(self, ctx: ServerRequestContext[Any]) -> Access | None:
        headers = getattr(ctx.request, "headers", None)
        if headers is None:  # stdio: whoever started the process
            return OPEN
        return self.authenticator.authenticate(headers.get("authorization"))

    def visible(self, access: Access | None) -> list[BusTool]:
        if access is None:
            return []
        return [tool for tool in self.tools.values() if allows(access, tool)]

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self._remember(ctx)
        tools = [
            types.Tool(name=t.name, description=t.description, input_schema=dict(t.input_schema))
            for t in self.visible(self._access(ctx))
        ]
        return types.ListToolsResult(tools=tools)

    async def _find(self, name: str, access: Access | None) -> BusTool:
        tool = self.tools.get(name)
        if tool is None:
            with contextlib.suppress(Exception):  # an agent that joined a moment ago
                await self.refresh()
            tool = self.tools.get(name)
        if tool is None or access is None or not allows(access, tool):
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}")
        return tool

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = await self._find(params.name, self._access(ctx))
        arguments = params.arguments or {}
        try:
            if tool.streams:
                return await self._collect(ctx, tool, arguments)
            value = await self.client.request(tool.agent, tool.method, arguments)
        except JsonRpcError as exc:
            return _error_result(f"{tool.agent}.{tool.method} answered error {exc}")
        return _result(value, value if isinstance(value, dict) else None)

    async def _collect(
        self, ctx: ServerRequestContext[Any], tool: BusTool, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        """A streaming method's chunks, all of them the result, gathered as the bus
        gathers a stream answering a plain request: past one message's payload the
        ``JsonRpcError`` -32005 it raises is the tool's error."""
        collected = Collected(MAX_PAYLOAD_BYTES)
        stream = self.client.stream(tool.agent, tool.method, arguments)
        try:
            async for chunk in stream:
                collected.add(chunk)
                count = len(collected.items)
                await ctx.session.report_progress(count, None, data_text(chunk))
        finally:
            with contextlib.suppress(Exception):  # stop the stream we no longer read
                await stream.aclose()
        return _result(collected.items, {"chunks": collected.items})

    # -- serving ----------------------------------------------------------------------

    def initialization_options(self) -> InitializationOptions:
        return self.server.create_initialization_options()

    async def run_stdio(self) -> None:
        """Serve one client on this process's stdin and stdout until it hangs up.

        Stdin is read on the loop when it is a pipe or a terminal, so that cancelling
        this (a signal) ends it: a read blocked in a thread would keep the process alive.
        """
        lines = await _stdin_lines()
        async with stdio_server(stdin=lines) as (read, write):
            await self.server.run(read, write, self.initialization_options())

    def close(self) -> None:
        """End the open ``subscriptions/listen`` streams."""
        self._listen.close()


class _BusServer(Server[Any]):
    """The SDK's server, announcing to every connection (HTTP's too, whose session
    manager asks with no options) the tools/list_changed notifications it sends."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


def _result(value: Any, structured: dict[str, Any] | None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=data_text(value))],
        structured_content=structured,
    )


def _error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


class _Lines:
    """An async iterable of the lines a stream reader gives, as ``stdio_server`` reads
    them; a line longer than the reader's limit is skipped with a warning."""

    def __init__(self, reader: asyncio.StreamReader, limit: int) -> None:
        self._reader = reader
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[str]:
        while True:
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:  # the end: a last line without "\n"
                if exc.partial:
                    yield exc.partial.decode("utf-8", errors="replace")
                return
            except asyncio.LimitOverrunError as exc:
                if not await self._skip(exc.consumed):
                    return
                log.warning(
                    "MCP server: a message on stdin longer than %d bytes was skipped", self._limit
                )
                continue
            yield line.decode("utf-8", errors="replace")

    async def _skip(self, buffered: int) -> bool:
        """Drop the rest of an over-long line; False when stdin ended first."""
        try:
            while True:
                await self._reader.readexactly(buffered)
                try:
                    await self._reader.readuntil(b"\n")
                    return True
                except asyncio.LimitOverrunError as exc:
                    buffered = exc.consumed
        except asyncio.IncompleteReadError:
            return False


#: Kinds of stdin a loop can watch; anything else (a regular file, /dev/null) is read
#: by the SDK in a thread (uvloop aborts the process on one).
_WATCHABLE = (stat.S_ISFIFO, stat.S_ISSOCK)


async def _stdin_lines(limit: int = MAX_LINE) -> Any:
    """Stdin as lines read on the running loop; None (the SDK's own reader) for one
    that no loop can watch; no lines at all for a closed stdin."""
    reader = asyncio.StreamReader(limit=limit)
    try:
        fd = sys.stdin.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, ValueError, OSError):  # closed, or no stdin at all
        reader.feed_eof()
        return _Lines(reader, limit)
    if not (any(kind(mode) for kind in _WATCHABLE) or os.isatty(fd)):
        return None
    loop = asyncio.get_running_loop()
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    except (ValueError, OSError):
        return None
    return _Lines(reader, limit)
