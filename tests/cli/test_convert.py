"""``a2a-bus convert`` end to end, as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "a2a_bus", "convert", *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
    )


def test_batch_file_prints_one_line_per_element_and_fails_on_the_bad_one() -> None:
    done = run(str(ROOT / "examples" / "batch.json"))
    assert done.returncode == 1
    lines = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert [line.get("type") for line in lines[:3]] == [
        "org.apache.eventmesh.a2a.tools.call.req",
        "org.apache.eventmesh.a2a.notifications.alert",
        "org.apache.eventmesh.a2a.message.sendStream.stream",
    ]
    assert lines[3]["error"]["code"] == -32600 and lines[3]["id"] is None


def test_round_trip_through_stdin_with_a_custom_prefix() -> None:
    message = {"jsonrpc": "2.0", "method": "tasks/get", "params": {"_agentId": "a"}, "id": 5}
    first = run("--prefix", "com.acme", "-", stdin=orjson.dumps(message))
    assert first.returncode == 0
    event = orjson.loads(first.stdout)
    assert event["type"] == "com.acme.tasks.get.req" and event["targetagent"] == "a"
    back = run("--to", "jsonrpc", "-", stdin=first.stdout)
    assert back.returncode == 0
    assert orjson.loads(back.stdout) == message


def test_garbage_input_answers_parse_error() -> None:
    done = run("-", stdin=b"\xff not json")
    assert done.returncode == 1
    assert orjson.loads(done.stdout)["error"]["code"] == -32700


def test_missing_file_is_a_usage_error() -> None:
    done = run("/nonexistent/file.json")
    assert done.returncode == 2
    assert b"no such file" in done.stderr


def test_a_pipe_is_read_like_a_file(tmp_path: Path) -> None:
    # /dev/stdin, or the pipe of a shell's <(...), is no regular file but can be read.
    message = {"jsonrpc": "2.0", "method": "tasks/get", "id": 1}
    done = run("/dev/stdin", stdin=orjson.dumps(message))
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["type"] == "org.apache.eventmesh.a2a.tasks.get.req"
    directory = run(str(tmp_path))
    assert directory.returncode == 2
    assert f"cannot read {tmp_path}: Is a directory".encode() in directory.stderr


def test_an_agent_id_or_subject_the_bus_would_refuse_is_answered_with_its_error() -> None:
    batch = [
        {"jsonrpc": "2.0", "method": "tasks/get", "params": {"_agentId": "a b"}, "id": 1},
        {"jsonrpc": "2.0", "method": "alert", "params": {"_topic": "news..sport"}},
        {"jsonrpc": "2.0", "method": "alert", "params": {"_topic": "news.sport"}},
    ]
    done = run("-", stdin=orjson.dumps(batch))
    assert done.returncode == 1
    agent, subject, fine = (orjson.loads(line) for line in done.stdout.splitlines())
    assert agent == {
        "jsonrpc": "2.0",
        "error": {
            "code": -32600,
            "message": "Invalid Request",
            "data": "invalid agent id 'a b': must match ^[A-Za-z0-9._-]+$",
        },
        "id": 1,
    }
    assert subject["error"]["code"] == -32600 and subject["id"] is None
    assert subject["error"]["data"].startswith("invalid subject 'news..sport'")
    assert fine["subject"] == "news.sport"


def test_a_cloudevent_naming_an_invalid_agent_is_not_converted_back() -> None:
    event = {
        "specversion": "1.0",
        "id": "e-1",
        "source": "s",
        "type": "org.apache.eventmesh.a2a.tasks.get.req",
        "targetagent": "a b",
        "data": {"jsonrpc": "2.0", "method": "tasks/get", "id": 7},
    }
    done = run("--to", "jsonrpc", "-", stdin=orjson.dumps(event))
    assert done.returncode == 1
    answer = orjson.loads(done.stdout)
    assert answer["error"]["code"] == -32600 and answer["id"] == 7
