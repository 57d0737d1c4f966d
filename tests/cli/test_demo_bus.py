"""``a2a-bus demo --kafka`` builds its bus like every other command: the A2A_* and
A2A_KAFKA_* settings of the environment apply, the flag's bootstrap on top, on a
fresh prefix; without the flag it stays in memory."""

from __future__ import annotations

import pytest

from a2a_bus.demo import demo_bus
from a2a_bus.transport.memory.transport import MemoryTransport
from tests.ports import free_ports

from .test_failures import one_error_line
from .test_serve_call import run

pytestmark = pytest.mark.timeout(120)


def test_the_kafka_security_settings_come_from_the_environment() -> None:
    bootstrap = f"127.0.0.1:{free_ports(1)[0]}"  # nothing listens: the protocol is in the error
    done = run("demo", "--kafka", bootstrap, extra={"A2A_KAFKA_SECURITY_PROTOCOL": "SSL"})
    line = one_error_line(done, 1)
    assert line.startswith(f"error: cannot reach Kafka at {bootstrap} (SSL): "), line


def test_a_bad_setting_is_named_before_anything_starts() -> None:
    bootstrap = f"127.0.0.1:{free_ports(1)[0]}"
    done = run("demo", "--kafka", bootstrap, extra={"A2A_REQUEST_TIMEOUT": "abc"})
    line = one_error_line(done, 2)
    assert line == "error: A2A_REQUEST_TIMEOUT='abc': expected a positive number of seconds"


def test_the_library_demo_bus_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("A2A_KAFKA_CLIENT_ID", "demo-client")
    monkeypatch.setenv("A2A_REQUEST_TIMEOUT", "7")
    monkeypatch.setenv("A2A_PREFIX", "shared")
    bus = demo_bus("127.0.0.1:1")
    settings = getattr(bus.transport, "settings", None)
    assert settings is not None, "not a Kafka transport"
    assert (settings.bootstrap_servers, settings.client_id) == ("127.0.0.1:1", "demo-client")
    assert bus.request_timeout == 7
    assert bus.topics.prefix.startswith("demo"), "a fresh prefix: no history of other runs"
    assert demo_bus("127.0.0.1:1").topics.prefix != bus.topics.prefix


def test_without_kafka_the_demo_bus_is_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    assert isinstance(demo_bus().transport, MemoryTransport)
