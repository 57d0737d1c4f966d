"""Loop protection for LLM agents: two agents whose tools call each other stop at the limit.

``ping``'s model asks its ``call_agent`` tool to chat with ``pong``, whose model asks
to chat with ``ping`` again, and so on. Every hop is one call deeper; past the
bus's limit the call is refused with -32008 naming the chain, the tool reports it
to the model, and the answers come back up the chain. The scripted
OpenAI-compatible server is the only fake.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from a2a_bus import Bus
from a2a_bus.llm import AgentBuilder, llm_agent_class

from .conftest import Completion, ScriptedOpenAI

WAIT = 30.0  # upper bound on any wait; never a performance assertion
LIMIT = 3


def _other(body: dict[str, Any]) -> str:
    system = body["messages"][0]["content"]
    return "pong" if "You are ping" in system else "ping"


def _answer(body: dict[str, Any]) -> Completion:
    """Call the other agent, or, once a tool answered, pass its answer on."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return Completion(content=f"relayed: {last['content']}")
    arguments = {"agent": _other(body), "method": "chat", "params": {"message": "and you?"}}
    spec = {
        "id": f"call_{uuid.uuid4().hex[:10]}",
        "type": "function",
        "function": {"name": "call_agent", "arguments": json.dumps(arguments)},
    }
    return Completion(tool_calls=[spec], finish_reason="tool_calls")


@pytest.fixture
def bus(llm_server: ScriptedOpenAI) -> Iterator[Bus]:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    with Bus.memory(prefix=prefix, request_timeout=WAIT, max_call_depth=LIMIT) as running:
        for name in ("ping", "pong"):
            loop = AgentBuilder(name).llm(llm_server.client()).system_prompt(f"You are {name}.")
            agent = llm_agent_class(loop.build(), name, bus_tools=["call_agent"])
            running.spawn(agent, replicas=2)  # each holds a replica per level it is on
        yield running


def test_two_llm_agents_whose_tools_call_each_other_stop_at_the_limit(
    bus: Bus, llm_server: ScriptedOpenAI
) -> None:
    for _ in range(2 * (LIMIT + 2)):
        llm_server.respond_with(_answer)
    answer = bus.client().request("ping", "chat", {"message": "hello"}, timeout=WAIT)
    chain = "ping -> pong -> ping -> pong"
    assert "-32008" in answer and "Call chain too deep" in answer
    assert f"call depth {LIMIT + 1} passes the limit of {LIMIT}: {chain}" in answer
    # Four chats (depths 0 to 3) each asked the model twice: call, then relay.
    assert len(llm_server.requests) == 2 * (LIMIT + 1)
    assert llm_server.pending == 2
