"""The bus as an MCP server: the methods of its agents as MCP tools (``a2a-bus mcp``).

Uses the ``mcp`` SDK (a dependency).
"""

from a2a_bus.mcp.catalog import BusTool, catalog, tool_name
from a2a_bus.mcp.http import http_app
from a2a_bus.mcp.server import BusMcpServer

__all__ = ["BusMcpServer", "BusTool", "catalog", "http_app", "tool_name"]
