"""One MCP server's session, with the official ``mcp`` SDK: start or reach the server,
list its tools, call them, stop it.

A session lives in a task on a :class:`~a2a_bus.runtime.portal.Portal`'s loop, the
loop that opened it (the SDK's task groups are entered and left in that one task).
A server that cannot start, or died, is an :class:`McpServerError` naming it, with
the last lines of a stdio server's stderr once it has stopped; the tools it lists
wrongly are left out (:mod:`a2a_bus.llm.mcp_listing`).

Uses the ``mcp`` SDK (the ``mcp`` extra), imported where it is used.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import threading
from typing import IO, TYPE_CHECKING, Any, TextIO, cast

from a2a_bus.llm.mcp_listing import SoundListings
from a2a_bus.llm.mcp_servers import McpServer
from a2a_bus.runtime.portal import Portal

if TYPE_CHECKING:
    import mcp_types

#: A server's stderr is logged under the name users know it by (docs/llm.md): the
#: module that makes the agent's tools.
log = logging.getLogger("a2a_bus.llm.mcp_tools")
#: Lines of a server's stderr kept to explain how it failed.
STDERR_TAIL = 8
#: Seconds the last lines of a server that ended may take to come out of the pipe.
STDERR_WAIT = 0.5
#: Pages of ``tools/list`` read at most (a server whose cursor never ends).
MAX_PAGES = 100


class McpServerError(RuntimeError):
    """An MCP server could not start, died, or refused a call; the message names it."""


def _require_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise McpServerError(
            "MCP servers need the mcp package: pip install 'a2a-bus[mcp]'"
        ) from None


def reason_of(exc: BaseException) -> str:
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
                f"failed to start ({self.server.where}): {reason_of(exc)}"
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
                self.stopped = reason_of(exc)
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
            raise await self._lost(tool, reason_of(exc)) from None
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
