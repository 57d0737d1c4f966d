"""The calculator agent (``calc``): arithmetic over JSON-RPC, and a streaming count."""

from __future__ import annotations

from collections.abc import Iterator

from a2a_bus import Agent, JsonRpcError, method


class Calculator(Agent):
    """Adds, subtracts, multiplies and divides; counts as a stream."""

    agent_id = "calc"

    @method
    def add(self, a: float, b: float) -> float:
        """a + b"""
        return a + b

    @method
    def subtract(self, minuend: float, subtrahend: float) -> float:
        """minuend - subtrahend"""
        return minuend - subtrahend

    @method
    def multiply(self, a: float, b: float) -> float:
        """a * b"""
        return a * b

    @method
    def divide(self, dividend: float, divisor: float) -> float:
        """dividend / divisor; dividing by zero is error -32010."""
        if divisor == 0:
            raise JsonRpcError(-32010, "Division by zero", {"dividend": dividend})
        return dividend / divisor

    @method
    def sum(self, numbers: Iterator[float]) -> float:
        """The sum of a stream of numbers the caller sends."""
        return sum(numbers)

    @method
    def count(self, to: int, start: int = 1) -> Iterator[int]:
        """Streams start, start+1, ..., to (one chunk each)."""
        if to - start > 1_000_000:
            raise JsonRpcError(-32602, "Invalid params", "at most 1,000,000 numbers")
        yield from range(start, to + 1)
