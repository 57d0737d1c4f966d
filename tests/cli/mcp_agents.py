"""Agents that ``a2a-bus mcp`` and ``a2a-bus serve`` host in the MCP command's tests."""

from __future__ import annotations

from collections.abc import Iterator

from a2a_bus import Agent, JsonRpcError, method


class Calc(Agent):
    """Arithmetic."""

    agent_id = "calc"

    @method
    def add(self, a: int, b: int) -> int:
        """Add two whole numbers."""
        return a + b

    @method
    def divide(self, a: float, b: float) -> float:
        """a / b"""
        if b == 0:
            raise JsonRpcError(-32010, "Division by zero")
        return a / b

    @method
    def count(self, to: int) -> Iterator[int]:
        """Counts from 1."""
        yield from range(1, to + 1)


class Billing(Agent):
    """Charges cards."""

    agent_id = "billing"

    @method
    def charge(self, cents: int) -> str:
        """Charge a card."""
        return f"charged {cents}"
