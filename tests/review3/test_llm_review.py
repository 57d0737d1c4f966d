"""A user's review of the LLM agent runtime: bugs proven against the real code.

Each test fails on the code it was written against and passes once the bug is
fixed. The only fake is the scripted OpenAI-compatible HTTP server of tests/llm.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from llm.conftest import Completion, ScriptedOpenAI

from a2a_bus import Bus, JsonRpcError
from a2a_bus.llm import AgentBuilder, AgentLoop, llm_agent_class
from a2a_bus.llm.bus_agent import LLM_FAILED, MAX_TURNS_EXCEEDED
from a2a_bus.payload import MAX_PAYLOAD_BYTES
from a2a_bus.protocol import ErrorCode

WAIT = 20.0  # upper bound on any wait; never a performance assertion


@pytest.fixture
def bus() -> Iterator[Bus]:
    with Bus.memory(prefix=f"t{uuid.uuid4().hex[:8]}", request_timeout=WAIT) as running:
        yield running


def _big_tool_loop(llm_server: ScriptedOpenAI) -> AgentLoop:
    """An agent whose one tool returns 600 kB, allowed two turns."""

    def fetch_report() -> str:
        """The full report."""
        return "x" * 600_000

    client = llm_server.client(max_retries=0)
    loop = AgentBuilder("helper").llm(client).tool(fetch_report).max_turns(2).build()
    llm_server.call_tools(("fetch_report", {}))
    llm_server.call_tools(("fetch_report", {}))
    return loop


def _assert_carried(error: JsonRpcError) -> None:
    if error.code == ErrorCode.TOO_LARGE:
        return
    assert error.code == MAX_TURNS_EXCEEDED, (error.code, error.message)
    size = len(json.dumps(error.data))
    assert size <= MAX_PAYLOAD_BYTES, f"error data is {size} bytes"


def test_max_turns_error_data_stays_within_the_payload_bound(
    bus: Bus, llm_server: ScriptedOpenAI
) -> None:
    """Bug: -32020 "Max turns exceeded" carries the whole conversation as
    ``data.checkpoint`` and nothing bounds it. Two 600 kB tool results make a 1.8 MB
    error on the in-memory bus, although the README says data is JSON of at most
    1,000,000 bytes on every transport (-32005 beyond) - so the program that works
    embedded breaks on Kafka (next test). Correct: the caller gets -32020 with data
    within the bound (e.g. a checkpoint trimmed or left out) or -32005."""
    bus.spawn(llm_agent_class(_big_tool_loop(llm_server), "helper"))
    with pytest.raises(JsonRpcError) as info:
        bus.client().request("helper", "chat", {"message": "summarise the report"})
    _assert_carried(info.value)


def test_max_turns_error_with_a_large_checkpoint_reaches_the_caller_over_kafka(
    kafka_bootstrap: str, llm_server: ScriptedOpenAI
) -> None:
    """Bug: over Kafka the same oversized -32020 answer is never delivered (the record
    exceeds Kafka's 1 MiB limit; the host checks results against the bound but not
    error data), so the caller waits out its whole request timeout and gets -32001
    "Request timed out": the answer is silently lost. Correct: the caller is answered
    with -32020 (data within the bound) or -32005, as on the in-memory bus."""
    loop = _big_tool_loop(llm_server)
    bus = Bus.kafka(
        kafka_bootstrap,
        bus_options={
            "prefix": f"t{uuid.uuid4().hex[:10]}",
            "request_timeout": 10.0,
            "heartbeat": 60.0,
        },
        metadata_max_age_ms=1000,
    )
    bus.spawn(llm_agent_class(loop, "helper"))
    with bus, pytest.raises(JsonRpcError) as info:
        bus.client().request("helper", "chat", {"message": "summarise the report"})
    _assert_carried(info.value)


def test_malformed_usage_from_the_llm_server_is_an_llm_failure(
    bus: Bus, llm_server: ScriptedOpenAI
) -> None:
    """Bug: a completion whose ``usage`` token counts are not numbers (a misbehaving
    proxy) makes ``parse_usage`` raise ValueError outside ``parse_completion``'s
    malformed-response handling. The agent crashes: the caller gets -32603 "Internal
    error" and the supervisor restarts the agent and re-runs the message, calling the
    (paid) LLM three times. Correct, as docs/llm.md promises for a failing LLM call:
    -32021 "LLM call failed" with the client's message, after one call (the client
    has max_retries=0)."""
    for _ in range(4):  # enough for every re-run the bug makes
        llm_server.respond_with(lambda body: Completion("Hello.", usage=("many", "few")))  # type: ignore[arg-type]
    loop = AgentBuilder("helper").llm(llm_server.client(max_retries=0)).build()
    bus.spawn(llm_agent_class(loop, "helper"))
    with pytest.raises(JsonRpcError) as info:
        bus.client().request("helper", "chat", {"message": "hi"})
    assert (info.value.code, info.value.message) == (LLM_FAILED, "LLM call failed")
    assert len(llm_server.requests) == 1
