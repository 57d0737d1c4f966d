"""a2a-bus: an actor-based multi-agent collaboration bus.

The public API is loaded on first use, not when the package is imported: a
command of the ``a2a-bus`` CLI can then catch Ctrl-C while the bus's modules load.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, for type checkers (loaded by __getattr__ at run time)
    from a2a_bus.bus import Bus
    from a2a_bus.client import AsyncClient, Call, Client, EventPage
    from a2a_bus.core.errors import StreamError
    from a2a_bus.core.reply_stream import ReplyStream
    from a2a_bus.hosting.agent import Agent, method, subscribe
    from a2a_bus.hosting.supervisor import RestartPolicy
    from a2a_bus.protocol import InputRequired, JsonRpcError
    from a2a_bus.runtime.portal import BusStopped

__version__ = "0.1.0"

#: Each public name and the module that defines it.
_EXPORTS = {
    "Agent": "a2a_bus.hosting.agent",
    "AsyncClient": "a2a_bus.client",
    "Bus": "a2a_bus.bus",
    "BusStopped": "a2a_bus.runtime.portal",
    "Call": "a2a_bus.client",
    "Client": "a2a_bus.client",
    "EventPage": "a2a_bus.client",
    "InputRequired": "a2a_bus.protocol",
    "JsonRpcError": "a2a_bus.protocol",
    "ReplyStream": "a2a_bus.core.reply_stream",
    "RestartPolicy": "a2a_bus.hosting.supervisor",
    "StreamError": "a2a_bus.core.errors",
    "method": "a2a_bus.hosting.agent",
    "subscribe": "a2a_bus.hosting.agent",
}

__all__ = [
    "Agent",
    "AsyncClient",
    "Bus",
    "BusStopped",
    "Call",
    "Client",
    "EventPage",
    "InputRequired",
    "JsonRpcError",
    "ReplyStream",
    "RestartPolicy",
    "StreamError",
    "__version__",
    "method",
    "subscribe",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'a2a_bus' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
