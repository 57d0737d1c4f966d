"""OpenAIClient against the scripted chat-completions server: chat, streaming, retries."""

from __future__ import annotations

import asyncio
import json

import pytest

from a2a_bus.llm import ChatResponse, LlmError, LlmMessage, OpenAIClient, ToolDefinition
from a2a_bus.llm.openai_client import RetryInfo

from .conftest import ScriptedOpenAI, sse

pytestmark = pytest.mark.timeout(60)

WEATHER = ToolDefinition(
    "weather",
    "Weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
HELLO = [LlmMessage.user("hello")]


def test_chat_returns_content_usage_and_sends_the_request(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    llm_server.reply("Hi there!", usage=(21, 4))
    response = llm_client.chat(HELLO, [WEATHER], temperature=0.3)
    assert response.content == "Hi there!"
    assert response.finish_reason == "stop"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (21, 4)
    assert response.model == "scripted-model"
    sent = llm_server.requests[0]
    assert sent["messages"] == [{"role": "user", "content": "hello"}]
    assert sent["tools"][0]["function"]["name"] == "weather"
    assert sent["temperature"] == 0.3
    assert "stream" not in sent
    assert llm_server.headers[0]["authorization"] == "Bearer test-key"


def test_chat_keeps_every_tool_call_of_one_turn(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    ids = llm_server.call_tools(
        ("weather", {"city": "Paris"}), ("weather", {"city": "Oslo"}), ("time", {})
    )
    response = llm_client.chat(HELLO, [WEATHER])
    assert [c.id for c in response.tool_calls] == ids
    assert [json.loads(c.arguments) for c in response.tool_calls] == [
        {"city": "Paris"},
        {"city": "Oslo"},
        {},
    ]
    assert response.finish_reason == "tool_calls"


def test_stream_yields_tokens_then_the_assembled_response(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    llm_server.reply("The quick brown fox", usage=(9, 5))
    items = list(llm_client.stream(HELLO))
    tokens = [item for item in items if isinstance(item, str)]
    final = items[-1]
    assert len(tokens) > 1 and "".join(tokens) == "The quick brown fox"
    assert isinstance(final, ChatResponse) and final.content == "The quick brown fox"
    assert final.usage.total_tokens == 14
    assert llm_server.requests[0]["stream"] is True
    assert llm_server.requests[0]["stream_options"] == {"include_usage": True}


def test_stream_assembles_interleaved_tool_call_deltas(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    args = [{"city": "Reykjavik", "units": "metric"}, {"city": "Lima"}]
    ids = llm_server.call_tools(("weather", args[0]), ("weather", args[1]), content="Checking")
    final = list(llm_client.stream(HELLO, [WEATHER]))[-1]
    assert isinstance(final, ChatResponse)
    assert [c.id for c in final.tool_calls] == ids
    assert [json.loads(c.arguments) for c in final.tool_calls] == args
    assert final.content == "Checking" and final.finish_reason == "tool_calls"


async def test_async_chat_and_stream(llm_server: ScriptedOpenAI, llm_client: OpenAIClient) -> None:
    llm_server.reply("async answer")
    ids = llm_server.call_tools(("weather", {"city": "Rome"}))
    response = await asyncio.wait_for(llm_client.achat(HELLO), 10)
    assert response.content == "async answer"
    items = [item async for item in llm_client.astream(HELLO, [WEATHER])]
    final = items[-1]
    assert isinstance(final, ChatResponse) and [c.id for c in final.tool_calls] == ids
    await llm_client.aclose()


def test_rate_limit_is_retried_after_the_requested_wait(llm_server: ScriptedOpenAI) -> None:
    retries: list[RetryInfo] = []
    client = llm_server.client(on_retry=retries.append)
    llm_server.fail(429, "slow down", retry_after_ms="120")
    llm_server.fail(429, "slow down", Retry_After="1")
    llm_server.reply("finally")
    assert client.chat(HELLO).content == "finally"
    assert len(llm_server.requests) == 3
    assert [(r.status, r.delay) for r in retries] == [(429, 0.12), (429, 1.0)]


def test_server_errors_and_dropped_connections_are_retried(llm_server: ScriptedOpenAI) -> None:
    retries: list[RetryInfo] = []
    client = llm_server.client(on_retry=retries.append)
    llm_server.fail(500, "boom")
    llm_server.disconnect()
    llm_server.fail(503, "busy")
    llm_server.reply("recovered")
    assert client.chat(HELLO).content == "recovered"
    assert [r.status for r in retries] == [500, None, 503]
    assert "cannot reach" in retries[1].reason


def test_stream_open_is_retried_too(llm_server: ScriptedOpenAI) -> None:
    client = llm_server.client()
    llm_server.fail(502, "bad gateway")
    llm_server.reply("streamed after retry")
    final = list(client.stream(HELLO))[-1]
    assert isinstance(final, ChatResponse) and final.content == "streamed after retry"
    assert len(llm_server.requests) == 2


def test_retries_are_bounded(llm_server: ScriptedOpenAI) -> None:
    client = llm_server.client(max_retries=2)
    for _ in range(3):
        llm_server.fail(500, "still down")
    with pytest.raises(LlmError, match="HTTP 500: still down") as info:
        client.chat(HELLO)
    assert info.value.status == 500
    assert len(llm_server.requests) == 3


def test_client_errors_are_not_retried_and_say_why(llm_server: ScriptedOpenAI) -> None:
    client = llm_server.client()
    llm_server.fail(400, "model 'nope' does not exist")
    llm_server.reply("never reached")
    with pytest.raises(LlmError, match="HTTP 400: model 'nope' does not exist"):
        client.chat(HELLO)
    assert len(llm_server.requests) == 1


def _ask(client: OpenAIClient, streamed: bool) -> ChatResponse:
    """One call's answer, plain or streamed."""
    if not streamed:
        return client.chat(HELLO)
    final = list(client.stream(HELLO))[-1]
    assert isinstance(final, ChatResponse)
    return final


@pytest.mark.parametrize("streamed", [False, True], ids=["chat", "stream"])
def test_a_call_ends_at_its_deadline_while_the_server_trickles(
    llm_server: ScriptedOpenAI, streamed: bool
) -> None:
    """A byte now and then keeps every read within ``timeout``: only the call's
    deadline ends it."""
    client = llm_server.client(deadline=0.5)
    llm_server.trickle()
    with pytest.raises(LlmError, match=r"longer than its deadline of 0\.5s"):
        _ask(client, streamed)


def test_retries_and_their_waits_stay_within_the_deadline(llm_server: ScriptedOpenAI) -> None:
    client = llm_server.client(deadline=0.5, max_retries=1000, backoff=0.1, max_backoff=0.1)
    for _ in range(100):
        llm_server.fail(503, "busy")
    with pytest.raises(LlmError, match="deadline"):
        client.chat(HELLO)


@pytest.mark.parametrize("streamed", [False, True], ids=["chat", "stream"])
def test_a_retry_after_beyond_the_deadline_fails_at_once(
    llm_server: ScriptedOpenAI, streamed: bool
) -> None:
    retries: list[RetryInfo] = []
    client = llm_server.client(deadline=30.0, on_retry=retries.append)
    llm_server.fail(429, "slow down", Retry_After="100000")
    llm_server.reply("never reached")
    with pytest.raises(LlmError, match=r"slow down.*would pass the call's deadline") as info:
        _ask(client, streamed)
    assert info.value.status == 429
    assert retries == [] and len(llm_server.requests) == 1


def _delta(content: str, finish_reason: str | None = None) -> dict[str, object]:
    return {
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish_reason}]
    }


def test_a_stream_is_whole_only_when_it_ends_with_a_finish_reason_or_done(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    """Some servers end without ``[DONE]`` but with a ``finish_reason``; a stream
    with neither broke off, and its part of an answer is no answer."""
    endings = [
        sse(_delta("Hel"), _delta("lo", "length"), done=False),
        sse(_delta("Hel"), _delta("lo")),
        sse(_delta("Hel"), _delta("lo"), done=False),
    ]
    for body in endings:
        llm_server.send_raw(body, "text/event-stream")
    assert _ask(llm_client, streamed=True).finish_reason == "length"
    assert _ask(llm_client, streamed=True).content == "Hello"
    with pytest.raises(LlmError, match=r"ended before a finish_reason or \[DONE\]"):
        _ask(llm_client, streamed=True)


def test_unreachable_server_gives_a_clear_error() -> None:
    client = OpenAIClient("m", base_url="http://127.0.0.1:9/v1", max_retries=1, backoff=0.01)
    with pytest.raises(LlmError, match="cannot reach the LLM server"):
        client.chat(HELLO)


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1/")
    monkeypatch.setenv("A2A_LLM_MODEL", "llama3.2")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = OpenAIClient()
    assert (client.base_url, client.model) == ("http://localhost:11434/v1", "llama3.2")
    assert "Authorization" not in client._headers
