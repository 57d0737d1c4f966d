"""The gateway commands end to end, as a user runs them: ``a2a-bus serve`` in a
subprocess, then ``call``, ``publish``, ``agents`` and ``tail`` against it."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.ports import free_ports

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ROOT / "tests" / "gateway" / "agents.py"
WAIT = 30.0  # seconds; a guard against hangs, never a performance limit


def env(extra: dict[str, str | None] | None = None, *, columns: bool = True) -> dict[str, str]:
    """The commands' environment: no Kafka, gateway or bus settings of the test run;
    ``extra`` on top (a value of None removes the variable)."""
    out = {
        k: v
        for k, v in os.environ.items()
        if "KAFKA_" not in k and not k.startswith(("A2A_GATEWAY", "A2A_PREFIX", "OPENAI_"))
    }
    out.pop("COLUMNS", None)
    if columns:
        out["COLUMNS"] = "200"  # rich tables are read at a wide console
    for name, value in (extra or {}).items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return out


class Lines:
    """A subprocess whose stdout lines arrive on a queue (read in a thread)."""

    def __init__(self, *args: str, extra: dict[str, str | None] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "a2a_bus", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env(extra, columns=False),
            cwd=ROOT,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.decode())

    def wait_for(self, text: str) -> str:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.process.poll() is not None:
                    break
                continue
            if text in line:
                return line
        stderr = self.process.stderr.read().decode() if self.process.poll() is not None else ""
        pytest.fail(f"no line with {text!r} (exit {self.process.poll()}): {stderr}")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[str, Lines]]:
    port = free_ports(1)[0]
    served = Lines("serve", f"{AGENTS}:Spec", f"{AGENTS}:Echo", "--http", f"127.0.0.1:{port}")
    served.wait_for("listening on")
    yield f"http://127.0.0.1:{port}", served
    served.stop()


def run(
    *args: str, extra: dict[str, str | None] | None = None, columns: bool = True
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "a2a_bus", *args],
        capture_output=True,
        text=True,
        timeout=WAIT * 2,
        env=env(extra, columns=columns),
        cwd=ROOT,
        check=False,
    )


@pytest.mark.parametrize(
    "command",
    ["serve", "call", "publish", "tail", "read", "agents", "demo", "mcp", "convert", "bench"],
)
def test_every_command_has_help(command: str) -> None:
    done = run(command, "--help")
    assert done.returncode == 0
    usage = done.stdout.split("\n", 1)[0]
    assert usage.startswith(f"Usage: a2a-bus {command} [OPTIONS]")
    # Arguments in upper case like their help, brackets once, flags without a value.
    arguments = usage.split("[OPTIONS]", 1)[1]
    assert arguments == arguments.upper()
    assert "[[" not in usage and "<bool>" not in done.stdout


def test_publish_help_names_the_default_type() -> None:
    assert "org.apache.eventmesh.a2a.TOPIC" in run("publish", "--help").stdout


def test_call_by_method_and_by_agent(gateway: tuple[str, Lines]) -> None:
    url, _ = gateway
    done = run("call", "subtract", "[42, 23]", "--url", url)
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout) == {"jsonrpc": "2.0", "result": 19, "id": 1}
    done = run("call", "--agent", "echo", "echo", '{"value": "hi"}', "--url", url)
    assert orjson.loads(done.stdout)["result"] == "hi"


def test_call_errors_exit_1(gateway: tuple[str, Lines]) -> None:
    url, _ = gateway
    done = run("call", "nope", "--url", url)
    assert done.returncode == 1
    assert orjson.loads(done.stdout)["error"]["code"] == -32601
    bad = run("call", "echo", "{not json", "--url", url)
    assert bad.returncode == 2
    assert "not JSON" in bad.stderr
    unreachable = run("call", "echo", "--url", f"http://127.0.0.1:{free_ports(1)[0]}")
    assert unreachable.returncode == 1
    assert "cannot reach the gateway" in unreachable.stderr
    tail_unreachable = run("tail", "news.*", "--url", f"http://127.0.0.1:{free_ports(1)[0]}")
    assert tail_unreachable.returncode == 1
    assert "cannot reach the gateway" in tail_unreachable.stderr


def test_agents_lists_cards_and_methods(gateway: tuple[str, Lines]) -> None:
    url, _ = gateway
    done = run("agents", "--url", url, "--json")
    cards = {card["id"]: card for card in orjson.loads(done.stdout)}
    assert set(cards) == {"spec", "echo"}
    assert {m["name"] for m in cards["echo"]["methods"]} == {"echo", "count"}
    table = run("agents", "--url", url)
    assert table.returncode == 0
    assert "subtract" in table.stdout and "count (response stream)" in table.stdout
    assert "2 agents" in table.stdout


def test_tail_shows_what_publish_sends(gateway: tuple[str, Lines]) -> None:
    url, _ = gateway
    tail = Lines("tail", "news.#", "--json", "--url", url)
    try:
        published: list[str] = []
        deadline = time.monotonic() + WAIT
        line = None
        # The tail subscribes asynchronously: publish until it shows one.
        while line is None and time.monotonic() < deadline:
            done = run("publish", "news.sport", '{"headline": "goal"}', "--url", url)
            assert done.returncode == 0, done.stderr
            published.append(done.stdout.strip())
            try:
                line = tail.lines.get(timeout=1.0)
            except queue.Empty:
                continue
        assert line is not None, "tail showed nothing"
        event = orjson.loads(line)
        assert event["id"] in published
        assert event["subject"] == "news.sport"
        assert event["data"] == {"headline": "goal"}
    finally:
        assert tail.stop() in (0, -signal.SIGINT, 130)


def test_call_timeout_holds_through_the_gateway(gateway: tuple[str, Lines]) -> None:
    url, _ = gateway
    slow = '{"n": 3, "pause": 0.5}'  # a streaming method: its chunks are collected
    done = run("call", "--agent", "echo", "count", slow, "--url", url, "--timeout", "0.2")
    assert done.returncode == 1, done.stdout
    response = orjson.loads(done.stdout)
    assert response["id"] == 1
    assert response["error"]["code"] == -32001
    assert response["error"]["data"] == {"timeout": 0.2}
    done = run("call", "--agent", "echo", "count", '{"n": 2}', "--url", url, "--timeout", "20")
    assert done.returncode == 0, done.stderr


def test_serve_stops_cleanly_on_sigterm() -> None:
    port = free_ports(1)[0]
    targets = (f"{AGENTS}:Spec", f"{AGENTS}:Echo", f"{AGENTS}:Secret")
    served = Lines("serve", *targets, "--replicas", "2", "--http", f"127.0.0.1:{port}")
    # Not a terminal: still one line, however long.
    banner = served.wait_for("serving")
    assert banner == (
        "a2a-bus: serving spec, echo, secret (2 replicas each) on the in-memory transport\n"
    )
    served.wait_for("listening on")
    served.process.send_signal(signal.SIGTERM)
    served.wait_for("stopped")
    assert served.process.wait(timeout=WAIT) == 0


def in_flight(url: str, route: str) -> float:
    """The gateway's count of requests being answered on ``route``, from its metrics."""
    metrics = httpx.get(f"{url}/metrics", timeout=WAIT).text
    line = f'a2a_gateway_http_in_flight{{route="{route}"}} '
    found = [row for row in metrics.splitlines() if row.startswith(line)]
    return float(found[0].removeprefix(line)) if found else 0.0


def test_a_request_still_running_at_the_end_of_the_shutdown_grace_is_answered_503() -> None:
    port = free_ports(1)[0]
    url = f"http://127.0.0.1:{port}"
    served = Lines("serve", f"{AGENTS}:Echo", "--http", f"127.0.0.1:{port}")
    served.wait_for("listening on")
    # A streaming method is collected into one answer: longer than the grace.
    slow = {"jsonrpc": "2.0", "method": "count", "params": {"n": 400, "pause": 0.05}, "id": 1}
    answers: queue.Queue[httpx.Response] = queue.Queue()
    threading.Thread(
        target=lambda: answers.put(httpx.post(f"{url}/rpc", json=slow, timeout=WAIT)),
        daemon=True,
    ).start()
    deadline = time.monotonic() + WAIT
    while in_flight(url, "/rpc") < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    served.process.send_signal(signal.SIGTERM)
    answer = answers.get(timeout=WAIT)
    assert answer.status_code == 503
    assert answer.json() == {
        "error": "the server is stopping: this request did not finish within its shutdown grace"
    }
    served.wait_for("stopped")
    assert served.process.wait(timeout=WAIT) == 0
    assert served.process.stderr is not None
    stderr = served.process.stderr.read().decode()
    assert "Traceback" not in stderr and "ERROR" not in stderr, stderr


def test_serve_refuses_what_is_not_an_agent(tmp_path: Path) -> None:
    done = run("serve", f"{AGENTS}:NOTIFIED")
    assert done.returncode == 2
    assert "not an Agent subclass" in done.stderr
    agent_file = tmp_path / "helper.agent.yaml"
    agent_file.write_text("name: helper\nmax_turns: many\n")
    done = run("serve", str(agent_file), "--http", f"127.0.0.1:{free_ports(1)[0]}")
    assert done.returncode == 2
    assert "max_turns" in done.stderr and "Traceback" not in done.stderr


def test_serve_warns_when_an_llm_agent_has_no_key() -> None:
    support = str(Path("agents") / "support.agent.yaml")
    served = Lines("serve", support, "--http", f"127.0.0.1:{free_ports(1)[0]}")
    served.wait_for("listening on")
    assert served.stop() == 0
    assert served.process.stderr is not None
    stderr = served.process.stderr.read().decode()
    assert f"warning: {support}: OPENAI_API_KEY is not set" in stderr, stderr


def test_serve_stops_on_sigint_while_a_live_view_is_open() -> None:
    # A live view (SSE) never ends by itself: the server closes it after its
    # shutdown grace instead of waiting for the client forever.
    port = free_ports(1)[0]
    served = Lines("serve", f"{AGENTS}:Echo", "--http", f"127.0.0.1:{port}")
    served.wait_for("listening on")
    url = f"http://127.0.0.1:{port}"
    tail = Lines("tail", "news.#", "--json", "--url", url)
    try:
        deadline = time.monotonic() + WAIT
        while tail.lines.empty() and time.monotonic() < deadline:  # the view is open
            assert run("publish", "news.sport", "{}", "--url", url).returncode == 0
            time.sleep(0.5)
        assert not tail.lines.empty(), "the live view never opened"
        served.process.send_signal(signal.SIGINT)
        served.wait_for("stopped")
        assert served.process.wait(timeout=WAIT) == 0
        assert served.process.stderr is not None
        assert "Traceback" not in served.process.stderr.read().decode()
        assert tail.process.wait(timeout=WAIT) != 0  # told the stream broke off
    finally:
        for process in (tail.process, served.process):
            if process.poll() is None:
                process.kill()
