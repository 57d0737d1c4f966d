"""A scripted OpenAI-compatible chat-completions server: the only fake LLM of the suite.

It is a real HTTP server on 127.0.0.1 (stdlib ``http.server`` in a thread). Tests
queue what it answers next; each answer is rendered as plain JSON or, when the
request asks for ``stream``, as Server-Sent Events with ``data:`` chunks
(content split into pieces, tool-call deltas with arguments in fragments and
calls interleaved, a usage chunk, then ``[DONE]``). It can also answer with
errors, 429 rate limits with ``Retry-After``, 500s, drop the connection, send a
body as given (malformed answers, streams cut short) or trickle bytes without end.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from a2a_bus.llm import OpenAIClient
from a2a_bus.llm.memory import ConversationStore, InMemoryStore, RedisStore, SqliteStore


@dataclass
class Completion:
    content: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: tuple[int, int] = (11, 7)


@dataclass
class Failure:
    status: int
    message: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)


class Disconnect:
    """Close the connection without answering."""


@dataclass
class Raw:
    """Answer 200 with this body as is, then close the connection (no length: the
    body ends where the connection does, as a stream cut short does)."""

    body: str
    content_type: str = "application/json"


@dataclass
class Trickle:
    """Answer 200 and then one filler byte (a space, or an SSE comment line for a
    stream) every ``interval`` seconds: never enough to finish, never idle long enough
    for a read timeout. Stops when the client goes away, or after ``lasting`` seconds."""

    interval: float = 0.05
    lasting: float = 30.0


Answer = Completion | Failure | Disconnect | Raw | Trickle


def sse(*chunks: Any, done: bool = True) -> str:
    """A Server-Sent Events body of these ``data`` chunks (JSON values, or text as is)."""
    events = [f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n" for c in chunks]
    return "".join(events) + ("data: [DONE]\n\n" if done else "")


class ScriptedOpenAI:
    """State of the scripted server: the queue of answers and the requests seen."""

    def __init__(self) -> None:
        self.base_url = ""
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.clients: list[OpenAIClient] = []
        self._answers: deque[Answer | Callable[[dict[str, Any]], Answer]] = deque()
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.headers.clear()
            self._answers.clear()

    # -- scripting -------------------------------------------------------------

    def reply(
        self, content: str, *, finish_reason: str = "stop", usage: tuple[int, int] = (11, 7)
    ) -> None:
        self._answers.append(Completion(content, [], finish_reason, usage))

    def call_tools(self, *calls: tuple[str, Any], content: str | None = None) -> list[str]:
        """Queue one answer with several tool calls; ``args`` may be a dict or raw text."""
        specs = []
        for name, args in calls:
            call_id = f"call_{uuid.uuid4().hex[:10]}"
            text = args if isinstance(args, str) else json.dumps(args)
            specs.append(
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}
            )
        self._answers.append(Completion(content, specs, "tool_calls"))
        return [spec["id"] for spec in specs]

    def fail(self, status: int, message: str = "scripted failure", **headers: str) -> None:
        self._answers.append(
            Failure(status, message, {k.replace("_", "-"): v for k, v in headers.items()})
        )

    def disconnect(self) -> None:
        self._answers.append(Disconnect())

    def send_raw(self, body: str, content_type: str = "application/json") -> None:
        self._answers.append(Raw(body, content_type))

    def trickle(self) -> None:
        self._answers.append(Trickle())

    def respond_with(self, func: Callable[[dict[str, Any]], Answer]) -> None:
        """Queue a function of the request body (for answers that depend on it)."""
        self._answers.append(func)

    def next_answer(self, body: dict[str, Any], headers: dict[str, str]) -> Answer:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            if not self._answers:
                return Failure(400, "scripted server: no answer queued")
            answer = self._answers.popleft()
        return answer(body) if callable(answer) else answer

    @property
    def pending(self) -> int:
        return len(self._answers)

    def client(self, **options: Any) -> OpenAIClient:
        options.setdefault("backoff", 0.01)
        options.setdefault("max_backoff", 0.05)
        client = OpenAIClient(
            "scripted-model", base_url=self.base_url, api_key="test-key", timeout=10.0, **options
        )
        self.clients.append(client)  # closed when the test ends
        return client


def _message(answer: Completion) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.content}
    if answer.tool_calls:
        message["tool_calls"] = answer.tool_calls
    return message


def _usage(answer: Completion) -> dict[str, int]:
    prompt, completion = answer.usage
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _sse_chunks(answer: Completion, model: str, include_usage: bool) -> Iterator[dict[str, Any]]:
    base = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    if answer.content:
        for piece in _pieces(answer.content, 3):
            yield chunk({"content": piece})
    # Tool calls: a header delta per call, then argument fragments interleaved across calls.
    for index, call in enumerate(answer.tool_calls):
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["function"]["name"], "arguments": ""},
                    }
                ]
            }
        )
    fragments = [_pieces(c["function"]["arguments"], 4) for c in answer.tool_calls]
    for step in range(max((len(f) for f in fragments), default=0)):
        for index, parts in enumerate(fragments):
            if step < len(parts):
                yield chunk(
                    {"tool_calls": [{"index": index, "function": {"arguments": parts[step]}}]}
                )
    yield chunk({}, answer.finish_reason or ("tool_calls" if answer.tool_calls else "stop"))
    if include_usage:
        yield {**base, "choices": [], "usage": _usage(answer)}


def _handler(state: ScriptedOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send_json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
            body = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def _send_raw(self, answer: Raw) -> None:
            self.send_response(200)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(answer.body.encode())
            self.close_connection = True

        def _trickle(self, answer: Trickle, stream: bool) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream" if stream else "application/json")
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            filler = b":\n" if stream else b" "
            self.close_connection = True
            stop = time.monotonic() + answer.lasting
            try:
                while time.monotonic() < stop:
                    self.wfile.write(filler)
                    self.wfile.flush()
                    time.sleep(answer.interval)
            except OSError:
                pass  # the client gave up: what the trickle waits for

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send_json(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                body = json.loads(raw)
            except ValueError:
                self._send_json(400, {"error": {"message": "request body is not JSON"}})
                return
            answer = state.next_answer(body, {k.lower(): v for k, v in self.headers.items()})
            if isinstance(answer, Disconnect):
                self.close_connection = True
                self.connection.shutdown(2)
                return
            if isinstance(answer, Raw):
                self._send_raw(answer)
                return
            if isinstance(answer, Trickle):
                self._trickle(answer, bool(body.get("stream")))
                return
            if isinstance(answer, Failure):
                self._send_json(
                    answer.status,
                    {"error": {"message": answer.message, "type": "scripted"}},
                    answer.headers,
                )
                return
            model = str(body.get("model", ""))
            if not body.get("stream"):
                self._send_json(
                    200,
                    {
                        "id": "chatcmpl-scripted",
                        "object": "chat.completion",
                        "model": model,
                        "choices": [
                            {
                                "index": 0,
                                "message": _message(answer),
                                "finish_reason": answer.finish_reason
                                or ("tool_calls" if answer.tool_calls else "stop"),
                            }
                        ],
                        "usage": _usage(answer),
                    },
                )
                return
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            events = [
                f"data: {json.dumps(c)}\n\n" for c in _sse_chunks(answer, model, include_usage)
            ]
            events.append("data: [DONE]\n\n")
            for event in events:
                data = event.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

    return Handler


@pytest.fixture(scope="session")
def _scripted_server() -> Iterator[ScriptedOpenAI]:
    state = ScriptedOpenAI()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="scripted-openai", daemon=True)
    thread.start()
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture
def llm_server(_scripted_server: ScriptedOpenAI) -> Iterator[ScriptedOpenAI]:
    """The scripted server, emptied for this test."""
    _scripted_server.reset()
    yield _scripted_server
    while _scripted_server.clients:
        _scripted_server.clients.pop().close()
    _scripted_server.reset()


@pytest.fixture
def llm_client(llm_server: ScriptedOpenAI) -> Iterator[OpenAIClient]:
    client = llm_server.client()
    yield client
    client.close()


@pytest.fixture
def llm_redis_url(request: pytest.FixtureRequest) -> str:
    """The shared ``redis_url`` fixture when present, else ``REDIS_URL``; skip without one."""
    try:
        return str(request.getfixturevalue("redis_url"))
    except pytest.FixtureLookupError:
        url = os.environ.get("REDIS_URL")
        if not url:
            if os.environ.get("A2A_REQUIRE_REDIS"):
                pytest.fail("A2A_REQUIRE_REDIS is set but REDIS_URL is not")
            pytest.skip("no Redis: set REDIS_URL (scripts/redis.sh start)")
        return url


StoreFactory = Callable[[], ConversationStore]


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Makes stores of one kind that share their data (a new instance = a restart)."""
    opened: list[ConversationStore] = []
    kind = request.param
    if kind == "memory":
        shared = InMemoryStore()

        def make() -> ConversationStore:
            return shared
    elif kind == "sqlite":

        def make() -> ConversationStore:
            store = SqliteStore(tmp_path / "conversations.db")
            opened.append(store)
            return store
    else:
        url = request.getfixturevalue("llm_redis_url")
        prefix = f"a2a-test:{uuid.uuid4().hex}:"

        def make() -> ConversationStore:
            store = RedisStore(url, prefix=prefix)
            opened.append(store)
            return store

    yield make
    for store in opened:
        if isinstance(store, RedisStore):
            for key in store.keys():  # noqa: SIM118 - a store, not a dict
                store.delete(key)
        store.close()
