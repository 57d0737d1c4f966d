"""``a2a-bus mcp`` as an MCP host runs it: a child process spoken to over stdio by the
SDK's client; over HTTP with tokens; on Kafka, following agents of other processes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
AGENTS = Path(__file__).resolve().parent / "mcp_agents.py"
WAIT = 60.0  # a guard against hangs, never a performance limit


def command_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """What the command needs of this environment (the SDK passes only a safe few
    variables on, and these on top)."""
    env = {"PYTHONPATH": str(ROOT), "A2A_REQUIRE_KNOWN_AGENTS": "true"}
    return {**env, **(extra or {})}


def mcp_command(*args: str, extra: dict[str, str] | None = None) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "a2a_bus", "mcp", *args],
        env=command_env(extra),
        cwd=str(ROOT),
    )


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if "KAFKA" not in k and not k.startswith("A2A_")}
    return subprocess.run(
        [sys.executable, "-m", "a2a_bus", *args],
        capture_output=True,
        text=True,
        timeout=WAIT,
        env={**env, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        check=False,
    )


async def test_stdio_session_lists_calls_and_streams() -> None:
    progress: list[Any] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async with Client(mcp_command(f"{AGENTS}:Calc")) as mcp:
        tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
        assert set(tools) == {"calc__add", "calc__divide", "calc__count"}
        assert tools["calc__add"].description == "Add two whole numbers."
        added = await mcp.call_tool("calc__add", {"a": 20, "b": 22})
        assert added.content[0].text == "42"  # type: ignore[union-attr]
        failed = await mcp.call_tool("calc__divide", {"a": 1, "b": 0})
        assert failed.is_error
        assert "-32010 Division by zero" in failed.content[0].text  # type: ignore[union-attr]
        counted = await mcp.call_tool("calc__count", {"to": 2}, progress_callback=on_progress)
        assert counted.structured_content == {"chunks": [1, 2]}
    assert progress == ["1", "2"]


def test_usage_errors() -> None:
    nothing = run("mcp")
    assert nothing.returncode == 2
    assert "nothing to serve" in nothing.stderr
    tokens = run("mcp", f"{AGENTS}:Calc", "--tokens", "tokens.yaml")
    assert tokens.returncode == 2
    assert "tokens apply to --http" in tokens.stderr


class Served:
    """A command in a child process; its stderr lines (the status) are read."""

    def __init__(self, *args: str, extra: dict[str, str] | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if "KAFKA" not in k}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "a2a_bus", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**env, **command_env(extra)},
            cwd=ROOT,
        )

    def wait_for(self, text: str) -> str:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if text in line:
                return line
        pytest.fail(f"no line with {text!r} (exit {self.process.wait()})")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=WAIT)


def test_http_with_tokens(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("s3cret: {agents: [calc], methods: [add]}\n")
    served = Served(
        "mcp",
        f"{AGENTS}:Calc",
        f"{AGENTS}:Billing",
        "--http",
        "127.0.0.1:0",
        "--tokens",
        str(tokens),
    )
    try:
        url = served.wait_for("MCP server listening on").split()[-1]
        assert (
            httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}).status_code == 401
        )

        async def session() -> list[str]:
            http = httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"})
            async with Client(streamable_http_client(url, http_client=http)) as mcp:
                return [tool.name for tool in (await mcp.list_tools()).tools]

        assert asyncio.run(session()) == ["calc__add"]
    finally:
        assert served.stop() == 0


@asynccontextmanager
async def kafka_session(bootstrap: str, prefix: str) -> AsyncIterator[Client]:
    extra = {"A2A_HEARTBEAT": "1"}
    async with Client(mcp_command("--kafka", bootstrap, "--prefix", prefix, extra=extra)) as mcp:
        yield mcp


async def names(mcp: Client) -> set[str]:
    return {tool.name for tool in (await mcp.list_tools(cache_mode="refresh")).tools}


@pytest.mark.kafka
async def test_on_kafka_the_tools_follow_agents_of_other_processes(kafka_bootstrap: str) -> None:
    prefix = f"mcp{uuid.uuid4().hex[:8]}"
    async with kafka_session(kafka_bootstrap, prefix) as mcp:
        assert await names(mcp) == set()
        async with mcp.listen(tools_list_changed=True) as events:
            changes = aiter(events)
            serve = Served(
                "serve",
                f"{AGENTS}:Billing",
                "--kafka",
                kafka_bootstrap,
                "--prefix",
                prefix,
                "--http",
                "127.0.0.1:0",
                extra={"A2A_HEARTBEAT": "1"},
            )
            try:
                await asyncio.to_thread(serve.wait_for, "listening on")
                async with asyncio.timeout(WAIT):
                    await anext(changes)
                assert await names(mcp) == {"billing__charge"}
                charged = await mcp.call_tool("billing__charge", {"cents": 7})
                assert charged.content[0].text == "charged 7"  # type: ignore[union-attr]
            finally:
                assert await asyncio.to_thread(serve.stop) == 0
            async with asyncio.timeout(WAIT):
                await anext(changes)  # it said goodbye
            assert await names(mcp) == set()


def stdio_session(target: str) -> subprocess.Popen[str]:
    """``a2a-bus mcp TARGET`` over pipes: stdin and stdout the session, stderr the status."""
    env = {k: v for k, v in os.environ.items() if "KAFKA" not in k}
    return subprocess.Popen(
        [sys.executable, "-m", "a2a_bus", "mcp", target],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, **command_env()},
        cwd=ROOT,
    )


def test_a_signal_ends_a_stdio_session_whose_client_keeps_stdin_open() -> None:
    process = stdio_session(f"{AGENTS}:Calc")
    assert process.stderr is not None
    try:
        for line in process.stderr:
            if "MCP session on stdin/stdout" in line:
                break
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=WAIT) == 0
        assert "a2a-bus: stopped" in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()


SESSION = [
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
]


def run_with_stdin(stdin: Any, *, closed: bool = False) -> subprocess.CompletedProcess[str]:
    """The command serving Calc on ``stdin`` (``closed``: with no stdin at all)."""
    env = {k: v for k, v in os.environ.items() if "KAFKA" not in k}
    command = [sys.executable, "-m", "a2a_bus", "mcp", f"{AGENTS}:Calc"]
    if closed:
        command = ["sh", "-c", 'exec "$@" <&-', "sh", *command]
    return subprocess.run(
        command,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=WAIT,
        env={**env, **command_env()},
        cwd=ROOT,
        check=False,
    )


def test_a_session_read_from_a_file_is_served_and_the_command_ends(tmp_path: Path) -> None:
    session = tmp_path / "session.jsonl"
    session.write_text("".join(json.dumps(message) + "\n" for message in SESSION))
    with session.open() as stdin:
        served = run_with_stdin(stdin)
    assert served.returncode == 0, served.stderr
    (answer,) = map(json.loads, served.stdout.splitlines())
    assert answer["result"]["serverInfo"]["name"] == "a2a-bus"


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_an_empty_stdin_ends_the_command_at_once(loop: str) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("A2A_EVENT_LOOP", loop)
        served = run_with_stdin(subprocess.DEVNULL)
    assert served.returncode == 0, served.stderr
    assert "a2a-bus: stopped" in served.stderr


def test_a_closed_stdin_ends_the_command_at_once() -> None:
    served = run_with_stdin(None, closed=True)
    assert served.returncode == 0, served.stderr
    assert "a2a-bus: stopped" in served.stderr


STUCK_AGENT = """
import time
from pathlib import Path

from a2a_bus import Agent, method


class Stuck(Agent):
    agent_id = "stuck"

    @method
    def wait(self, started: str) -> str:
        Path(started).write_text("started")
        time.sleep(3600)
        return "done"
"""


def stuck_session(tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    """The command serving an agent whose call never ends, with that call running."""
    agent = tmp_path / "stuck_agent.py"
    agent.write_text(STUCK_AGENT)
    started = tmp_path / "started"
    process = stdio_session(f"{agent}:Stuck")
    assert process.stdin is not None
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "stuck__wait", "arguments": {"started": str(started)}},
    }
    for message in [*SESSION, call]:
        process.stdin.write(json.dumps(message) + "\n")
    process.stdin.flush()
    deadline = time.monotonic() + WAIT
    while not started.exists():
        assert time.monotonic() < deadline, "the call did not start"
        time.sleep(0.05)
    return process, started


def test_a_stdio_session_ends_on_eof_while_a_call_runs(tmp_path: Path) -> None:
    process, _ = stuck_session(tmp_path)
    try:
        assert process.stdin is not None
        process.stdin.close()
        assert process.wait(timeout=WAIT) == 0
        assert process.stderr is not None
        assert "stopped without waiting for the calls still running" in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()


def test_a_second_signal_ends_a_stdio_session_whose_call_runs(tmp_path: Path) -> None:
    process, _ = stuck_session(tmp_path)
    try:
        process.send_signal(signal.SIGTERM)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=WAIT) == 0
    finally:
        if process.poll() is None:
            process.kill()
