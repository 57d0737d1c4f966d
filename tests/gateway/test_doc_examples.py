"""The curl examples of docs/gateway.md and the README work against the example agents
(``a2a-bus serve a2a_bus.examples.calculator:Calculator a2a_bus.examples.echo:Echo``):
each is replayed through the gateway app and must get an answer without an error."""

from __future__ import annotations

import re
import shlex
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import orjson
import pytest

from a2a_bus.bus import Bus
from a2a_bus.examples.calculator import Calculator
from a2a_bus.examples.echo import Echo
from a2a_bus.gateway import GatewaySettings, create_app

from .conftest import WAIT

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "docs" / "gateway.md", REPO / "README.md"]


def curl_commands(path: Path) -> list[list[str]]:
    """Every ``curl`` command of the shell blocks of ``path``, as argument lists."""
    commands = []
    for block in re.findall(r"```(?:sh|bash)\n(.*?)```", path.read_text(), re.S):
        pending = ""
        for line in re.sub(r"\\\n", " ", block).splitlines():
            pending += line + "\n"
            try:  # a quoted body may span lines: read on until the quotes close
                words = shlex.split(pending, comments=True)
            except ValueError:
                continue
            pending = ""
            if words[:1] == ["curl"]:
                commands.append(words)
    return commands


def as_request(command: list[str]) -> tuple[str, str, dict[str, str], bytes | None]:
    headers: dict[str, str] = {}
    body: bytes | None = None
    url = ""
    words = iter(command[1:])
    for word in words:
        if word == "-H":
            name, _, value = next(words).partition(":")
            headers[name.strip().lower()] = value.strip()
        elif word == "-d":
            body = next(words).encode()
        elif not word.startswith("-"):
            url = word
    path = url.removeprefix("localhost:8080")
    return ("POST" if body is not None else "GET"), path, headers, body


EXAMPLES = [
    pytest.param(command, id=f"{doc.name}:{' '.join(command)[:60]}")
    for doc in DOCS
    for command in curl_commands(doc)
    # The live view never ends, and a placeholder cursor is no cursor.
    if not re.search(r"/topics/[^ ]+/events|<cursor", " ".join(command))
]


@pytest.fixture
async def served() -> AsyncIterator[httpx.AsyncClient]:
    async with Bus.memory() as bus:
        await bus.aspawn(Calculator)
        await bus.aspawn(Echo)
        app = create_app(bus, GatewaySettings(request_timeout=WAIT))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            yield http


def test_the_docs_have_curl_examples() -> None:
    assert len(EXAMPLES) >= 10


@pytest.mark.parametrize("command", EXAMPLES)
async def test_a_curl_example_is_answered_without_error(
    served: httpx.AsyncClient, command: list[str]
) -> None:
    method, path, headers, body = as_request(command)
    response = await served.request(method, path, headers=headers, content=body)
    assert response.status_code < 400, response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        assert "event: error" not in response.text
        assert "event: end" in response.text
        return
    answers = response.json() if response.content else []
    for answer in answers if isinstance(answers, list) else [answers]:
        assert "error" not in answer, answer
        result = answer.get("result")
        if isinstance(result, dict):  # an A2A task
            assert result.get("status", {}).get("state", "completed") == "completed", result
    assert orjson.dumps(answers)
