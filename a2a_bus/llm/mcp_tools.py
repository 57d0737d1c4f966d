"""The tools of MCP servers as agent tools, with the official ``mcp`` SDK.

:class:`McpTools` starts the servers of an agent (:class:`~a2a_bus.llm.mcp_servers.McpServer`)
on a :class:`~a2a_bus.runtime.portal.Portal`, a loop thread of its own, since the SDK's
sessions must stay on the loop that opened them while the agent's runs happen on
other loops. Each tool of each server becomes an :class:`McpTool` named
``<server>__<tool>`` with the server's JSON Schema; a call hands over to the portal
and back. A result's structured content (else its text) goes to the model, a tool
error becomes the tool's failure; a server that cannot start, or died, is an
:class:`McpServerError` naming it. A tool the server lists wrongly is left out with a
warning, its server's other tools kept; a model's arguments are checked against a tool's
schema but for its regular expressions, which the server checks.

Uses the ``mcp`` SDK (a dependency).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import threading
from collections.abc import Iterable, Sequence
from typing import IO, TYPE_CHECKING, Any, TextIO, cast

import jsonschema

from a2a_bus.core.payload import MAX_PAYLOAD_BYTES
from a2a_bus.llm.mcp_arguments import arguments_validator
from a2a_bus.llm.mcp_listing import SoundListings
from a2a_bus.llm.mcp_servers import SEPARATOR, McpServer, check_unique
from a2a_bus.llm.tools import TOOL_NAME, AgentTool, ToolContext
from a2a_bus.runtime.portal import Portal

if TYPE_CHECKING:
    import mcp_types

log = logging.getLogger(__name__)
#: Lines of a server's stderr kept to explain how it failed.
STDERR_TAIL = 8
#: Seconds the last lines of a server that ended may take to come out of the pipe.
STDERR_WAIT = 0.5
#: Pages of ``tools/list`` read at most (a server whose cursor never ends).
MAX_PAGES = 100
#: Bytes of a tool's result (as text) the model gets at most: what one bus message carries.
MAX_RESULT_BYTES = MAX_PAYLOAD_BYTES


class McpServerError(RuntimeError):
    """An MCP server could not start, died, or refused a call; the message names it."""


class McpToolError(RuntimeError):
    """An MCP tool answered with an error result (its text is the message)."""


def _require_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise McpServerError(
            "MCP servers need the mcp package: pip install 'a2a-bus[mcp]'"
        ) from None


def _reason(exc: BaseException) -> str:
    """One line for an exception, the first real one of a task group's."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    text = str(exc) or type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror + (f": {exc.filename}" if exc.filename else "")
    return text


class _Stderr:
    """A stdio server's stderr: each line logged, the last ones kept for errors."""

    def __init__(self, name: str) -> None:
        read, write = os.pipe()
        self.file: IO[str] = os.fdopen(write, "w")
        self.tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self._thread = threading.Thread(
            target=self._pump, args=(os.fdopen(read, "r", errors="replace"), name), daemon=True
        )
        self._thread.start()

    def _pump(self, stream: IO[str], name: str) -> None:
        with stream:
            for line in stream:
                text = line.rstrip()
                if text:
                    self.tail.append(text)
                    log.info("MCP server %s: %s", name, text)

    def release(self) -> None:
        """Close this process's end (the child keeps its own)."""
        with contextlib.suppress(OSError):
            self.file.close()

    async def last_words(self, *, ended: bool) -> str:
        """The last lines; once the child has ended (``ended``), those still in the pipe
        too, waited for off the loop: a live child's pipe never ends."""
        if ended:
            await asyncio.to_thread(self._thread.join, STDERR_WAIT)
        return f"; its stderr ended with: {' | '.join(self.tail)}" if self.tail else ""


class McpConnection:
    """One running MCP server: its session lives in a task on the portal's loop."""

    def __init__(self, server: McpServer, portal: Portal) -> None:
        self.server = server
        self._portal = portal
        self._client: Any = None
        self._stderr: _Stderr | None = None
        self._closing: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        #: Why the server is gone (None while it runs).
        self.stopped: str | None = None
        self.tools: list[mcp_types.Tool] = []

    @property
    def running(self) -> bool:
        return self._client is not None

    async def _error(self, problem: str) -> McpServerError:
        words = ""
        if self._stderr is not None:
            words = await self._stderr.last_words(ended=not self.running)
        return McpServerError(f"MCP server {self.server.name!r} {problem}{words}")

    async def start(self) -> None:
        """Start or reach the server and list its tools (on the portal's loop)."""
        _require_sdk()
        self.stopped = None
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self._task = asyncio.create_task(self._serve(ready))
        try:
            async with asyncio.timeout(self.server.start_timeout):
                await asyncio.shield(ready)
        except TimeoutError:
            ready.cancel()  # given up: the start's own failure now has no one to hear it
            await self.close()
            raise await self._error(
                f"failed to start: no answer within {self.server.start_timeout:g}s "
                f"({self.server.where})"
            ) from None
        except Exception as exc:
            await self.close()
            raise await self._error(
                f"failed to start ({self.server.where}): {_reason(exc)}"
            ) from None

    async def _serve(self, ready: asyncio.Future[None]) -> None:
        # The SDK's task groups are entered and left in this one task.
        from mcp import Client

        assert self._closing is not None
        try:
            async with contextlib.AsyncExitStack() as stack:
                listings = SoundListings(self._transport(stack), self.server.name)
                client = await stack.enter_async_context(Client(listings))
                listings.version = client.protocol_version
                if self._stderr is not None:
                    self._stderr.release()
                self.tools = await _list_tools(client)
                self._client = client
                ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
            elif not isinstance(exc, asyncio.CancelledError):
                self.stopped = _reason(exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._client = None
            if self._stderr is not None:
                self._stderr.release()
            if self.stopped is None:
                self.stopped = "it was stopped"

    def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        server = self.server
        if server.url is not None:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            http = httpx2.AsyncClient(
                headers=dict(server.headers), timeout=httpx2.Timeout(30.0, read=300.0)
            )
            stack.push_async_callback(http.aclose)
            return streamable_http_client(server.url, http_client=http)
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        self._stderr = _Stderr(server.name)
        assert server.command is not None
        parameters = StdioServerParameters(
            command=server.command,
            args=list(server.args),
            env=dict(server.env) if server.env is not None else None,
            cwd=server.cwd,
        )
        return stdio_client(parameters, errlog=cast(TextIO, self._stderr.file))

    async def call(self, tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """Call ``tool`` (on the portal's loop); a dead server is an error naming it."""
        from mcp import MCPError
        from pydantic import ValidationError

        client = self._client
        if client is None:
            raise await self._error(f"is not running: {self.stopped or 'it was never started'}")
        deadline = asyncio.timeout(self.server.timeout)
        try:
            async with deadline:
                result: mcp_types.CallToolResult = await client.call_tool(tool, arguments)
        except TimeoutError:
            if not deadline.expired():  # the transport's own (HTTP): the session is in doubt
                raise await self._lost(tool, "no answer in time") from None
            raise await self._error(
                f"did not answer the call of {tool!r} within {self.server.timeout:g}s"
            ) from None
        except MCPError as exc:
            # The SDK reports a closed connection with the code a server may send too.
            if not await _answers(client, self.server.timeout):
                self.stopped = "its connection closed (the server exited or went away)"
                self._client = None
                raise await self._error(f"stopped: {self.stopped}") from None
            detail = f" {_json(exc.data)}" if exc.data is not None else ""
            raise await self._error(
                f"refused the call of {tool!r}: {exc.code} {exc.message}{detail}"
            ) from None
        except ValidationError as exc:  # an answer, but no tool result: the session is fine
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "the result"
            raise await self._error(
                f"answered the call of {tool!r} with no valid tool result "
                f"({exc.error_count()} problems; {where}: {first['msg']})"
            ) from None
        except Exception as exc:  # the transport failed (HTTP), or the answer was no answer
            raise await self._lost(tool, _reason(exc)) from None
        return result

    async def _lost(self, tool: str, reason: str) -> McpServerError:
        # Started again before the next run (the session may be gone with the server).
        self.stopped = f"the call of {tool!r} failed: {reason}"
        self._client = None
        return await self._error(f"failed the call of {tool!r}: {reason}")

    async def close(self) -> None:
        """Stop the server (a child process gets its stdin closed, then a signal)."""
        task, self._task = self._task, None
        if task is None:
            return
        assert self._closing is not None
        self._closing.set()
        if self._client is None:
            task.cancel()  # still starting: the handshake is not waited for
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await task


async def _answers(client: Any, timeout: float) -> bool:
    """Whether the session still carries requests: a closed one fails a new one at
    once, with the error a closed connection gives; a live server answers it."""
    from mcp import MCPError
    from mcp_types import CONNECTION_CLOSED

    try:
        async with asyncio.timeout(timeout):
            await client.list_tools(cache_mode="refresh")
    except MCPError as exc:
        return exc.code != CONNECTION_CLOSED
    except Exception:
        return False
    return True


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


async def _list_tools(client: Any) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def result_value(result: mcp_types.CallToolResult) -> Any:
    """What the model gets from a tool result: its structured content when there is
    some, else its content as text; an error result raises :class:`McpToolError`."""
    text = "\n".join(_block_text(block) for block in result.content)
    if result.is_error:
        raise McpToolError(_capped(text) or "the tool failed without saying why")
    if result.structured_content is not None:
        structured = _json(result.structured_content)
        if len(structured.encode()) <= MAX_RESULT_BYTES:
            return result.structured_content
        return _capped(structured)
    return _capped(text)


def _capped(text: str) -> str:
    """``text`` cut to :data:`MAX_RESULT_BYTES`, saying so."""
    if len(text) <= MAX_RESULT_BYTES // 4:  # UTF-8 spends at most 4 bytes on a character
        return text
    raw = text.encode()
    if len(raw) <= MAX_RESULT_BYTES:
        return text
    kept = raw[:MAX_RESULT_BYTES].decode("utf-8", errors="ignore")
    return (
        f"{kept}\n[cut: the tool's result was {len(raw)} bytes; "
        f"the first {MAX_RESULT_BYTES} are above]"
    )


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4} bytes]"
    if kind == "resource_link":
        return f"[resource {block.uri}]"
    if kind == "resource":
        inner = block.resource
        text = getattr(inner, "text", None)
        return text if isinstance(text, str) else f"[resource {inner.uri}, binary]"
    return f"[{kind or 'unknown'} content]"


class McpTool(AgentTool):
    """One tool of an MCP server, as the agent's model sees and calls it."""

    def __init__(self, connection: McpConnection, tool: mcp_types.Tool, portal: Portal) -> None:
        description = tool.description or tool.title or f"{tool.name} of {connection.server.name}"
        schema = tool.input_schema
        name = f"{connection.server.name}{SEPARATOR}{tool.name}"
        # A server's schema is not trusted with our regex engine (see mcp_arguments).
        super().__init__(name, description, schema, validator=arguments_validator)
        self.tool_name = tool.name
        self._connection = connection
        self._portal = portal

    async def invoke(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        connection, name = self._connection, self.tool_name
        result = await self._portal.on_loop(connection.call(name, arguments))
        return result_value(result)


class McpTools:
    """The running MCP servers of one agent and their tools; ``close()`` stops them."""

    def __init__(self, servers: Sequence[McpServer]) -> None:
        check_unique(servers)
        self.servers = tuple(servers)
        self._portal = Portal.on_thread("mcp-servers")
        self.connections = [McpConnection(server, self._portal) for server in servers]
        self.tools: list[AgentTool] = []

    @classmethod
    def start(cls, servers: Sequence[McpServer]) -> McpTools:
        """Start every server (from sync code: an actor thread); raises
        :class:`McpServerError` naming the first that failed, the others stopped."""
        running = cls(servers)
        running._portal.run(running._start())
        return running

    @classmethod
    async def astart(cls, servers: Sequence[McpServer]) -> McpTools:
        running = cls(servers)
        await running._portal.on_loop(running._start())
        return running

    async def _start(self) -> None:
        outcomes = await asyncio.gather(
            *(connection.start() for connection in self.connections), return_exceptions=True
        )
        failed = next((o for o in outcomes if isinstance(o, BaseException)), None)
        if failed is not None:
            await self._close()
            raise failed
        for connection in self.connections:
            self.tools.extend(self._tools_of(connection))

    def _tools_of(self, connection: McpConnection) -> Iterable[AgentTool]:
        wanted = connection.server.tools
        listed = {tool.name for tool in connection.tools}
        for missing in sorted(set(wanted or ()) - listed):
            log.warning("MCP server %s has no tool %r", connection.server.name, missing)
        taken: set[str] = set()
        for tool in connection.tools:
            if wanted is not None and tool.name not in wanted:
                continue
            name = f"{connection.server.name}{SEPARATOR}{tool.name}"
            if not TOOL_NAME.match(name):
                log.warning("MCP tool %r left out: the name is not a valid tool name", name)
                continue
            if name in taken:  # the first of two that share a name, as the bus's catalog
                log.warning("MCP tool %r left out: its server lists that name twice", name)
                continue
            try:
                agent_tool = McpTool(connection, tool, self._portal)
            except jsonschema.SchemaError as exc:
                problem = f"its input schema is no JSON Schema ({exc.json_path}: {exc.message})"
                log.warning("MCP tool %r left out: %s", name, problem)
                continue
            except Exception as exc:  # a schema too deep to check, say
                log.warning("MCP tool %r left out: %s", name, _reason(exc))
                continue
            taken.add(name)
            yield agent_tool

    def revive(self) -> None:
        """Start again the servers that stopped (died); raises :class:`McpServerError`
        naming the first that cannot start."""
        if not all(connection.running for connection in self.connections):
            self._portal.run(self._revive())

    async def _revive(self) -> None:
        for connection in self.connections:
            if not connection.running:
                await connection.close()
                await connection.start()

    async def _close(self) -> None:
        await asyncio.gather(*(connection.close() for connection in self.connections))

    def close(self) -> None:
        """Stop every server and the portal's loop thread (idempotent)."""
        if self._portal.attached is not None:
            self._portal.run(self._close())
        self._portal.close()

    async def aclose(self) -> None:
        if self._portal.attached is not None:
            await self._portal.on_loop(self._close())
        await asyncio.to_thread(self._portal.close)
