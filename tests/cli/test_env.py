"""Reading the environment (a2a_bus.runtime.env), the tokens file and serve's checks of its
targets, without a process around them."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
import typer

from a2a_bus import Bus
from a2a_bus import settings as env
from a2a_bus.cli.common import build_bus, kafka_bootstrap
from a2a_bus.cli.http_server import host_port
from a2a_bus.cli.targets import llm_warnings
from a2a_bus.gateway.settings import load_tokens
from a2a_bus.transport.kafka import KafkaSettings


def test_bus_options_read_the_variables() -> None:
    options = env.bus_options(
        {"A2A_PREFIX": "shop", "A2A_NODE": "n1", "A2A_REQUEST_TIMEOUT": "2.5", "A2A_HEARTBEAT": "1"}
    )
    assert options == {
        "prefix": "shop",
        "node": "n1",
        "request_timeout": 2.5,
        "heartbeat": 1.0,
        "pin_cpu": "off",
        "gc_threshold": 10_000,
    }
    assert env.bus_options({}) == {"prefix": "a2a", "pin_cpu": "off", "gc_threshold": 10_000}
    assert env.bus_options({"A2A_GC_THRESHOLD": "Off"})["gc_threshold"] == "off"
    assert env.bus_options({"A2A_GC_THRESHOLD": "2000"})["gc_threshold"] == 2000


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("A2A_REQUEST_TIMEOUT", "abc", "expected a positive number of seconds"),
        ("A2A_REQUEST_TIMEOUT", "0", "expected a positive number of seconds"),
        ("A2A_HEARTBEAT", "inf", "expected a positive number of seconds"),
        ("A2A_TRANSPORT", "redis", "expected one of memory, kafka"),
        ("A2A_EVENT_LOOP", "foo", "expected one of auto, uvloop, asyncio"),
        ("A2A_PREFIX", "a/b", "a topic prefix is made of [A-Za-z0-9._-]"),
        ("A2A_NODE", "a b", "a node id is made of [A-Za-z0-9._-]"),
        ("A2A_GC_THRESHOLD", "lots", "expected off or a whole number from 1 to 2147483647"),
        ("A2A_GC_THRESHOLD", "0", "expected off or a whole number from 1 to 2147483647"),
        ("A2A_GC_THRESHOLD", "3000000000", "expected off or a whole number from 1 to 2147483647"),
        ("A2A_HEARTBEAT", "1e-9", "expected at least 0.1 seconds"),
        ("A2A_HEARTBEAT", "0.09", "expected at least 0.1 seconds"),
    ],
)
def test_a_bad_value_names_its_variable(name: str, value: str, expected: str) -> None:
    with pytest.raises(env.EnvError) as caught:
        env.bus_options({name: value})
    assert str(caught.value) == f"{name}={value!r}: {expected}"


def test_the_shortest_heartbeat_the_environment_may_set_is_a_tenth_of_a_second() -> None:
    assert env.bus_options({"A2A_HEARTBEAT": "0.1"})["heartbeat"] == 0.1
    with pytest.raises(env.EnvError, match=r"expected at least 0\.1 seconds"):
        env.bus_options({"A2A_HEARTBEAT": "0.0999"})


KAFKA = {"A2A_TRANSPORT": "kafka", "A2A_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"}


def kafka_settings(bus: Bus) -> KafkaSettings:
    settings = getattr(bus.transport, "settings", None)
    assert isinstance(settings, KafkaSettings), "not a Kafka transport"
    return settings


def test_the_dead_letter_topic_comes_from_the_environment() -> None:
    shop = {**KAFKA, "A2A_PREFIX": "shop"}
    assert kafka_settings(Bus.from_env(shop)).dlq_topic == "shop.dlq"
    named = Bus.from_env({**shop, "A2A_KAFKA_DLQ_TOPIC": " ops.dead-letters "})
    assert kafka_settings(named).dlq_topic == "ops.dead-letters"
    assert kafka_settings(Bus.from_env({**shop, "A2A_KAFKA_DLQ_TOPIC": ""})).dlq_topic == "shop.dlq"


@pytest.mark.parametrize("topic", ["dead letters", "x" * 250, "a/b"])
def test_a_dead_letter_topic_kafka_would_refuse_is_named(topic: str) -> None:
    with pytest.raises(env.EnvError, match=f"^A2A_KAFKA_DLQ_TOPIC={re.escape(repr(topic))}: "):
        Bus.from_env({**KAFKA, "A2A_KAFKA_DLQ_TOPIC": topic})


@pytest.mark.parametrize(("value", "required"), [("", True), (" ", True), ("Off", False)])
def test_an_empty_require_known_agents_is_unset(
    value: str, required: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("A2A_REQUIRE_KNOWN_AGENTS", value)
    assert Bus.memory().dispatcher.require_known_agents is required


def test_a_require_known_agents_that_is_no_yes_or_no_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("A2A_REQUIRE_KNOWN_AGENTS", "maybe")
    with pytest.raises(
        ValueError, match=r"^A2A_REQUIRE_KNOWN_AGENTS='maybe': expected true or false$"
    ):
        Bus.memory()


def test_transport_kind_follows_the_bootstrap() -> None:
    assert env.transport_kind({}) == "memory"
    assert env.transport_kind({"KAFKA_BOOTSTRAP_SERVERS": "k:9092"}) == "kafka"
    assert env.transport_kind({"A2A_KAFKA_BOOTSTRAP_SERVERS": "k:9092"}) == "kafka"
    both = {"A2A_KAFKA_BOOTSTRAP_SERVERS": "k:9092", "A2A_TRANSPORT": " Memory "}
    assert env.transport_kind(both) == "memory"
    # An empty variable names no broker: it counts as unset (Bus.from_env too).
    empty = {"KAFKA_BOOTSTRAP_SERVERS": "", "A2A_KAFKA_BOOTSTRAP_SERVERS": " "}
    assert env.transport_kind(empty) == "memory"
    with_fallback = {"KAFKA_BOOTSTRAP_SERVERS": "", "A2A_TRANSPORT": "kafka"}
    default = KafkaSettings().bootstrap_servers
    assert KafkaSettings.from_env(with_fallback).bootstrap_servers == default


def test_misspelt_kafka_names_are_warned_once(caplog: pytest.LogCaptureFixture) -> None:
    names = {
        "A2A_KAFKA_SECURITY_PROTOCL": "SSL",  # typo
        "A2A_KAFKA_SSL_CONTEXT": "x",  # only code can give one
        "A2A_KAFKA_SECURITY_PROTOCOL": "SSL",  # fine
        "A2A_KAFKA_ZZZ_TEST_ONLY": "1",  # nothing close
    }
    unknown = dict(env.unknown_kafka_names(names))
    assert set(unknown) == {
        "A2A_KAFKA_SECURITY_PROTOCL",
        "A2A_KAFKA_SSL_CONTEXT",
        "A2A_KAFKA_ZZZ_TEST_ONLY",
    }
    assert unknown["A2A_KAFKA_SECURITY_PROTOCL"] == "A2A_KAFKA_SECURITY_PROTOCOL"
    assert unknown["A2A_KAFKA_ZZZ_TEST_ONLY"] is None
    with caplog.at_level(logging.WARNING, logger="a2a_bus.runtime.env"):
        env.bus_options(names)
        env.bus_options(names)
    messages = [record.getMessage() for record in caplog.records]
    assert (
        messages.count(
            "A2A_KAFKA_SECURITY_PROTOCL is not a Kafka setting and is ignored "
            "(did you mean A2A_KAFKA_SECURITY_PROTOCOL?)"
        )
        == 1
    )
    assert "A2A_KAFKA_ZZZ_TEST_ONLY is not a Kafka setting and is ignored" in messages
    assert not any("A2A_KAFKA_SECURITY_PROTOCOL " in message for message in messages)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1:8080", ("127.0.0.1", 8080)),
        ("0.0.0.0:0", ("0.0.0.0", 0)),
        ("[::1]:65535", ("::1", 65535)),
        ("localhost:1", ("localhost", 1)),
    ],
)
def test_host_port(value: str, expected: tuple[str, int]) -> None:
    assert host_port(value) == expected


@pytest.mark.parametrize("value", ["h:\u00b2", "h:99999", "h:" + "9" * 5000, "h:", ":80", "h:-1"])
def test_host_port_refuses_what_is_no_port(value: str) -> None:
    with pytest.raises(typer.BadParameter, match="use HOST:PORT"):
        host_port(value)


def test_tokens_file_mistakes_name_the_file(tmp_path: Path) -> None:
    good = tmp_path / "tokens.yaml"
    good.write_text("s3cret: {name: admin}\nshop: {agents: [orders]}\n")
    tokens = load_tokens(good)
    assert tokens["s3cret"].name == "admin" and tokens["shop"].agents == ("orders",)
    for text, expected in (
        ("bad: [yaml\n", "not valid YAML: expected ',' or ']'"),
        ("- a\n- b\n", "expected a mapping of token -> allow-lists"),
        ("t: [a, b]\n", "token #1: expected a mapping of allow-lists"),
        ("t: {agent: [a]}\n", "token #1: unknown allow-list keys: agent"),
    ):
        good.write_text(text)
        with pytest.raises(ValueError, match=r"tokens\.yaml: ") as caught:
            load_tokens(good)
        assert expected in str(caught.value)
    as_json = tmp_path / "tokens.json"
    as_json.write_text("{not json")
    with pytest.raises(ValueError, match=r"tokens\.json: not valid JSON"):
        load_tokens(as_json)


def test_llm_warnings_name_the_missing_key() -> None:
    targets = ["agents/support.agent.yaml", "a2a_bus.examples.calculator:Calculator"]
    warnings = llm_warnings(targets, {})
    assert len(warnings) == 1
    assert warnings[0].startswith("agents/support.agent.yaml: OPENAI_API_KEY is not set")
    assert llm_warnings(targets, {"OPENAI_API_KEY": "sk-test"}) == []
    assert llm_warnings(targets, {"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}) == []
    assert llm_warnings(targets[1:], {}) == []


def test_an_empty_bootstrap_variable_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    # It named no broker: serve and mcp went to Kafka at '' and could not reach it.
    for name in ("KAFKA_BOOTSTRAP_SERVERS", "A2A_KAFKA_BOOTSTRAP_SERVERS"):
        monkeypatch.setenv(name, "")
    monkeypatch.delenv("A2A_TRANSPORT", raising=False)
    assert kafka_bootstrap(build_bus(None, None)) is None
