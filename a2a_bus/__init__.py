"""a2a-bus: an actor-based multi-agent collaboration bus."""

from a2a_bus.agent import Agent, method, subscribe
from a2a_bus.bus import Bus
from a2a_bus.client import AsyncClient, Call, Client, EventPage
from a2a_bus.correlation import ReplyStream
from a2a_bus.errors import BusStopped, JsonRpcError, StreamError
from a2a_bus.supervisor import RestartPolicy

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AsyncClient",
    "Bus",
    "BusStopped",
    "Call",
    "Client",
    "EventPage",
    "JsonRpcError",
    "ReplyStream",
    "RestartPolicy",
    "StreamError",
    "__version__",
    "method",
    "subscribe",
]
