"""What every part of one bus shares: where messages go, and how they are counted."""

from __future__ import annotations

from dataclasses import dataclass, field

from a2a_bus.core.metrics import Metrics
from a2a_bus.core.routing import Topics
from a2a_bus.protocol import DEFAULT_MAX_CALL_DEPTH, Adaptor
from a2a_bus.runtime.tracing import Tracing
from a2a_bus.transport.base import Transport


@dataclass(frozen=True, slots=True)
class BusContext:
    """The transport, topic names, adaptor, counters and identity of one bus (one node)."""

    transport: Transport
    topics: Topics
    adaptor: Adaptor
    metrics: Metrics
    #: This process's id on the bus: its reply topic and its events' source.
    node: str
    #: Seconds a request waits for its answer unless the caller says otherwise.
    request_timeout: float = 30.0
    #: The deepest chain of agent calls a message may be sent at (``calldepth``).
    max_call_depth: int = DEFAULT_MAX_CALL_DEPTH
    #: The spans of this bus (none until an OpenTelemetry SDK records them).
    tracing: Tracing = field(default_factory=Tracing)
    #: ``a2a-bus/<node>``: the ``source`` of the events this node makes.
    source: str = field(init=False)
    #: Where answers for this node's callers (and cancels for its streams) arrive.
    reply_topic: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", f"a2a-bus/{self.node}")
        object.__setattr__(self, "reply_topic", self.topics.reply(self.node))

    @property
    def messaging_system(self) -> str:
        """``messaging.system`` of this bus's spans."""
        return "memory" if self.transport.in_process else "kafka"

    @property
    def local_replies(self) -> bool:
        """Answers for this process's callers may skip the reply topic (the transport
        is in-process: nothing else could read it)."""
        return self.transport.in_process
