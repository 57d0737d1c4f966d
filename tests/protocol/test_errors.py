"""A JSON-RPC error as text: what logs and users see of it."""

from __future__ import annotations

from a2a_bus.protocol import JsonRpcError
from a2a_bus.protocol.errors import MAX_DATA_CHARS


def test_an_error_reads_as_its_code_message_and_data() -> None:
    """What a log line or ``print(error)`` shows: enough to act on, the data as JSON."""
    assert str(JsonRpcError(-32601, "Method not found")) == "-32601 Method not found"
    detail = JsonRpcError(-32602, "Invalid params", "missing a required argument: 'b'")
    assert str(detail) == "-32602 Invalid params: missing a required argument: 'b'"
    structured = JsonRpcError(-32010, "Division by zero", {"a": 1, 2: [None]})
    assert str(structured) == '-32010 Division by zero: {"a":1,"2":[null]}'
    odd = JsonRpcError(-32603, "Internal error", {1, 2})  # no JSON form: its repr
    assert str(odd) == "-32603 Internal error: {1, 2}"
    long = str(JsonRpcError(-32603, "Internal error", "x" * (MAX_DATA_CHARS + 10)))
    assert long.endswith("x... (10 more)") and len(long) < MAX_DATA_CHARS + 50
