"""How the commands fail, as a user sees it: one ``error:`` line on stderr, no
traceback, exit 1 when something out there failed and 2 for bad usage."""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.ports import free_ports

from .test_serve_call import AGENTS, ROOT, WAIT, env, run

pytestmark = pytest.mark.timeout(180)

CALC = "a2a_bus.examples.calculator:Calculator"


def one_error_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("error:", "Error:"))]
    assert len(errors) == 1, done.stderr
    return errors[0]


@pytest.mark.parametrize(
    "command",
    [
        ["call", "add", "[1, 2]"],
        ["agents", "--wait", "0"],
        ["read", "orders.eu"],
        ["publish", "orders.eu", "{}"],
        ["tail", "orders.#"],
        ["demo"],
        ["serve", CALC, "--http", "127.0.0.1:0"],
    ],
    ids=lambda command: command[0],
)
def test_an_unreachable_kafka_is_one_line(command: list[str]) -> None:
    bootstrap = f"127.0.0.1:{free_ports(1)[0]}"  # nothing listens there
    done = run(*command, "--kafka", bootstrap)
    line = one_error_line(done, 1)
    assert line.startswith(f"error: cannot reach Kafka at {bootstrap}: "), line
    assert "Unable to bootstrap" in line


def test_bad_environment_values_are_named() -> None:
    kafka = ("--kafka", f"127.0.0.1:{free_ports(1)[0]}")
    cases = {
        "A2A_REQUEST_TIMEOUT": ("abc", "expected a positive number of seconds"),
        "A2A_HEARTBEAT": ("-1", "expected a positive number of seconds"),
        "A2A_EVENT_LOOP": ("foo", "expected one of auto, uvloop, asyncio"),
        "A2A_PREFIX": ("bad prefix", "[A-Za-z0-9._-]"),
    }
    for name, (value, allowed) in cases.items():
        done = run("call", "add", *kafka, extra={name: value})
        line = one_error_line(done, 2)
        assert line == f"error: {name}={value!r}: {allowed}" or (
            line.startswith(f"error: {name}={value!r}: ") and allowed in line
        ), line
    # Read when a command makes its event loop, on the gateway path too.
    done = run(
        "call",
        "add",
        "--url",
        f"http://127.0.0.1:{free_ports(1)[0]}",
        extra={"A2A_EVENT_LOOP": "foo"},
    )
    assert "A2A_EVENT_LOOP='foo'" in one_error_line(done, 2)
    assert "never awaited" not in done.stderr
    done = run("serve", CALC, "--http", "127.0.0.1:0", extra={"A2A_REQUEST_TIMEOUT": "abc"})
    assert "A2A_REQUEST_TIMEOUT='abc'" in one_error_line(done, 2)


def test_a_misspelt_kafka_variable_is_named_once() -> None:
    extra = {"A2A_KAFKA_BOOTSTRAP_SERVER": "127.0.0.1:9092"}
    done = run("call", "add", "--kafka", f"127.0.0.1:{free_ports(1)[0]}", extra=extra)
    assert done.returncode == 1
    warnings = [line for line in done.stderr.splitlines() if "A2A_KAFKA_BOOTSTRAP_SERVER " in line]
    assert warnings == [
        "A2A_KAFKA_BOOTSTRAP_SERVER is not a Kafka setting and is ignored "
        "(did you mean A2A_KAFKA_BOOTSTRAP_SERVERS?)"
    ]


def test_serve_on_a_port_in_use_is_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run("serve", CALC, "--http", f"127.0.0.1:{port}")
    line = one_error_line(done, 1)
    assert line.startswith(f"error: cannot serve HTTP on 127.0.0.1:{port}: "), line
    assert "in use" in line
    assert "serving" not in done.stdout  # refused before any agent started
    unknown = run("serve", CALC, "--http", "no-such-host.invalid:8080")
    assert one_error_line(unknown, 1).startswith("error: cannot serve HTTP on no-such-host")


@pytest.mark.parametrize("http", ["127.0.0.1:99999", "127.0.0.1:65536", "127.0.0.1:", "8080"])
def test_serve_refuses_a_port_out_of_range(http: str) -> None:
    done = run("serve", CALC, "--http", http)
    assert "port from 1 to 65535" in one_error_line(done, 2)


def test_serve_refuses_bad_files(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("x = \n")
    done = run("serve", f"{broken}:X")
    line = one_error_line(done, 2)
    assert "SyntaxError" in line and "line 1" in line
    raising = tmp_path / "raising.py"
    raising.write_text("raise RuntimeError('no database')\n")
    assert "RuntimeError: no database" in one_error_line(run("serve", f"{raising}:X"), 2)
    bad_yaml = tmp_path / "tokens.yaml"
    bad_yaml.write_text("bad: [yaml\n")
    line = one_error_line(run("serve", CALC, "--tokens", str(bad_yaml)), 2)
    assert "not valid YAML" in line and "line 2" in line
    bad_json = tmp_path / "tokens.json"
    bad_json.write_text('{"secret": {"agents": "calc"}}')
    line = one_error_line(run("serve", CALC, "--tokens", str(bad_json)), 2)
    assert "token #1: agents must be a list" in line and "secret" not in line


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "soon"])
def test_serve_refuses_a_gateway_timeout_that_is_not_positive(value: str) -> None:
    # -1 answered every request -32001 at once; 0, nan and inf served without saying so.
    # Kafka is out of reach: a value let through ends in that error instead (exit 1).
    kafka = ("--kafka", f"127.0.0.1:{free_ports(1)[0]}")
    extra = {"A2A_GATEWAY_REQUEST_TIMEOUT": value}
    done = run("serve", CALC, "--http", "127.0.0.1:0", *kafka, extra=extra)
    line = one_error_line(done, 2)
    allowed = "expected a positive number of seconds"
    assert line == f"error: A2A_GATEWAY_REQUEST_TIMEOUT={value!r}: {allowed}"


def test_serve_names_an_agent_that_cannot_be_made(tmp_path: Path) -> None:
    broken = tmp_path / "broken_agent.py"
    broken.write_text(
        "from a2a_bus import Agent, method\n\n\n"
        "class Broken(Agent):\n"
        "    agent_id = 'broken'\n\n"
        "    def __init__(self, *args: object, **kwargs: object) -> None:\n"
        "        raise RuntimeError('no database')\n\n"
        "    @method\n"
        "    def ping(self) -> str:\n"
        "        return 'pong'\n"
    )
    done = run("serve", CALC, f"{broken}:Broken", "--http", "127.0.0.1:0")
    line = one_error_line(done, 2)
    assert line == "error: cannot start agent 'broken': RuntimeError: no database", line
    assert "listening on" not in done.stdout


def test_serve_refuses_one_agent_twice() -> None:
    done = run("serve", CALC, f"{AGENTS}:Echo", CALC)
    line = one_error_line(done, 2)
    assert "agent id 'calc' is served twice" in line and "--replicas" in line


def test_publish_refuses_a_bad_subject_locally() -> None:
    # No gateway listens: the subject is refused before anything is sent.
    done = run("publish", "bad.topic!", "{}", "--url", f"http://127.0.0.1:{free_ports(1)[0]}")
    line = one_error_line(done, 2)
    assert "invalid subject 'bad.topic!'" in line
    assert done.stdout == ""
    tail = run("tail", "news.#", "bad topic", "--url", f"http://127.0.0.1:{free_ports(1)[0]}")
    assert "invalid subject 'bad topic'" in one_error_line(tail, 2)


@pytest.mark.parametrize("timeout", ["0", "-1", "nan"])
def test_call_refuses_a_timeout_that_is_not_positive(timeout: str) -> None:
    done = run("call", "add", "--timeout", timeout, "--url", f"http://127.0.0.1:{free_ports(1)[0]}")
    assert "--timeout" in one_error_line(done, 2)


@pytest.mark.kafka
def test_kafka_security_settings_come_from_the_environment(kafka_bootstrap: str) -> None:
    # The broker speaks plaintext: with A2A_KAFKA_SECURITY_PROTOCOL=SSL honoured the
    # TLS handshake fails, and says so in one line.
    extra = {"A2A_KAFKA_SECURITY_PROTOCOL": "SSL"}
    done = run("call", "add", "[1, 2]", "--kafka", kafka_bootstrap, extra=extra)
    line = one_error_line(done, 1)
    assert line.startswith(f"error: cannot reach Kafka at {kafka_bootstrap} (SSL): "), line


@pytest.mark.kafka
def test_a_notification_the_bus_refuses_is_one_line(kafka_bootstrap: str) -> None:
    prefix = f"cli{uuid.uuid4().hex[:8]}"
    done = run(
        "call", "no.such.method", "{}", "--notify", "--kafka", kafka_bootstrap, "--prefix", prefix
    )
    line = one_error_line(done, 1)
    assert line == "error: not sent: -32601 Method not found: no.such.method", line


@pytest.mark.parametrize(
    ("args", "why"),
    [
        ([], "on the in-memory transport a gateway reaches only the agents of its own process"),
        (["--http", "127.0.0.1:0"], "on the in-memory transport a gateway reaches only"),
        (["--kafka", "127.0.0.1:1"], "or give --http HOST:PORT to run a gateway"),
    ],
    ids=["memory", "memory-http", "kafka"],
)
def test_serve_refuses_a_process_that_would_serve_nothing(args: list[str], why: str) -> None:
    # Refused before anything starts: Kafka is not even reached.
    line = one_error_line(run("serve", *args), 2)
    assert line.startswith("error: nothing to serve: ") and why in line, line


@pytest.mark.parametrize(("option", "value"), [("--tokens", "tokens.yaml"), ("--a2a-root", "calc")])
def test_serve_refuses_gateway_options_for_a_worker(option: str, value: str) -> None:
    done = run("serve", CALC, "--kafka", "127.0.0.1:1", option, value)
    line = one_error_line(done, 2)
    assert f"{option} applies to the HTTP gateway: give --http HOST:PORT too" in line


@pytest.mark.parametrize(
    ("root", "why"),
    [
        ("nobody", "--a2a-root nobody: no such agent among those hosted here (calc)"),
        ("no root", "a2a_root: invalid agent id 'no root'"),
    ],
)
def test_serve_refuses_a_root_agent_it_cannot_serve(root: str, why: str) -> None:
    done = run("serve", CALC, "--http", "127.0.0.1:0", "--a2a-root", root)
    assert why in one_error_line(done, 2)


@pytest.mark.kafka
def test_a_worker_whose_agents_all_failed_exits_1_naming_them(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """It has no /readyz to say so: it ends, for its supervisor to start it again."""
    failing = tmp_path / "failing_agent.py"
    failing.write_text(
        "from a2a_bus import Agent, method\n\n\n"
        "class NoDatabase(Agent):\n"
        "    agent_id = 'no-database'\n\n"
        "    def on_start(self) -> None:\n"
        "        raise ConnectionError('database down')\n\n"
        "    @method\n"
        "    def ping(self) -> str:\n"
        "        return 'pong'\n"
    )
    prefix = f"cli{uuid.uuid4().hex[:8]}"
    done = run("serve", f"{failing}:NoDatabase", "--kafka", kafka_bootstrap, "--prefix", prefix)
    line = one_error_line(done, 1)
    assert line == (
        "error: every agent of this worker failed: no-database: failed to start 10 times in a "
        "row; last: ConnectionError in on_start: database down"
    ), line
    assert "a2a-bus: worker: no HTTP gateway here" in done.stdout
    assert done.stdout.endswith("a2a-bus: shutting down\na2a-bus: stopped\n")


@pytest.mark.parametrize(
    ("url", "extra"),
    [
        ("not a url", {}),
        ("ftp://gateway", {}),
        ("http://", {}),
        ("http://127.0.0.1:99999", {}),
        (None, {"A2A_GATEWAY_URL": "127.0.0.1:8080"}),
    ],
    ids=["words", "ftp", "no-host", "port", "variable"],
)
def test_a_gateway_url_no_request_can_go_to_is_bad_usage(
    url: str | None, extra: dict[str, str | None]
) -> None:
    flag = ["--url", url] if url is not None else []
    for command in (["call", "add", "[1, 2]"], ["tail", "orders.eu"], ["agents"]):
        line = one_error_line(run(*command, *flag, extra=extra), 2)
        assert "--url (or A2A_GATEWAY_URL): " in line, line
        assert "use http://HOST[:PORT] or https://HOST[:PORT]" in line, line
    # Where a command goes to Kafka, the gateway's URL is not its concern.
    kafka = ("--kafka", f"127.0.0.1:{free_ports(1)[0]}")
    assert "cannot reach Kafka" in one_error_line(run("agents", *flag, *kafka, extra=extra), 1)


@pytest.mark.parametrize(
    "command",
    [
        ["call", "add", b'[1, "\xff"]'],
        ["publish", "orders.eu", b'"caf\xe9"'],
        ["read", b"orders.\xff"],
        ["call", "add", "--url", b"http://127.0.0.1:8080/\xff"],
    ],
    ids=["call", "publish", "read", "url"],
)
def test_an_argument_that_is_not_utf8_is_bad_usage(command: list[str | bytes]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "a2a_bus", *command],
        capture_output=True,
        text=True,
        timeout=WAIT * 2,
        env=env(),
        cwd=ROOT,
        check=False,
    )
    shown = next(arg for arg in command if isinstance(arg, bytes)).decode(errors="backslashreplace")
    assert one_error_line(done, 2) == f"error: argument '{shown}' is not UTF-8 text"


def test_call_refuses_params_that_are_null() -> None:
    # Params are an array or an object; null was sent as no params at all.
    done = run("call", "add", "null", "--url", f"http://127.0.0.1:{free_ports(1)[0]}")
    assert "params must be a JSON array or object" in one_error_line(done, 2)


def test_agents_refuses_an_endless_wait() -> None:
    done = run("agents", "--wait", "inf", "--kafka", f"127.0.0.1:{free_ports(1)[0]}")
    assert "--wait: must be a finite number of seconds" in one_error_line(done, 2)


def test_publish_refuses_an_event_type_cloudevents_forbids() -> None:
    # Refused here, on Kafka too (which took it), as the gateway refuses it.
    kafka = ("--kafka", f"127.0.0.1:{free_ports(1)[0]}")
    done = run("publish", "orders.eu", "{}", "--type", "order\nplaced", *kafka)
    line = one_error_line(done, 2)
    assert "--type: attribute 'type' holds the control character '\\n'" in line, line


@pytest.mark.parametrize(
    ("bootstrap", "extra", "named"),
    [
        ("broker:port", {}, "--kafka"),
        (None, {"A2A_KAFKA_BOOTSTRAP_SERVERS": ":::"}, "A2A_KAFKA_BOOTSTRAP_SERVERS"),
        (None, {"KAFKA_BOOTSTRAP_SERVERS": "broker:99999"}, "KAFKA_BOOTSTRAP_SERVERS"),
        # A host name with a space, which aiokafka takes (and fails to resolve later).
        ("broker one:9092", {}, "--kafka"),
        (None, {"A2A_KAFKA_BOOTSTRAP_SERVERS": "a b"}, "A2A_KAFKA_BOOTSTRAP_SERVERS"),
    ],
    ids=["flag", "variable", "fallback", "flag-space", "variable-space"],
)
def test_bootstrap_servers_aiokafka_cannot_parse_are_bad_usage(
    bootstrap: str | None, extra: dict[str, str | None], named: str
) -> None:
    servers = bootstrap or next(iter(extra.values()))
    # Without --kafka only the commands that host agents go to the environment's broker.
    commands = [["serve", CALC], ["mcp", CALC]]
    if bootstrap is not None:
        commands += [["call", "add"], ["tail", "orders.eu"]]
    flag = ["--kafka", bootstrap] if bootstrap is not None else []
    for command in commands:
        done = run(*command, *flag, extra=extra)
        line = one_error_line(done, 2)
        assert line == f"error: {named}={servers!r}: expected HOST[:PORT], comma-separated"


@pytest.mark.kafka
def test_a_subject_whose_topic_would_be_too_long_is_one_line(kafka_bootstrap: str) -> None:
    subject = "a" * 300
    kafka = ("--kafka", kafka_bootstrap, "--prefix", f"cli{uuid.uuid4().hex[:8]}")
    published = one_error_line(run("publish", subject, "{}", *kafka), 1)
    assert published.startswith("error: not published: -32600 Invalid Request: subject too long")
    tailed = one_error_line(run("tail", subject, *kafka), 1)
    assert tailed.startswith("error: subject too long: its topic "), tailed
