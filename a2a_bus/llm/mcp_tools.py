"""The tools of MCP servers as agent tools.

:class:`McpTools` starts the servers of an agent (:class:`~a2a_bus.llm.mcp_servers.McpServer`)
on a :class:`~a2a_bus.runtime.portal.Portal`, a loop thread of its own, since the SDK's
sessions (:class:`~a2a_bus.llm.mcp_connection.McpConnection`) must stay on the loop
that opened them while the agent's runs happen on other loops. Each tool of each
server becomes an :class:`McpTool` named ``<server>__<tool>`` with the server's JSON
Schema; a call hands over to the portal and back. A result's structured content (else
its text) goes to the model, a tool error becomes the tool's failure; a server that
cannot start, or died, is an :class:`McpServerError` naming it. A tool the server lists
wrongly is left out with a warning, its server's other tools kept; a model's arguments
are checked against a tool's schema but for its regular expressions, which the server
checks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import jsonschema

from a2a_bus.core.payload import MAX_PAYLOAD_BYTES
from a2a_bus.llm.dispatch import format_result
from a2a_bus.llm.mcp_arguments import arguments_validator
from a2a_bus.llm.mcp_connection import McpConnection, McpServerError, reason_of
from a2a_bus.llm.mcp_servers import SEPARATOR, McpServer, check_unique
from a2a_bus.llm.tools import TOOL_NAME, AgentTool, ToolContext
from a2a_bus.runtime.portal import Portal

if TYPE_CHECKING:
    import mcp_types

log = logging.getLogger(__name__)
#: Bytes of a tool's result (as text) the model gets at most: what one bus message carries.
MAX_RESULT_BYTES = MAX_PAYLOAD_BYTES


class McpToolError(RuntimeError):
    """An MCP tool answered with an error result (its text is the message)."""


def result_value(result: mcp_types.CallToolResult) -> Any:
    """What the model gets from a tool result: its structured content when there is
    some, else its content as text; an error result raises :class:`McpToolError`."""
    text = "\n".join(_block_text(block) for block in result.content)
    if result.is_error:
        raise McpToolError(_capped(text) or "the tool failed without saying why")
    if result.structured_content is not None:
        structured = format_result(result.structured_content)
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
                log.warning("MCP tool %r left out: %s", name, reason_of(exc))
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


__all__ = [
    "MAX_RESULT_BYTES",
    "McpServerError",
    "McpTool",
    "McpToolError",
    "McpTools",
    "result_value",
]
