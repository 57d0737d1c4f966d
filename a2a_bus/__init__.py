"""a2a-bus: an actor-based multi-agent collaboration bus."""

from a2a_bus.bus import Bus
from a2a_bus.client import AsyncClient, Call, Client, EventPage
from a2a_bus.core.errors import StreamError
from a2a_bus.core.reply_stream import ReplyStream
from a2a_bus.hosting.agent import Agent, method, subscribe
from a2a_bus.hosting.supervisor import RestartPolicy
from a2a_bus.protocol import InputRequired, JsonRpcError
from a2a_bus.runtime.portal import BusStopped

__version__ = "0.1.0"

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
