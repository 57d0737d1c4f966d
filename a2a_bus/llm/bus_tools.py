"""Tools that are bus operations: publish an event, read a batch of a topic's
retained events, call another agent's method.

They reach the bus through :attr:`ToolContext.bus`, which an LLM agent hosted on
a bus (:mod:`a2a_bus.llm.bus_agent`) fills in for every run; outside a bus they
answer the model with an error instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from a2a_bus.core.routing import validate_subject
from a2a_bus.llm.tools import AgentTool, FunctionTool, ToolContext
from a2a_bus.protocol import JsonRpcError, to_structured

#: Most events one ``read_topic`` call hands the model (each lands in its context).
MAX_READ = 100


class BusUnavailable(RuntimeError):
    """A bus tool ran in an agent that is not hosted on a bus."""


class RemoteCallError(RuntimeError):
    """The called agent answered with a JSON-RPC error (the model reads the message)."""


def _client(context: ToolContext) -> Any:
    client = context.bus
    if client is None:
        raise BusUnavailable("this agent is not running on a bus")
    return client


async def publish(topic: str, data: Any, context: ToolContext) -> dict[str, str]:
    """Publish an event on a bus topic; every subscriber of the topic receives it.

    Args:
        topic: dot-separated subject, e.g. orders.created
        data: the event payload (any JSON value)
    """
    client = _client(context)
    # Checked here too, so the model gets the routing error's own wording.
    validate_subject(topic)
    event_id = await client.aio.publish(topic, data)
    return {"published": event_id, "topic": topic}


async def read_topic(
    topic: str,
    context: ToolContext,
    limit: int = 20,
    cursor: str | None = None,
    newest: bool = False,
) -> dict[str, Any]:
    """Read events published on a bus topic, oldest first; reading changes nothing.

    Args:
        topic: dot-separated subject, e.g. orders.created (no wildcards)
        limit: the most events to return, 1 to 100
        cursor: the cursor an earlier read of this topic returned, to read the events after it
        newest: true for the latest events instead of the oldest (without a cursor)
    """
    client = _client(context)
    if not 1 <= limit <= MAX_READ:
        raise ValueError(f"limit must be from 1 to {MAX_READ}, not {limit}")
    page = await client.aio.read(topic, limit=limit, cursor=cursor, newest=newest)
    # An empty page means the topic holds nothing more for now.
    return {
        "topic": topic,
        "events": [to_structured(event) for event in page.events],
        "cursor": page.cursor,
        "undecodable": page.undecodable,
    }


async def call_agent(
    agent: str, method: str, context: ToolContext, params: dict[str, Any] | list[Any] | None = None
) -> Any:
    """Call a method of another agent on the bus and return its result.

    Args:
        agent: the id of the agent to call
        method: the JSON-RPC method name
        params: the method's parameters (an object by name, or an array in order)
    """
    client = _client(context)
    if agent == context.bus_agent_id:
        # One replica runs one message at a time: it would wait for itself until the timeout.
        raise ValueError(f"agent {agent!r} cannot call itself over the bus")
    try:
        return await client.aio.request(agent, method, params)
    except JsonRpcError as exc:
        raise RemoteCallError(f"{agent}.{method} answered error {exc}") from None


#: Bus tool name -> function; ``bus_tools: true`` in an agent file means all of them.
BUS_TOOLS: dict[str, Callable[..., Any]] = {
    "publish": publish,
    "call_agent": call_agent,
    "read_topic": read_topic,
}


def check_bus_tool(name: object) -> str:
    """``name`` when it names a bus tool, else ``ValueError`` (also for no string)."""
    if not isinstance(name, str) or name not in BUS_TOOLS:
        raise ValueError(f"unknown bus tool {name!r}; expected one of {', '.join(BUS_TOOLS)}")
    return name


def bus_tools(names: Iterable[str]) -> list[AgentTool]:
    """The bus tools called ``names`` (see :data:`BUS_TOOLS`)."""
    made: list[AgentTool] = []
    for name in names:
        check_bus_tool(name)
        # Async functions run on the agent's loop; the bus client hands over to the bus loop.
        made.append(FunctionTool(BUS_TOOLS[name], name=name))
    return made
