"""How deep a message is in a chain of agent calls, and through which agents.

A message sent by a handler is one call deeper than the message it handles:
``calldepth`` counts the agent handlers above it (absent or 0 for a message from
outside the bus) and ``callchain`` names them, oldest first, comma-separated
(agent ids hold no commas), at most :data:`MAX_CHAIN` of the latest. Both are
CloudEvents extension attributes, kept across handler calls, LLM bus tools,
triggers and streams. Past the bus's limit a message is refused with
:data:`~a2a_bus.protocol.errors.ErrorCode.CALL_TOO_DEEP`, naming the chain: an
agent that calls itself, or two that call each other, stop there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from a2a_bus.protocol.constants import ext
from a2a_bus.protocol.errors import ErrorCode, JsonRpcError

CALLDEPTH: Final = ext.CALLDEPTH
CALLCHAIN: Final = ext.CALLCHAIN
#: Agent ids a chain keeps (the latest); ``calldepth`` still counts them all.
MAX_CHAIN: Final = 32
#: The depth a bus allows unless configured otherwise (``A2A_MAX_CALL_DEPTH``).
DEFAULT_MAX_CALL_DEPTH: Final = 8
CALL_TOO_DEEP_MESSAGE: Final = "Call chain too deep"


def call_depth(attributes: Mapping[str, Any]) -> int:
    """The ``calldepth`` of an event as received (0 when absent or not a count)."""
    depth = attributes.get(CALLDEPTH)
    return depth if type(depth) is int and depth > 0 else 0


def call_chain(attributes: Mapping[str, Any]) -> list[str]:
    """The agent ids of an event's ``callchain``, oldest first."""
    chain = attributes.get(CALLCHAIN)
    if type(chain) is not str or not chain:
        return []
    return chain.split(",")


def next_call(attributes: Mapping[str, Any], agent: str) -> tuple[int, str]:
    """``calldepth`` and ``callchain`` of a message that ``agent``'s handler sends
    while it handles an event with ``attributes``."""
    chain = call_chain(attributes)
    chain.append(agent)
    return call_depth(attributes) + 1, ",".join(chain[-MAX_CHAIN:])


def depth_refusal(depth: Any, limit: int, chain: Any) -> JsonRpcError | None:
    """The error refusing a message of ``calldepth`` ``depth`` on a bus allowing
    ``limit``, or None when it may go (absent counts as 0)."""
    if depth is None or (type(depth) is int and 0 <= depth <= limit):
        return None
    if type(depth) is not int or depth < 0:
        detail = f"calldepth must be a non-negative integer, not {depth!r}"
        return JsonRpcError(ErrorCode.INVALID_REQUEST, "Invalid Request", detail)
    agents = chain.split(",") if type(chain) is str and chain else []
    named = " -> ".join(agents) if agents else "(no agents named)"
    if len(agents) < depth:
        named = f"... -> {named}"
    detail = f"call depth {depth} passes the limit of {limit}: {named}"
    return JsonRpcError(ErrorCode.CALL_TOO_DEEP, CALL_TOO_DEEP_MESSAGE, detail)
