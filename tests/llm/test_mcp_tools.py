"""MCP servers mounted by LLM agents: real servers written with the SDK (stdio child
processes and a streamable HTTP server), the scripted LLM server as the only fake."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from a2a_bus import Bus, JsonRpcError
from a2a_bus.llm import (
    AgentBuilder,
    AgentConfigError,
    AgentFileError,
    agent_class_from_file,
    llm_agent_class,
)
from a2a_bus.llm.bus_agent import MCP_FAILED
from a2a_bus.llm.mcp_servers import McpServer
from a2a_bus.llm.mcp_tools import McpServerError

from .conftest import ScriptedOpenAI

SERVER = Path(__file__).parent / "mcp" / "calc_server.py"
WAIT = 30.0  # upper bound on any wait; never a performance assertion


def calc(*options: str, name: str = "calc") -> McpServer:
    return McpServer.stdio(name, sys.executable, str(SERVER), *options)


def tool_messages(server: ScriptedOpenAI, index: int) -> list[dict[str, Any]]:
    return [m for m in server.requests[index]["messages"] if m["role"] == "tool"]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie child of this process counts as gone.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[1].startswith("Z"))


def gone(pid: int) -> bool:
    deadline = time.monotonic() + WAIT
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def start_http(port: int = 0) -> tuple[subprocess.Popen[str], str]:
    """The calc server over streamable HTTP, and its URL."""
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("port "), line
    return process, f"http://127.0.0.1:{line.split()[1]}/mcp"


def stop_http(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(timeout=WAIT)


@pytest.fixture
def http_server() -> Iterator[str]:
    process, url = start_http()
    yield url
    stop_http(process)


def test_stdio_tools_join_the_registry_with_their_schemas_and_results_reach_the_model(
    llm_server: ScriptedOpenAI,
) -> None:
    llm_server.call_tools(("calc__add", {"a": 2, "b": 3}), ("calc__weather", {"city": "Oslo"}))
    llm_server.call_tools(("calc__shout", {"text": "hi"}))
    llm_server.reply("Done")
    loop = AgentBuilder("helper").llm(llm_server.client()).mcp_server(calc()).build()
    with loop.mcp_session() as agent:
        output = agent.run("Work it out")
    assert output.content == "Done"
    offered = {t["function"]["name"]: t["function"] for t in llm_server.requests[0]["tools"]}
    assert {"calc__add", "calc__weather", "calc__shout", "calc__divide", "calc__die"} <= set(
        offered
    )
    add = offered["calc__add"]
    assert add["description"] == "Add two whole numbers."
    assert add["parameters"]["required"] == ["a", "b"]
    assert add["parameters"]["properties"]["a"]["type"] == "integer"
    first = tool_messages(llm_server, 1)
    # Structured content goes to the model as JSON.
    assert json.loads(first[0]["content"]) == {"result": 5}
    assert json.loads(first[1]["content"]) == {"city": "Oslo", "celsius": 21.5}
    assert tool_messages(llm_server, 2)[-1]["content"] == "HI"  # plain text content


def test_a_tool_error_and_bad_arguments_reach_the_model_as_failures(
    llm_server: ScriptedOpenAI,
) -> None:
    llm_server.call_tools(("calc__divide", {"a": 1, "b": 0}), ("calc__add", {"a": "x", "b": 1}))
    llm_server.reply("Sorry")
    loop = AgentBuilder("helper").llm(llm_server.client()).mcp_server(calc()).build()
    with loop.mcp_session() as agent:
        agent.run("Divide")
    divide, add = tool_messages(llm_server, 1)
    assert divide["content"] == (
        "error: tool 'calc__divide' failed: McpToolError: "
        "Error executing tool divide: cannot divide by zero"
    )
    # Checked against the server's own schema before the server is asked.
    assert add["content"].startswith("error: invalid arguments for tool 'calc__add': a: 'x'")


def test_http_server_with_headers(llm_server: ScriptedOpenAI, http_server: str) -> None:
    llm_server.call_tools(("web__header", {"name": "X-Team"}))
    llm_server.reply("ok")
    server = McpServer.http("web", http_server, {"X-Team": "blue"}, tools=("header", "add"))
    loop = AgentBuilder("helper").llm(llm_server.client()).mcp_server(server).build()
    with loop.mcp_session() as agent:
        assert sorted(agent.tools.names()) == ["web__add", "web__header"]
        agent.run("Which team?")
    assert json.loads(tool_messages(llm_server, 1)[0]["content"]) == {"result": "blue"}


def test_a_loop_with_mcp_servers_refuses_to_run_without_them(llm_server: ScriptedOpenAI) -> None:
    loop = AgentBuilder("helper").llm(llm_server.client()).mcp_server(calc()).build()
    with pytest.raises(AgentConfigError, match=r"mounts MCP servers \(calc\)"):
        loop.run("hi")
    assert llm_server.requests == []


def test_a_server_that_cannot_start_is_an_error_naming_it(
    llm_server: ScriptedOpenAI, tmp_path: Path
) -> None:
    loop = AgentBuilder("a").llm(llm_server.client()).mcp_server(calc("--fail-start")).build()
    with pytest.raises(McpServerError) as caught, loop.mcp_session():
        pass
    message = str(caught.value)
    assert message.startswith("MCP server 'calc' failed to start")
    assert "no licence for the calculator" in message  # its stderr is quoted

    missing = McpServer.stdio("ghost", str(tmp_path / "no-such-server"))
    loop = AgentBuilder("a").llm(llm_server.client()).mcp_server(missing).build()
    ghost = r"MCP server 'ghost' failed to start.*no-such-server"
    with pytest.raises(McpServerError, match=ghost), loop.mcp_session():
        pass


def test_a_server_that_dies_is_an_error_naming_it_not_a_hang(llm_server: ScriptedOpenAI) -> None:
    llm_server.call_tools(("calc__die", {}))
    llm_server.call_tools(("calc__add", {"a": 1, "b": 1}))
    llm_server.reply("It broke")
    loop = AgentBuilder("a").llm(llm_server.client()).mcp_server(calc()).build()
    with loop.mcp_session() as agent:
        assert agent.run("Go").content == "It broke"
    died = tool_messages(llm_server, 1)[0]["content"]
    assert died.startswith("error: tool 'calc__die' failed: McpServerError: MCP server 'calc' ")
    assert "connection closed" in died
    after = tool_messages(llm_server, 2)[-1]["content"]
    assert "MCP server 'calc' is not running" in after


AGENT_FILE = """\
id: mathdesk
model: file-model
mcp_servers:
  calc:
    command: {python}
    args: [{server}, --pid-file, {pid}]
"""


def test_an_agent_file_agent_starts_its_servers_with_its_actor_and_stops_them_with_it(
    llm_server: ScriptedOpenAI, tmp_path: Path
) -> None:
    pid_file = tmp_path / "calc.pid"
    path = tmp_path / "math.agent.yaml"
    path.write_text(AGENT_FILE.format(python=sys.executable, server=SERVER, pid=pid_file))
    cls = agent_class_from_file(path, client=llm_server.client())
    assert not pid_file.exists()  # nothing runs before the agent does
    llm_server.call_tools(("calc__add", {"a": 40, "b": 2}))
    llm_server.reply("42")
    with Bus.memory(prefix=f"t{uuid.uuid4().hex[:8]}", request_timeout=WAIT) as bus:
        bus.spawn(cls)
        assert bus.client().request("mathdesk", "chat", {"message": "40+2?"}) == "42"
        pid = int(pid_file.read_text())
        assert alive(pid)
    assert json.loads(tool_messages(llm_server, 1)[0]["content"]) == {"result": 42}
    assert gone(pid)


def test_an_agent_whose_server_cannot_start_answers_with_an_error_naming_it(
    llm_server: ScriptedOpenAI,
) -> None:
    loop = AgentBuilder("a").llm(llm_server.client()).mcp_server(calc("--fail-start")).build()
    cls = llm_agent_class(loop, "broken-math")
    with Bus.memory(prefix=f"t{uuid.uuid4().hex[:8]}", request_timeout=WAIT) as bus:
        bus.spawn(cls)
        with pytest.raises(JsonRpcError) as caught:
            bus.client().request("broken-math", "chat", {"message": "hi"})
    assert (caught.value.code, caught.value.message) == (MCP_FAILED, "MCP server failed")
    assert str(caught.value.data).startswith("MCP server 'calc' failed to start")
    assert "no licence for the calculator" in str(caught.value.data)
    assert llm_server.requests == []


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        ("  calc:\n    url: http://x/mcp\n    command: y\n", ":5: mcp_servers.calc.command: give"),
        ("  calc:\n    url: ftp://x\n", ":4: mcp_servers.calc.url: expected an http"),
        ("  a__b:\n    command: y\n", ":3: mcp_servers.a__b.name: invalid MCP server name"),
        ("  calc:\n    command: y\n    port: 3\n", ":5: mcp_servers.calc.port: unknown keyword"),
        (
            "  calc:\n    url: http://x\n    headers: {A: '${A2A_TEST_UNSET_VARIABLE}'}\n",
            ":5: mcp_servers.calc.headers: ${A2A_TEST_UNSET_VARIABLE} is not set",
        ),
        ("  calc:\n    url: http://x\n    args: [a]\n", ":5: mcp_servers.calc.args: applies to"),
        ("  calc:\n    command: y\n    timeout: 0\n", ":5: mcp_servers.calc.timeout: must be"),
    ],
)
def test_agent_file_mcp_servers_are_checked(tmp_path: Path, block: str, problem: str) -> None:
    path = tmp_path / "x.agent.yaml"
    path.write_text("model: m\nmcp_servers:\n" + block)
    with pytest.raises(AgentFileError) as caught:
        agent_class_from_file(path, client=None)
    assert problem in str(caught.value)


def test_agent_file_servers_take_variables_and_the_files_folder(
    tmp_path: Path, llm_server: ScriptedOpenAI
) -> None:
    path = tmp_path / "x.agent.yaml"
    path.write_text(
        "model: m\nmcp_servers:\n"
        "  local:\n    command: python\n    args: [s.py]\n    env: {TOKEN: '${A2A_TEST_TOKEN}'}\n"
        "  remote:\n    url: https://mcp.example/mcp\n"
        "    headers: {Authorization: 'Bearer ${A2A_TEST_TOKEN}'}\n"
    )
    os.environ["A2A_TEST_TOKEN"] = "s3cret"
    try:
        from a2a_bus.llm import AgentBuilder

        loop = AgentBuilder.from_file(path).llm(llm_server.client()).build()
    finally:
        del os.environ["A2A_TEST_TOKEN"]
    local, remote = loop.mcp_servers
    assert (local.command, local.args, local.cwd) == ("python", ("s.py",), str(tmp_path))
    assert local.env == {"TOKEN": "s3cret"}
    assert remote.headers == {"Authorization": "Bearer s3cret"}


def test_a_server_that_died_is_started_again_before_the_next_message(
    llm_server: ScriptedOpenAI,
) -> None:
    loop = AgentBuilder("a").llm(llm_server.client()).mcp_server(calc()).build()
    llm_server.call_tools(("calc__die", {}))
    llm_server.reply("It died")
    llm_server.call_tools(("calc__add", {"a": 1, "b": 2}))
    llm_server.reply("3")
    with Bus.memory(prefix=f"t{uuid.uuid4().hex[:8]}", request_timeout=WAIT) as bus:
        bus.spawn(llm_agent_class(loop, "math"))
        client = bus.client()
        assert client.request("math", "chat", {"message": "die"}) == "It died"
        assert client.request("math", "chat", {"message": "1+2"}) == "3"
    assert "MCP server 'calc' stopped" in tool_messages(llm_server, 1)[0]["content"]
    assert json.loads(tool_messages(llm_server, 3)[0]["content"]) == {"result": 3}


def test_an_http_server_that_went_away_is_reached_again_when_it_is_back(
    llm_server: ScriptedOpenAI,
) -> None:
    process, url = start_http()
    port = int(url.split(":")[2].split("/")[0])
    loop = AgentBuilder("a").llm(llm_server.client()).mcp_server(McpServer.http("web", url)).build()
    llm_server.call_tools(("web__add", {"a": 1, "b": 1}))
    llm_server.reply("2")
    llm_server.call_tools(("web__add", {"a": 2, "b": 2}))
    llm_server.reply("gone")
    llm_server.call_tools(("web__add", {"a": 3, "b": 3}))
    llm_server.reply("6")
    try:
        with Bus.memory(prefix=f"t{uuid.uuid4().hex[:8]}", request_timeout=WAIT) as bus:
            bus.spawn(llm_agent_class(loop, "math"))
            client = bus.client()
            assert client.request("math", "chat", {"message": "1+1"}) == "2"
            stop_http(process)
            assert client.request("math", "chat", {"message": "2+2"}) == "gone"
            process, _ = start_http(port)
            assert client.request("math", "chat", {"message": "3+3"}) == "6"
    finally:
        stop_http(process)
    failed = tool_messages(llm_server, 3)[0]["content"]
    assert failed.startswith("error: tool 'web__add' failed: McpServerError: MCP server 'web' ")
    assert json.loads(tool_messages(llm_server, 5)[0]["content"]) == {"result": 6}


RAW_SERVER = Path(__file__).parent / "mcp" / "raw_server.py"
RUN_ONCE = Path(__file__).parent / "mcp" / "run_once.py"


def raw(mode: str, **options: Any) -> McpServer:
    """The misbehaving server in ``mode`` (see raw_server.py), mounted as ``raw``."""
    return McpServer.stdio("raw", sys.executable, str(RAW_SERVER), mode, **options)


def answers_to(llm_server: ScriptedOpenAI, server: McpServer, *calls: str) -> list[str]:
    """What the model is told of each call of the tool ``raw__<call>``, one run each."""
    for name in calls:
        llm_server.call_tools((f"raw__{name}", {"x": "a"}))
        llm_server.reply("ok")
    loop = AgentBuilder("a").llm(llm_server.client()).mcp_server(server).build()
    with loop.mcp_session() as agent:
        for _ in calls:
            agent.run("Go")
    return [tool_messages(llm_server, 2 * index + 1)[0]["content"] for index in range(len(calls))]


def test_an_error_a_live_server_answers_is_its_refusal_and_it_keeps_serving(
    llm_server: ScriptedOpenAI,
) -> None:
    first, second = answers_to(llm_server, raw("refuse"), "t", "t")
    refused = "MCP server 'raw' refused the call of 't': -32000 quota used up {\"retry_in\": 60}"
    assert first == f"error: tool 'raw__t' failed: McpServerError: {refused}"
    assert second == first  # still running: not "is not running"


def test_a_call_without_an_answer_in_time_says_so(llm_server: ScriptedOpenAI) -> None:
    (answer,) = answers_to(llm_server, raw("silent", timeout=0.5), "t")
    assert answer.endswith("MCP server 'raw' did not answer the call of 't' within 0.5s")


def test_a_result_that_is_no_tool_result_is_one_line_and_the_server_keeps_serving(
    llm_server: ScriptedOpenAI,
) -> None:
    first, second = answers_to(llm_server, raw("unknown-content"), "t", "t")
    assert "answered the call of 't' with no valid tool result" in first
    assert "\n" not in first
    assert len(first) < 300
    assert second == first  # still running: not "is not running"


def test_a_result_larger_than_a_message_is_cut_saying_so(llm_server: ScriptedOpenAI) -> None:
    (answer,) = answers_to(llm_server, raw("huge"), "t")
    assert answer.startswith("yyyy")
    assert answer.endswith(
        "[cut: the tool's result was 1500000 bytes; the first 1000000 are above]"
    )
    assert len(answer.encode()) < 1_000_100


def test_of_two_tools_a_server_lists_under_one_name_the_first_is_mounted(
    llm_server: ScriptedOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    loop = AgentBuilder("a").llm(llm_server.client()).mcp_server(raw("twins")).build()
    with loop.mcp_session() as agent:
        assert agent.tools.names() == ["raw__t"]
        assert agent.tools.get("raw__t").description == "the first t"
    assert "MCP tool 'raw__t' left out: its server lists that name twice" in caplog.text


def test_a_server_that_never_answers_the_handshake_fails_to_start_and_nothing_is_left_over(
    llm_server: ScriptedOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    loop = AgentBuilder("a").llm(llm_server.client()).mcp_server(raw("mute", start_timeout=0.5))
    no_answer = r"failed to start: no answer within 0\.5s"
    with pytest.raises(McpServerError, match=no_answer), loop.build().mcp_session():
        pass
    gc.collect()  # an exception nobody retrieved is reported when its future goes
    assert "never retrieved" not in caplog.text


@pytest.mark.parametrize("era", ["2025", "2026"])
def test_tools_listed_with_wrong_input_schemas_are_left_out_and_the_others_mounted(
    llm_server: ScriptedOpenAI, caplog: pytest.LogCaptureFixture, era: str
) -> None:
    llm_server.call_tools(("raw__t", {"x": "a"}))
    llm_server.reply("ok")
    server = McpServer.stdio("raw", sys.executable, str(RAW_SERVER), "bad-schemas", era)
    loop = AgentBuilder("a").llm(llm_server.client()).mcp_server(server).build()
    with loop.mcp_session() as agent:
        assert agent.tools.names() == ["raw__t"]
        agent.run("Go")
    assert tool_messages(llm_server, 1)[0]["content"] == "ok"
    warnings = sorted(r.getMessage() for r in caplog.records if "left out" in r.getMessage())
    # One line for each, naming it, whether the SDK or JSON Schema refuses its schema.
    names = ["raw__bare", "raw__listed", "raw__typed", "raw__unparsable"]
    assert [line.split(" left out: ")[0] for line in warnings] == [
        f"MCP tool {name!r}" for name in names
    ]
    assert "server 'raw' lists it wrongly (inputSchema.type: " in warnings[2]
    assert "its input schema is no JSON Schema ($.properties.x.pattern: '(' is not" in warnings[3]
    assert all("\n" not in line for line in warnings)


def test_regular_expressions_in_a_tool_schema_are_left_to_the_server(
    llm_server: ScriptedOpenAI,
) -> None:
    hostile = "a" * 40 + "!"  # Python's re would take hours to refuse it for ^(a+)+$
    llm_server.call_tools(
        ("raw__t", {"x": hostile}),
        ("raw__t", {"x": "a", hostile: 1}),
        ("raw__u", {hostile: 1}),
        ("raw__t", {"x": 5}),
    )
    llm_server.reply("done")
    # In a process of its own: without a bound, a stalled check would hold this one.
    server = [sys.executable, str(RAW_SERVER), "patterns"]
    ran = subprocess.run(
        [sys.executable, str(RUN_ONCE), llm_server.base_url, *server],
        capture_output=True,
        text=True,
        timeout=WAIT * 2,
        check=False,
    )
    assert (ran.returncode, ran.stdout) == (0, "done\n"), ran.stderr
    answers = [message["content"] for message in tool_messages(llm_server, 1)]
    assert answers[:3] == ["ok", "ok", "ok"]  # the server checks its patterns
    # Everything else of the schema is still checked before the server is asked.
    assert answers[3] == "error: invalid arguments for tool 'raw__t': x: 5 is not of type 'string'"
