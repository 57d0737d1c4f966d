"""The bus as an MCP server over streamable HTTP, called with the SDK's own client:
a real bus (in-memory), the server's HTTP app under uvicorn, tokens of the gateway."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from a2a_bus import Agent, Bus, JsonRpcError, method
from a2a_bus.gateway.auth import Access, Authenticator
from a2a_bus.mcp import BusMcpServer, catalog, http_app
from a2a_bus.mcp.server import _Lines

WAIT = 30.0  # upper bound on any wait; never a performance assertion


class Calc(Agent):
    """Arithmetic."""

    agent_id = "calc"

    @method
    def add(self, a: int, b: int) -> int:
        """Add two whole numbers."""
        return a + b

    @method
    def divide(self, a: float, b: float) -> float:
        """a / b"""
        if b == 0:
            raise JsonRpcError(-32010, "Division by zero", {"a": a})
        return a / b

    @method
    def lookup(self, key: str) -> dict[str, Any]:
        return {"key": key, "found": True}

    @method("count/up")
    def count(self, to: int) -> Iterator[int]:
        """Counts from 1."""
        yield from range(1, to + 1)

    @method
    def total(self, numbers: Iterator[int]) -> int:
        return sum(numbers)


class Billing(Agent):
    agent_id = "billing"

    @method
    def charge(self, cents: int) -> str:
        """Charge a card."""
        return f"charged {cents}"


@asynccontextmanager
async def serving(bus: Bus, tokens: dict[str, Access] | None = None) -> AsyncIterator[str]:
    """The bus's MCP server on a free port, watching every 0.1 s; its URL."""
    server = BusMcpServer(
        bus.async_client(), authenticator=Authenticator(tokens or {}), interval=0.1
    )
    await server.refresh()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    web = uvicorn.Server(uvicorn.Config(http_app(server), log_level="warning", lifespan="on"))
    task = asyncio.create_task(web.serve(sockets=[sock]))
    watcher = asyncio.create_task(server.watch())
    try:
        while not web.started:
            assert not task.done(), "the server did not start"
            await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        server.close()
        watcher.cancel()
        web.should_exit = True
        await task
        sock.close()


def client(url: str, token: str | None = None, **options: Any) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers))
    return Client(transport, **options)


@pytest.fixture
async def bus() -> AsyncIterator[Bus]:
    async with Bus.memory(prefix=f"t{uuid.uuid4().hex[:8]}", request_timeout=WAIT) as running:
        await running.aspawn(Calc)
        yield running


async def test_methods_are_tools_with_their_schemas_and_calls_return_results(bus: Bus) -> None:
    async with serving(bus) as url, client(url) as mcp:
        listed = {tool.name: tool for tool in (await mcp.list_tools()).tools}
        # A method reading a caller's stream (total) has no MCP form.
        assert set(listed) == {"calc__add", "calc__divide", "calc__lookup", "calc__count_up"}
        add = listed["calc__add"]
        assert add.description == "Add two whole numbers."
        assert add.input_schema["required"] == ["a", "b"]
        assert add.input_schema["properties"]["a"] == {"type": "integer"}
        assert "Streams its results" in (listed["calc__count_up"].description or "")

        result = await mcp.call_tool("calc__add", {"a": 2, "b": 3})
        assert (result.is_error, result.content[0].text) == (False, "5")  # type: ignore[union-attr]
        found = await mcp.call_tool("calc__lookup", {"key": "k"})
        assert found.structured_content == {"key": "k", "found": True}

        failed = await mcp.call_tool("calc__divide", {"a": 1, "b": 0})
        assert failed.is_error
        text = failed.content[0].text  # type: ignore[union-attr]
        assert text == 'calc.divide answered error -32010 Division by zero: {"a":1}'
        bad = await mcp.call_tool("calc__add", {"a": "two"})
        assert bad.is_error
        assert "-32602" in bad.content[0].text  # type: ignore[union-attr]


async def test_a_streaming_method_reports_chunks_as_progress_and_returns_them_all(
    bus: Bus,
) -> None:
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async with serving(bus) as url, client(url) as mcp:
        result = await mcp.call_tool("calc__count_up", {"to": 3}, progress_callback=on_progress)
    assert progress == [(1, "1"), (2, "2"), (3, "3")]
    assert result.structured_content == {"chunks": [1, 2, 3]}


async def test_an_unknown_tool_is_a_protocol_error(bus: Bus) -> None:
    async with serving(bus) as url, client(url) as mcp:
        with pytest.raises(Exception, match="Unknown tool: calc__nothing"):
            await mcp.call_tool("calc__nothing", {})


async def wait_for(predicate: Any) -> None:
    async with asyncio.timeout(WAIT):
        while not await predicate():
            await asyncio.sleep(0.05)


async def test_the_tool_list_follows_agents_joining_on_both_protocol_eras(bus: Bus) -> None:
    legacy_heard = asyncio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            legacy_heard.set()

    async with (
        serving(bus) as url,
        client(url) as modern,
        client(url, mode="legacy", message_handler=on_message) as legacy,
    ):
        assert modern.protocol_version == "2026-07-28"
        assert legacy.protocol_version != "2026-07-28"
        await legacy.list_tools()  # a handshake-era client is told once it listed
        async with modern.listen(tools_list_changed=True) as events:
            await bus.aspawn(Billing)
            async with asyncio.timeout(WAIT):
                event = await anext(aiter(events))
            assert type(event).__name__ == "ToolsListChanged"
        async with asyncio.timeout(WAIT):
            await legacy_heard.wait()
        names = [t.name for t in (await modern.list_tools(cache_mode="refresh")).tools]
        assert "billing__charge" in names
        assert (await legacy.call_tool("billing__charge", {"cents": 5})).content[
            0
        ].text == "charged 5"  # type: ignore[union-attr]


async def test_tokens_and_allow_lists_of_the_gateway_apply(bus: Bus) -> None:
    await bus.aspawn(Billing)
    tokens = {
        "full": Access(name="full"),
        "calc-only": Access(name="calc", agents=("calc",), methods=("add", "count/*")),
    }
    async with serving(bus, tokens) as url:
        async with httpx.AsyncClient() as plain:
            refused = await plain.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
        async with client(url, "full") as mcp:
            names = {t.name for t in (await mcp.list_tools()).tools}
            assert {"calc__add", "billing__charge"} <= names
        async with client(url, "calc-only") as mcp:
            names = {t.name for t in (await mcp.list_tools()).tools}
            assert names == {"calc__add", "calc__count_up"}
            with pytest.raises(Exception, match="Unknown tool: billing__charge"):
                await mcp.call_tool("billing__charge", {"cents": 1})
            assert not (await mcp.call_tool("calc__add", {"a": 1, "b": 1})).is_error


HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def post(
    http: httpx.AsyncClient, url: str, token: str, message: dict[str, Any], session: str | None
) -> httpx.Response:
    """One handshake-era JSON-RPC message, sent with ``token`` on ``session``."""
    headers = {**HEADERS, "Authorization": f"Bearer {token}"}
    if session is not None:
        headers["Mcp-Session-Id"] = session
    return await http.post(url, json=message, headers=headers)


async def test_a_session_answers_only_the_token_that_opened_it(bus: Bus) -> None:
    tokens = {"alice-secret": Access(name="team"), "bob-secret": Access(name="team")}
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"},
        },
    }
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    async with serving(bus, tokens) as url, httpx.AsyncClient(timeout=WAIT) as http:
        opened = await post(http, url, "alice-secret", hello, None)
        assert opened.status_code == 200
        session = opened.headers["mcp-session-id"]
        ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await post(http, url, "alice-secret", ready, session)).status_code == 202
        # Another valid token (even one of the same name) cannot use it: to that token
        # the session does not exist.
        hijack = await post(http, url, "bob-secret", listing, session)
        assert hijack.status_code == 404
        assert "calc__add" not in hijack.text
        owner = await post(http, url, "alice-secret", listing, session)
        assert owner.status_code == 200
        assert "calc__add" in owner.text


def test_catalog_names_tools_for_every_model_host() -> None:
    entries = [
        {"agent": "support", "name": "chat/stream", "streaming": "response", "params": {}},
        {"agent": "billing.v2", "name": "charge", "description": "Charge."},
        {"agent": "billing_v2", "name": "charge"},  # same tool name: the first wins
        {"agent": "calc", "name": "sum", "streaming": "request"},
        {"agent": "x" * 40, "name": "y" * 30},  # longer than 64 characters
    ]
    tools = catalog(entries)
    assert list(tools) == ["support__chat_stream", "billing_v2__charge"]
    stream = tools["support__chat_stream"]
    assert (stream.agent, stream.method, stream.streams) == ("support", "chat/stream", True)
    assert stream.input_schema == {"type": "object", "properties": {}}
    assert tools["billing_v2__charge"].agent == "billing.v2"


class Talker(Agent):
    """Says a lot."""

    agent_id = "talker"

    @method
    def words(self, size: int, count: int) -> Iterator[str]:
        """``count`` words of ``size`` letters."""
        for _ in range(count):
            yield "w" * size


async def test_a_stream_larger_than_one_message_is_a_tool_error_saying_so(bus: Bus) -> None:
    await bus.aspawn(Talker)
    async with serving(bus) as url, client(url) as mcp:
        small = await mcp.call_tool("talker__words", {"size": 10, "count": 3})
        assert small.structured_content == {"chunks": ["w" * 10] * 3}
        # 150 chunks of 10,000 letters: more than the 1,000,000 bytes of a message.
        large = await mcp.call_tool("talker__words", {"size": 10_000, "count": 150})
    assert large.is_error
    text = large.content[0].text  # type: ignore[union-attr]
    assert text.startswith("talker.words answered error -32005 Response too large")
    assert "after 99 chunks" in text


async def test_http_clients_are_told_the_tool_list_changes(bus: Bus) -> None:
    async with serving(bus) as url, client(url, mode="legacy") as legacy:
        tools = legacy.server_capabilities.tools
        assert tools is not None and tools.list_changed


class Wordy(Agent):
    agent_id = "an-agent-whose-name-is-long-enough-to"

    @method("say/something/at/great/length")
    def say(self) -> str:
        return "..."


async def test_a_method_left_out_of_the_tools_is_logged_once(
    bus: Bus, caplog: pytest.LogCaptureFixture
) -> None:
    await bus.aspawn(Wordy)
    server = BusMcpServer(bus.async_client())
    for _ in range(3):
        await server.refresh()
    warnings = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert len(warnings) == 1
    assert "say/something/at/great/length left out: tool name" in warnings[0]


async def test_a_stdin_line_over_the_limit_is_skipped_and_the_next_ones_are_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reader = asyncio.StreamReader(limit=1024)
    lines = _Lines(reader, 1024)

    async def write() -> None:
        reader.feed_data(b'{"id":1}\n{"id":"huge","x":"')
        for _ in range(8):  # the long line arrives in parts, as from a pipe
            await asyncio.sleep(0)
            reader.feed_data(b"a" * 1000)
        reader.feed_data(b'"}\n' + b"b" * 3000 + b'\n{"id":2}\n{"id":3}')
        reader.feed_eof()

    writer = asyncio.create_task(write())
    async with asyncio.timeout(WAIT):
        read = [line async for line in lines]
    await writer
    assert read == ['{"id":1}\n', '{"id":2}\n', '{"id":3}']
    skipped = [r for r in caplog.records if "longer than 1024 bytes was skipped" in r.message]
    assert len(skipped) == 2
