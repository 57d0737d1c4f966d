"""The units server: an MCP server (official ``mcp`` SDK) the almanac mounts over stdio.

``python -m a2a_bus.examples.units_server`` speaks MCP on its stdin and stdout; any
MCP client can use it. Its one tool converts lengths.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("units")

#: Metres in one of each unit.
METRES = {"m": 1.0, "km": 1000.0, "mi": 1609.344, "ft": 0.3048, "in": 0.0254}


@server.tool()
def convert_length(value: float, from_unit: str, to_unit: str) -> float:
    """Convert a length between m, km, mi, ft and in (rounded to 3 decimals)."""
    unknown = [unit for unit in (from_unit, to_unit) if unit not in METRES]
    if unknown:
        raise ToolError(f"unknown unit {unknown[0]!r}: use one of {', '.join(METRES)}")
    return round(value * METRES[from_unit] / METRES[to_unit], 3)


if __name__ == "__main__":
    server.run()
