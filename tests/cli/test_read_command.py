"""``a2a-bus read`` as a user runs it: through a served gateway, and straight on Kafka."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import orjson
import pytest

from a2a_bus import Bus
from tests.ports import free_ports

from .test_serve_call import AGENTS, Lines, run

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def gateway() -> Iterator[str]:
    port = free_ports(1)[0]
    served = Lines("serve", f"{AGENTS}:Echo", "--http", f"127.0.0.1:{port}")
    served.wait_for("listening on")
    yield f"http://127.0.0.1:{port}"
    served.stop()


def test_read_pages_through_what_publish_sent(gateway: str) -> None:
    ids = []
    for n in range(3):
        done = run("publish", "audit.log", f'{{"n": {n}}}', "--url", gateway)
        assert done.returncode == 0, done.stderr
        ids.append(done.stdout.strip())
    first = run("read", "audit.log", "--limit", "2", "--json", "--url", gateway)
    assert first.returncode == 0, first.stderr
    page = orjson.loads(first.stdout)
    rest = run("read", "audit.log", "--cursor", page["cursor"], "--json", "--url", gateway)
    events = page["events"] + orjson.loads(rest.stdout)["events"]
    assert sorted(e["id"] for e in events) == sorted(ids) and len(page["events"]) == 2
    # Not a terminal, no COLUMNS: the lines are not wrapped at 80 columns.
    shown = run("read", "audit.log", "--newest", "--limit", "1", "--url", gateway, columns=False)
    assert shown.returncode == 0, shown.stderr
    first_line, data_line, summary = shown.stdout.splitlines()
    assert first_line.startswith("audit.log ") and f"id={ids[-1]} source=" in first_line
    assert len(first_line) > 80
    assert data_line == '  {"n":2}'
    assert summary.startswith("1 event; next page: --cursor ")
    bad = run("read", "audit.*", "--url", gateway)
    assert bad.returncode == 1
    # The gateway's reason alone, not the HTTP status and the JSON body around it.
    assert bad.stderr.startswith("error: ") and "wildcards" in bad.stderr
    assert "HTTP 400" not in bad.stderr and "{" not in bad.stderr


@pytest.mark.parametrize(
    ("subject", "why"),
    [("", "invalid subject ''"), ("a/b", "invalid subject 'a/b': segments are [A-Za-z0-9_-]+")],
)
def test_read_names_what_is_no_subject(gateway: str, subject: str, why: str) -> None:
    # No gateway route matches such a path: its bare "Not Found" said nothing.
    done = run("read", subject, "--url", gateway)
    assert done.returncode == 1
    assert done.stderr == f"error: {why}\n"


@pytest.mark.kafka
def test_read_straight_on_kafka(kafka_bootstrap: str) -> None:
    prefix = f"c{uuid.uuid4().hex[:10]}"

    async def publish() -> list[str]:
        async with Bus.kafka(kafka_bootstrap, bus_options={"prefix": prefix}) as bus:
            client = bus.async_client()
            return [await client.publish("jobs.done", {"n": n}) for n in range(3)]

    ids = asyncio.run(asyncio.wait_for(publish(), 60))
    common = ("--kafka", kafka_bootstrap, "--prefix", prefix, "--json")
    done = run("read", "jobs.done", "--limit", "10", *common)
    assert done.returncode == 0, done.stderr
    assert sorted(e["id"] for e in orjson.loads(done.stdout)["events"]) == sorted(ids)
    bad = run("read", "jobs.done", "--cursor", "nonsense", *common)
    assert bad.returncode == 1 and "invalid cursor" in bad.stderr


@pytest.mark.kafka
def test_client_commands_take_the_prefix_from_the_environment(kafka_bootstrap: str) -> None:
    prefix = f"c{uuid.uuid4().hex[:10]}"
    kafka = ("--kafka", kafka_bootstrap)
    done = run("publish", "jobs.done", '{"n": 1}', *kafka, extra={"A2A_PREFIX": prefix})
    assert done.returncode == 0, done.stderr
    event_id = done.stdout.strip()
    # The flag wins over the environment: the event is under the prefix of the flag
    # only, whatever A2A_PREFIX of the reader says.
    elsewhere = {"A2A_PREFIX": f"{prefix}x"}
    read = run("read", "jobs.done", "--json", *kafka, "--prefix", prefix, extra=elsewhere)
    assert read.returncode == 0, read.stderr
    assert [e["id"] for e in orjson.loads(read.stdout)["events"]] == [event_id]
    read = run("read", "jobs.done", "--json", *kafka, extra=elsewhere)
    assert read.returncode == 0, read.stderr
    assert orjson.loads(read.stdout)["events"] == []


@pytest.mark.kafka
def test_serve_builds_its_bus_from_the_environment(kafka_bootstrap: str) -> None:
    prefix = f"s{uuid.uuid4().hex[:10]}"
    extra = {"A2A_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "A2A_PREFIX": prefix}
    served = Lines(
        "serve", f"{AGENTS}:Echo", "--http", f"127.0.0.1:{free_ports(1)[0]}", extra=extra
    )
    try:
        assert served.wait_for("serving").rstrip().endswith(f"on Kafka at {kafka_bootstrap}")
        assert served.wait_for("ingress").rstrip().endswith(f"topic {prefix}.ingress")
    finally:
        assert served.stop() == 0
    # A2A_TRANSPORT=memory keeps it in memory despite a bootstrap in the environment.
    extra["A2A_TRANSPORT"] = "memory"
    served = Lines(
        "serve", f"{AGENTS}:Echo", "--http", f"127.0.0.1:{free_ports(1)[0]}", extra=extra
    )
    try:
        assert served.wait_for("serving").rstrip().endswith("on the in-memory transport")
    finally:
        assert served.stop() == 0
