"""Raw JSON-RPC over Kafka: kcat produces on the ingress topic of a real broker and
reads the raw JSON-RPC replies (and the dead letters) back."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from a2a_bus.bus import Bus
from a2a_bus.gateway.ingress import REPLY_TOPICS_ENV, Ingress
from a2a_bus.transport.kafka.transport import KafkaTransport

from .agents import Spec

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

WAIT = 30.0  # seconds; a guard against hangs, never a performance limit


# kcat runs in a worker thread: the bus shares this test's event loop.
async def produce(*args: Any, **headers: str) -> None:
    await asyncio.to_thread(_produce, *args, **headers)


async def consume(*args: Any) -> list[dict[str, Any]]:
    return await asyncio.to_thread(_consume, *args)


async def consume_raw(*args: Any) -> list[str]:
    return await asyncio.to_thread(_consume_raw, *args)


@pytest.fixture
def kcat() -> str:
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        message = "kcat is not installed (Debian package kcat; scripts/test.sh installs it)"
        if os.environ.get("A2A_REQUIRE_KCAT") == "1":
            pytest.fail(f"A2A_REQUIRE_KCAT=1 but {message}", pytrace=False)
        pytest.skip(message)
    return path


@pytest.fixture
async def ingress(kafka_bootstrap: str) -> AsyncIterator[Ingress]:
    prefix = f"t{uuid.uuid4().hex[:10]}"
    bus = Bus.kafka(kafka_bootstrap, bus_options={"prefix": prefix}, metadata_max_age_ms=1000)
    async with bus:
        await bus.aspawn(Spec)
        async with Ingress(bus.service, timeout=WAIT) as running:
            yield running


def _produce(kcat: str, bootstrap: str, topic: str, value: bytes, **headers: str) -> None:
    args = [kcat, "-b", bootstrap, "-t", topic, "-P"]
    for name, text in headers.items():
        args += ["-H", f"{name.replace('_', '-')}={text}"]
    subprocess.run(args, input=value + b"\n", check=True, timeout=WAIT)


def _consume(kcat: str, bootstrap: str, topic: str, count: int) -> list[dict[str, Any]]:
    """The first ``count`` records of ``topic``: key, value and headers."""
    fmt = '{"key": "%k", "headers": "%h", "value": %s}\\n'
    deadline = time.monotonic() + WAIT
    while True:
        done = subprocess.run(
            [kcat, "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f", fmt],
            capture_output=True,
            timeout=WAIT,
            check=False,
        )
        lines = done.stdout.splitlines()
        if len(lines) >= count or time.monotonic() > deadline:
            return [orjson.loads(line) for line in lines]
        time.sleep(0.2)


async def test_kcat_request_gets_a_raw_reply_on_its_reply_to_topic(
    kcat: str, kafka_bootstrap: str, ingress: Ingress
) -> None:
    reply_topic = f"{ingress.topic}.replies.mine"
    request = b'{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}'
    await produce(kcat, kafka_bootstrap, ingress.topic, request, reply_to=reply_topic)
    (reply,) = await consume(kcat, kafka_bootstrap, reply_topic, 1)
    assert reply["value"] == {"jsonrpc": "2.0", "result": 19, "id": 1}
    assert reply["key"] == "1"


async def test_kcat_batch_without_reply_to_is_answered_on_the_default_topic(
    kcat: str, kafka_bootstrap: str, ingress: Ingress
) -> None:
    batch = (
        b'[{"jsonrpc": "2.0", "method": "sum", "params": [1, 2, 4], "id": "a"},'
        b' {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},'
        b' {"jsonrpc": "2.0", "method": "get_data", "id": "b"}]'
    )
    await produce(kcat, kafka_bootstrap, ingress.topic, batch)
    replies = await consume(kcat, kafka_bootstrap, ingress.reply_topic, 2)
    by_key = {r["key"]: r["value"] for r in replies}
    assert by_key == {
        "a": {"jsonrpc": "2.0", "result": 7, "id": "a"},
        "b": {"jsonrpc": "2.0", "result": ["hello", 5], "id": "b"},
    }


async def test_kcat_invalid_input_gets_an_error_reply_and_a_dead_letter(
    kcat: str, kafka_bootstrap: str, ingress: Ingress
) -> None:
    reply_topic = f"{ingress.topic}.replies.bad"
    await produce(kcat, kafka_bootstrap, ingress.topic, b"{not json", reply_to=reply_topic)
    unknown = b'{"jsonrpc": "2.0", "method": "nope", "id": 9}'
    await produce(kcat, kafka_bootstrap, ingress.topic, unknown, reply_to=reply_topic)
    replies = await consume(kcat, kafka_bootstrap, reply_topic, 2)
    codes = sorted((r["value"]["error"]["code"], r["value"]["id"]) for r in replies)
    assert codes == [(-32700, None), (-32601, 9)]
    dlq = f"{ingress.topics.dlq}"
    letters = await consume_raw(kcat, kafka_bootstrap, dlq, 2)
    assert any("undecodable" in h and "Parse error" in h for h in letters)
    assert any("unroutable" in h for h in letters)


def _consume_raw(kcat: str, bootstrap: str, topic: str, count: int) -> list[str]:
    """Headers of the first ``count`` records (dead letters hold any bytes)."""
    deadline = time.monotonic() + WAIT
    while True:
        done = subprocess.run(
            [kcat, "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%h\\n"],
            capture_output=True,
            timeout=WAIT,
            check=False,
        )
        lines = done.stdout.decode(errors="replace").splitlines()
        if len(lines) >= count or time.monotonic() > deadline:
            return lines
        time.sleep(0.2)


async def test_kcat_reply_to_naming_a_bus_topic_is_answered_on_the_default_topic(
    kcat: str, kafka_bootstrap: str, ingress: Ingress
) -> None:
    # A raw answer on the registry would pose as an agent card, on an agent's topic as
    # a request to it, on the ingress as new input: the ingress refuses to write there.
    topics = ingress.topics
    internal = [topics.registry, topics.agent("spec"), topics.ingress, topics.reply("node-x")]
    for index, topic in enumerate(internal):
        request = f'{{"jsonrpc": "2.0", "method": "get_data", "id": "r{index}"}}'.encode()
        await produce(kcat, kafka_bootstrap, ingress.topic, request, reply_to=topic)
    replies = await consume(kcat, kafka_bootstrap, ingress.reply_topic, len(internal))
    assert sorted(r["key"] for r in replies) == ["r0", "r1", "r2", "r3"]
    registry = await consume(kcat, kafka_bootstrap, topics.registry, 1)
    assert all("jsonrpc" not in r["value"] for r in registry)


async def test_kcat_reply_to_outside_the_allowed_pattern_is_answered_on_the_default_topic(
    kcat: str, kafka_bootstrap: str
) -> None:
    prefix = f"t{uuid.uuid4().hex[:10]}"
    bus = Bus.kafka(kafka_bootstrap, bus_options={"prefix": prefix}, metadata_max_age_ms=1000)
    allowed, refused = f"{prefix}-replies.ok", f"{prefix}-elsewhere"
    async with (
        bus,
        Ingress(bus.service, timeout=WAIT, reply_topics=rf"{prefix}-replies\..+") as ingress,
    ):
        await bus.aspawn(Spec)
        ok = b'{"jsonrpc": "2.0", "method": "subtract", "params": [5, 3], "id": "ok"}'
        await produce(kcat, kafka_bootstrap, ingress.topic, ok, reply_to=allowed)
        no = b'{"jsonrpc": "2.0", "method": "subtract", "params": [9, 3], "id": "no"}'
        await produce(kcat, kafka_bootstrap, ingress.topic, no, reply_to=refused)
        (answer,) = await consume(kcat, kafka_bootstrap, allowed, 1)
        (fallback,) = await consume(kcat, kafka_bootstrap, ingress.reply_topic, 1)
        assert (answer["key"], answer["value"]["result"]) == ("ok", 2)
        assert (fallback["key"], fallback["value"]["result"]) == ("no", 6)
        transport = bus.transport
        assert isinstance(transport, KafkaTransport)
        assert refused not in await transport.list_topics()


def test_reply_topics_come_from_the_environment_and_must_be_a_regex(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bus = Bus.memory()
    monkeypatch.setenv(REPLY_TOPICS_ENV, r"replies\..*")
    pattern = Ingress(bus.service).reply_topics
    assert pattern is not None and pattern.fullmatch("replies.me")
    assert not pattern.fullmatch("other")
    assert Ingress(bus.service, reply_topics="").reply_topics is None  # explicit: no narrowing


def test_a_reply_topics_pattern_that_is_no_regex_is_refused_naming_where_it_came_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bus = Bus.memory()
    problem = "not a regular expression: missing ), unterminated subpattern at position 0"
    with pytest.raises(ValueError) as given:
        Ingress(bus.service, reply_topics="(")
    assert str(given.value) == f"reply_topics='(': {problem}"
    monkeypatch.setenv(REPLY_TOPICS_ENV, "(")
    with pytest.raises(ValueError) as configured:
        Ingress(bus.service)
    assert str(configured.value) == f"A2A_INGRESS_REPLY_TOPICS='(': {problem}"
