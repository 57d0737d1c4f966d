"""Settings a command cannot use end it before anything starts: one line on stderr
naming the variable or option, exit 2, no traceback."""

from __future__ import annotations

import queue
import signal
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest

from tests.ports import free_ports

from .test_failures import one_error_line
from .test_read_command import gateway  # noqa: F401 (a fixture)
from .test_serve_call import WAIT, Lines, run

pytestmark = pytest.mark.timeout(180)

ECHO = "a2a_bus.examples.echo:Echo"


def unreachable_kafka() -> tuple[str, str]:
    """``--kafka`` at a port nobody listens on: a refusal must come before any connection."""
    return "--kafka", f"127.0.0.1:{free_ports(1)[0]}"


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        (
            "A2A_GC_THRESHOLD",
            "3000000000",
            "error: A2A_GC_THRESHOLD='3000000000': "
            "expected off or a whole number from 1 to 2147483647",
        ),
        ("A2A_PIN_CPU", "bogus", "error: A2A_PIN_CPU='bogus': expected auto, off or a CPU"),
        (
            "A2A_REQUIRE_KNOWN_AGENTS",
            "maybe",
            "error: A2A_REQUIRE_KNOWN_AGENTS='maybe': expected true or false",
        ),
    ],
)
@pytest.mark.parametrize("command", [["demo"], ["serve", ECHO, "--http", "127.0.0.1:0"]])
def test_a_bus_setting_that_cannot_be_used_is_one_line(
    command: list[str], name: str, value: str, expected: str
) -> None:
    done = run(*command, extra={name: value})
    assert one_error_line(done, 2).startswith(expected)


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        (
            "A2A_KAFKA_COMPRESSION_TYPE",
            "bogus",
            "error: A2A_KAFKA_COMPRESSION_TYPE='bogus': expected one of gzip, snappy, lz4, zstd",
        ),
        (
            "A2A_KAFKA_MAX_POLL_RECORDS",
            "0",
            "error: A2A_KAFKA_MAX_POLL_RECORDS='0': expected a whole number, at least 1",
        ),
        (
            "A2A_KAFKA_DLQ_TOPIC",
            "dead letters",
            "error: A2A_KAFKA_DLQ_TOPIC='dead letters': invalid Kafka topic name",
        ),
        (
            "A2A_INGRESS_REPLY_TOPICS",
            "(",
            "error: A2A_INGRESS_REPLY_TOPICS='(': not a regular expression",
        ),
    ],
)
def test_a_kafka_setting_that_cannot_be_used_is_named_before_kafka_is_reached(
    name: str, value: str, expected: str
) -> None:
    done = run("serve", ECHO, "--http", "127.0.0.1:0", *unreachable_kafka(), extra={name: value})
    assert one_error_line(done, 2).startswith(expected)


def test_a_task_store_that_is_no_database_is_one_line(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a database, but long enough to have a header's size: " * 4)
    store = f"sqlite://{text}"
    done = run("serve", ECHO, "--http", "127.0.0.1:0", extra={"A2A_GATEWAY_A2A_TASK_STORE": store})
    line = one_error_line(done, 2)
    assert line == f"error: A2A_GATEWAY_A2A_TASK_STORE={store!r}: file is not a database"
    assert "never retrieved" not in done.stderr


def test_a_task_store_in_a_missing_directory_is_one_line(tmp_path: Path) -> None:
    store = f"sqlite://{tmp_path}/no/such/tasks.db"
    done = run("serve", ECHO, "--http", "127.0.0.1:0", extra={"A2A_GATEWAY_A2A_TASK_STORE": store})
    line = one_error_line(done, 2)
    assert (
        line
        == f"error: A2A_GATEWAY_A2A_TASK_STORE={store!r}: no such directory: {tmp_path}/no/such"
    )
    assert not (tmp_path / "no").exists()


GATEWAY_COMMANDS = [
    ["call", "echo", "{}"],
    ["read", "orders.eu"],
    ["publish", "orders.eu", "{}"],
    ["tail", "orders.eu"],
    ["agents"],
]


@pytest.mark.parametrize("command", GATEWAY_COMMANDS, ids=lambda command: command[0])
@pytest.mark.parametrize("token", ["tökén", "two words", "line\nbreak"], ids=repr)
def test_a_token_no_http_header_can_carry_is_bad_usage(command: list[str], token: str) -> None:
    url = f"http://127.0.0.1:{free_ports(1)[0]}"
    for given, extra in ((["--token", token], None), ([], {"A2A_GATEWAY_TOKEN": token})):
        done = run(*command, "--url", url, *given, extra=extra)
        line = one_error_line(done, 2)
        assert "'--token'" in line and "printable ASCII without spaces" in line, line
        assert token not in done.stderr  # a secret is not repeated


def test_publish_refuses_an_empty_event_type() -> None:
    url = f"http://127.0.0.1:{free_ports(1)[0]}"
    for empty in ("", " "):
        done = run("publish", "orders.eu", '"x"', "--type", empty, "--url", url)
        assert "--type: an event type cannot be empty" in one_error_line(done, 2)


def test_tail_shows_an_event_once_however_many_of_its_subjects_match(
    gateway: str,  # noqa: F811 (the fixture)
) -> None:
    tail = Lines("tail", "dup.x", "dup.x", "dup.*", "--json", "--url", gateway)
    try:
        # The views subscribe asynchronously: publish until the wildcard one shows an event.
        deadline = time.monotonic() + WAIT
        seen = False
        while not seen and time.monotonic() < deadline:
            assert run("publish", "dup.y", "0", "--url", gateway).returncode == 0
            try:
                seen = orjson.loads(tail.lines.get(timeout=1.0))["subject"] == "dup.y"
            except queue.Empty:
                continue
        assert seen, "tail showed nothing"
        time.sleep(1.0)  # the other views, subscribed at the same time, are ready by now
        published = []
        for number in range(3):
            done = run("publish", "dup.x", str(number), "--url", gateway)
            assert done.returncode == 0, done.stderr
            published.append(done.stdout.strip())
        shown: Counter[str] = Counter()
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                event = orjson.loads(tail.lines.get(timeout=0.2))
            except queue.Empty:
                continue
            if event["subject"] == "dup.x":
                shown[event["id"]] += 1
        assert shown == Counter(published)
    finally:
        assert tail.stop() in (0, -signal.SIGINT, 130)
