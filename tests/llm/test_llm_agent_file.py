"""Agent files (valid and invalid) and the builder's defaults."""

from __future__ import annotations

import json
import math
import os
import re
import textwrap
from pathlib import Path

import pytest

from a2a_bus.llm import (
    AgentBuilder,
    AgentConfigError,
    AgentFileError,
    AgentLoop,
    ExitConditionError,
    FileSoul,
    OpenAIClient,
    agent_class_from_file,
    load_agent_file,
)
from a2a_bus.llm.soul import MAX_SYSTEM_PROMPT_BYTES

from .conftest import ScriptedOpenAI

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]

TOOLS_MODULE = '''
CALLS = []

def lookup(query: str, locale: str, limit: int = 5, tenant: str = "x") -> dict:
    """Look things up.

    Args:
        query: the search words
    """
    CALLS.append((query, locale, limit, tenant))
    return {"query": query, "locale": locale, "limit": limit, "tenant": tenant}

def close(ticket: int) -> str:
    """Close a ticket."""
    return f"closed {ticket}"
'''

VALID = """\
name: helper
model: test-model
system_prompt: You help.
max_turns: 4
max_tool_concurrency: 2
temperature: 0.1
memory: sliding_window(6)
streaming: true
exit_condition: finish_reason == "stop" || tool_call("close")
tools:
  lookup:
    description: Search the docs
    callable: helper_tools.py:lookup
    input:
      query: tool_args.q
      locale: ctx.user.locale
      tenant: acme
  close:
    callable: helper_tools:close
"""


def write(tmp_path: Path, text: str, name: str = "helper.agent.yaml") -> Path:
    (tmp_path / "helper_tools.py").write_text(TOOLS_MODULE)
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_valid_file_builds_the_agent_and_binds_inputs(
    tmp_path: Path, llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    agent = load_agent_file(
        write(tmp_path, VALID), client=llm_client, context={"user": {"locale": "fr"}}
    )
    assert (agent.name, agent.model, agent.max_turns, agent.max_tool_concurrency) == (
        "helper",
        "test-model",
        4,
        2,
    )
    assert (agent.temperature, str(agent.memory), agent.streaming) == (
        0.1,
        "sliding_window(6)",
        True,
    )
    lookup, close = agent.tools.definitions()
    assert lookup.description == "Search the docs"
    assert lookup.parameters["required"] == ["q"]
    assert lookup.parameters["properties"] == {
        "q": {"type": "string", "description": "the search words"}
    }
    assert close.parameters["required"] == ["ticket"]  # no input block: inferred

    llm_server.call_tools(("lookup", {"q": "refunds"}))
    llm_server.call_tools(("close", {"ticket": 7}))
    output = agent.run("refund policy?")
    assert output.exit_reason == "exit_condition"
    first_result = json.loads(
        next(m for m in llm_server.requests[1]["messages"] if m["role"] == "tool")["content"]
    )
    assert first_result == {"query": "refunds", "locale": "fr", "limit": 5, "tenant": "acme"}
    assert llm_server.requests[0]["model"] == "test-model"
    assert llm_server.requests[0]["messages"][0] == {"role": "system", "content": "You help."}


def test_missing_context_value_is_reported_to_the_model(
    tmp_path: Path, llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    agent = load_agent_file(write(tmp_path, VALID), client=llm_client)
    llm_server.call_tools(("lookup", {"q": "x"}))
    llm_server.reply("no locale")
    agent.run("hi")
    content = next(m for m in llm_server.requests[1]["messages"] if m["role"] == "tool")["content"]
    assert "context value ctx.user is not set" in content


def test_toml_agent_file(tmp_path: Path, llm_client: OpenAIClient) -> None:
    path = write(
        tmp_path,
        """\
        model = "m"
        memory = { strategy = "token_budget", size = 500 }

        [tools.close]
        callable = "helper_tools:close"
        description = "Close it"
        """,
        name="helper.agent.toml",
    )
    agent = load_agent_file(path, client=llm_client)
    assert str(agent.memory) == "token_budget(500)" and agent.tools.names() == ["close"]


def test_example_support_agent_loads(llm_client: OpenAIClient) -> None:
    agent = load_agent_file(REPO / "agents" / "support.agent.yaml", client=llm_client)
    assert agent.tools.names() == ["search_knowledge_base", "escalate_to_human"]
    assert agent.exit_condition is not None
    served = agent_class_from_file(REPO / "agents" / "support.agent.yaml", client=llm_client)
    card = served.card()
    assert (card["id"], card["subscriptions"]) == ("support", ["support.tickets"])
    assert served.output_topic == "support.answers"


@pytest.mark.parametrize(
    ("text", "line", "key", "problem"),
    [
        ("model: m\nmax_turns: 0\n", 2, "max_turns", "must be >= 1"),
        ("model: m\nmax_turns: many\n", 2, "max_turns", "expected an integer"),
        ("model: m\nmemroy: full()\n", 2, "memroy", "unknown keyword"),
        ("model: m\nmemory: sliding_window(0)\n", 2, "memory", ">= 1"),
        ("model: m\nmemory: lru(3)\n", 2, "memory", "unknown memory strategy"),
        ("model: m\nexit_condition: finish_reason ==\n", 2, "exit_condition", "invalid"),
        ("model: m\nexit_condition: tool_args.x == 1\n", 2, "exit_condition", "tool_args"),
        ("model: m\ntemperature: 7\n", 2, "temperature", "between 0 and 2"),
        ("model: m\nmodel: n\n", 2, "model", "duplicate key"),
        (
            "model: m\ntools:\n  t:\n    callable: helper_tools:nothing\n",
            4,
            "tools.t.callable",
            "has no attribute 'nothing'",
        ),
        (
            "model: m\ntools:\n  t:\n    callable: no_such_module_xyz:f\n",
            4,
            "tools.t.callable",
            "cannot import 'no_such_module_xyz': ModuleNotFoundError",
        ),
        (
            "model: m\ntools:\n  t:\n    callable: helper_tools:lookup\n    input:\n"
            "      query: tool_args.q\n      nope: 1\n",
            7,
            "tools.t.input.nope",
            "has no parameter 'nope'",
        ),
        (
            "model: m\ntools:\n  t:\n    callable: helper_tools:lookup\n    input:\n"
            "      query: tool_args.q.deep\n      locale: en\n",
            6,
            "tools.t.input.query",
            "only top-level tool_args",
        ),
        (
            "model: m\ntools:\n  t:\n    callable: helper_tools:lookup\n    input:\n"
            "      query: tool_args.q\n",
            5,
            "tools.t.input",
            "required parameter 'locale'",
        ),
        (
            "model: m\ntools:\n  bad name:\n    callable: helper_tools:close\n",
            3,
            "tools.bad name",
            "tool names use",
        ),
        (
            "model: m\ntools:\n  t:\n    callable: helper_tools:close\n    colour: red\n",
            5,
            "tools.t.colour",
            "unknown tool keyword",
        ),
        ("model: m\n  bad: [indent\n", 2, "", "invalid YAML"),
        ("- just\n- a list\n", 1, "", "must be a mapping"),
        ("model: m\ntool_timeout: .nan\n", 2, "tool_timeout", "must be > 0"),
        ("model: m\nsystem_prompt: ' '\n", 2, "system_prompt", "must not be empty"),
        (
            "model: m\nschedules:\n  r: &r\n    every: 1s\n    publish: a\n    data: *r\n",
            6,
            "schedules.r.data",
            "an alias inside the value it names",
        ),
        (
            "model: m\nschedules:\n  r:\n    every: 1s\n    publish: a\n    data: "
            + "[" * 70
            + "]" * 70
            + "\n",
            6,
            "",
            "nested more than 64 levels deep",
        ),
        (  # each line ten times the one before: a million values from six lines
            "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
            + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 6)),
            5,
            "a4",
            "more than 100000 values once its aliases are expanded",
        ),
    ],
)
def test_invalid_files_name_file_line_and_key(
    tmp_path: Path, text: str, line: int, key: str, problem: str
) -> None:
    assert_file_error(write(tmp_path, text), line, key, problem)


def assert_file_error(path: Path, line: int, key: str, problem: str) -> None:
    """Reading ``path`` fails with an AgentFileError naming the file, line and key."""
    with pytest.raises(AgentFileError) as info:
        AgentBuilder.from_file(path)
    error = info.value
    assert (error.file, error.line, error.key) == (str(path), line, key)
    assert problem in error.problem
    assert str(error).startswith(f"{path}:{line}: {key + ': ' if key else ''}")


BROKEN_MODULES = {
    "syntax_tools.py": "def f(:\n    pass\n",
    "raising_tools.py": "raise RuntimeError('no config')\n\ndef f() -> str:\n    return 'x'\n",
}


@pytest.mark.parametrize(
    ("text", "line", "key", "problem"),
    [
        ("model: m\non: push\n", 2, "on", "unknown keyword"),  # YAML 1.1 reads on: as true
        ("model: m\n1: one\n", 2, "1", "unknown keyword"),
        ("model: m\nmemory: {strategy: [full]}\n", 2, "memory", "must be a name"),
        ("model: m\nbus_tools: [[publish]]\n", 2, "bus_tools.0", "unknown bus tool"),
        (
            "model: m\ntools:\n  t:\n    callable: helper_tools:close\n    input:\n"
            "      1: tool_args.a\n",
            6,
            "tools.t.input.1",
            "has no parameter '1'",
        ),
        (
            "model: m\ntools:\n  t:\n    callable: helper_tools:close\n    input: [ticket]\n",
            5,
            "tools.t.input",
            "expected a mapping of parameter -> source, got list",
        ),
        (
            "model: m\ntools:\n  t:\n    callable: ./syntax_tools.py:f\n",
            4,
            "tools.t.callable",
            "SyntaxError",
        ),
        (
            "model: m\ntools:\n  t:\n    callable: raising_tools:f\n",
            4,
            "tools.t.callable",
            "RuntimeError: no config",
        ),
    ],
)
def test_mistakes_of_any_type_name_file_line_and_key(
    tmp_path: Path, text: str, line: int, key: str, problem: str
) -> None:
    for name, source in BROKEN_MODULES.items():
        (tmp_path / name).write_text(source)
    assert_file_error(write(tmp_path, text), line, key, problem)


def test_a_file_that_is_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "latin.agent.yaml"
    path.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(AgentFileError, match="cannot read the file: not UTF-8"):
        AgentBuilder.from_file(path)


@pytest.mark.parametrize("suffix", ["yaml", "toml"])
def test_a_file_nested_past_its_parsers_limit_is_a_clear_error(tmp_path: Path, suffix: str) -> None:
    nested = "[" * 5000 + "]" * 5000
    text = f"name: {nested}\n" if suffix == "yaml" else f"name = {nested}\n"
    path = write(tmp_path, text, name=f"deep.agent.{suffix}")
    with pytest.raises(AgentFileError, match=f"invalid {suffix.upper()}: nested too deeply"):
        AgentBuilder.from_file(path)


def test_invalid_toml_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, 'model = "m"\nmax_turns = 0\n', name="a.agent.toml")
    with pytest.raises(AgentFileError, match=r"a\.agent\.toml:2: max_turns: must be >= 1"):
        AgentBuilder.from_file(path)


def test_unreadable_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(AgentFileError, match="cannot read the file"):
        AgentBuilder.from_file(tmp_path / "missing.agent.yaml")


# -- builder -------------------------------------------------------------------


def test_builder_needs_only_the_llm(llm_server: ScriptedOpenAI, llm_client: OpenAIClient) -> None:
    agent = AgentBuilder().llm(llm_client).build()
    assert (agent.max_turns, agent.max_tool_concurrency, str(agent.memory)) == (10, None, "full()")
    assert len(agent.tools) == 0 and agent.model == "scripted-model"
    llm_server.reply("hi")
    assert agent.run("hello").content == "hi"
    assert llm_server.requests[0]["messages"] == [{"role": "user", "content": "hello"}]


def test_builder_without_llm_or_with_bad_parts_fails_clearly(llm_client: OpenAIClient) -> None:
    with pytest.raises(AgentConfigError, match=r"needs an LLM: call \.llm"):
        AgentBuilder().build()
    with pytest.raises(ExitConditionError):
        AgentBuilder().exit_condition("turn >>> 1")
    with pytest.raises(AgentConfigError, match="max_turns"):
        AgentBuilder().llm(llm_client).max_turns(0).build()
    # NaN passes a "<= 0" check: a timeout that every call would hit at once, and a
    # temperature no request could carry as JSON.
    with pytest.raises(AgentConfigError, match="tool_timeout must be > 0, got nan"):
        AgentBuilder().llm(llm_client).tool_timeout(math.nan).build()
    with pytest.raises(AgentConfigError, match="temperature must be a finite number"):
        AgentBuilder().llm(llm_client).temperature(math.nan).build()
    with pytest.raises(AgentConfigError, match="unknown memory strategy"):
        AgentBuilder().memory("forever(1)")

    def same() -> str:
        """Dup."""
        return ""

    with pytest.raises(AgentConfigError, match="two tools are named 'same'"):
        AgentBuilder().llm(llm_client).tool(same).tool(same).build()


def test_soul_file_is_the_system_prompt_and_is_reread(
    tmp_path: Path, llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    soul = tmp_path / "SOUL.md"
    soul.write_text("You are calm.\n")
    agent = (
        AgentBuilder()
        .llm(llm_client)
        .system_prompt_file(soul)
        .durable(tmp_path / "conv.db")
        .build()
    )
    assert isinstance(agent.soul, FileSoul)
    llm_server.reply("ok")
    agent.run("one", conversation="k")
    soul.write_text("You are brisk.\n")
    os.utime(soul, (1, 1))  # a distinct mtime, whatever the clock resolution
    llm_server.reply("ok")
    agent.run("two", conversation="k")
    assert llm_server.requests[0]["messages"][0]["content"] == "You are calm."
    assert llm_server.requests[1]["messages"][0]["content"] == "You are brisk."
    assert [m["content"] for m in llm_server.requests[1]["messages"][1:]] == ["one", "ok", "two"]
    with pytest.raises(AgentConfigError, match="not found"):
        AgentBuilder().system_prompt_file(tmp_path / "missing.md")


def test_a_soul_file_that_is_not_text_is_refused_and_a_bad_edit_keeps_the_last_prompt(
    tmp_path: Path, llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    soul = tmp_path / "SOUL.md"
    soul.write_bytes(b"\xff\xfe not text")
    with pytest.raises(AgentConfigError, match=r"SOUL\.md: cannot read the file: not UTF-8"):
        AgentBuilder().system_prompt_file(soul)
    soul.write_text("You are calm.\n")
    agent = AgentBuilder().llm(llm_client).system_prompt_file(soul).build()
    soul.write_bytes(b"\xff\xfe not text")
    os.utime(soul, (1, 1))  # a distinct mtime, whatever the clock resolution
    llm_server.reply("ok")
    assert agent.run("one").content == "ok"  # not a crash of every run
    assert llm_server.requests[0]["messages"][0]["content"] == "You are calm."


def test_a_system_prompt_over_the_limit_is_refused_where_the_agent_is_built(
    tmp_path: Path, llm_client: OpenAIClient
) -> None:
    """Every LLM request would carry it: refused naming its size and the limit, given
    to the builder or the loop, in a soul file or in an agent file (with its line)."""
    at_limit = "\u00e9" * (MAX_SYSTEM_PROMPT_BYTES // 2)  # 2 bytes of UTF-8 each
    agent = AgentBuilder().llm(llm_client).system_prompt(at_limit).build()
    assert agent.soul.system_prompt({}) == at_limit
    huge = "x" * (50 * 2**20)
    too_large = f"52,428,800 bytes of UTF-8, over the limit of {MAX_SYSTEM_PROMPT_BYTES:,} bytes"
    with pytest.raises(AgentConfigError, match=re.escape(f"system prompt: {too_large}")):
        AgentBuilder().system_prompt(huge)
    with pytest.raises(AgentConfigError, match=re.escape(too_large)):
        AgentLoop(llm_client, system_prompt=huge)
    with pytest.raises(AgentConfigError, match="1,000,001 bytes of UTF-8, over the limit"):
        AgentBuilder().system_prompt(at_limit + "x")
    soul = tmp_path / "SOUL.md"
    soul.write_text(huge)
    with pytest.raises(AgentConfigError, match=re.escape(f"SOUL.md: {too_large}")):
        AgentBuilder().system_prompt_file(soul)
    by_file = write(tmp_path, "model: m\nsystem_prompt_file: SOUL.md\n")
    assert_file_error(by_file, 2, "system_prompt_file", too_large)
    inline = write(tmp_path, "model: m\nsystem_prompt: " + "x" * (MAX_SYSTEM_PROMPT_BYTES + 1))
    assert_file_error(inline, 2, "system_prompt", "1,000,001 bytes of UTF-8, over the limit")


def test_a_soul_file_that_grows_past_the_limit_keeps_the_last_prompt(
    tmp_path: Path, llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    soul = tmp_path / "SOUL.md"
    soul.write_text("You are calm.\n")
    agent = AgentBuilder().llm(llm_client).system_prompt_file(soul).build()
    soul.write_text("x" * (MAX_SYSTEM_PROMPT_BYTES + 1))
    os.utime(soul, (1, 1))  # a distinct mtime, whatever the clock resolution
    llm_server.reply("ok")
    assert agent.run("one").content == "ok"
    assert llm_server.requests[0]["messages"][0]["content"] == "You are calm."


def test_summary_strategy_from_a_file_summarizes_with_the_agent_model(
    tmp_path: Path, llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    path = write(tmp_path, "model: m\nmemory: summary(1)\n")
    agent = load_agent_file(path, client=llm_client)
    # summary(1): every message beyond the latest one is folded into the summary.
    for answer in ("first answer", "gist 1", "gist 2", "second answer", "gist 3"):
        llm_server.reply(answer)
    agent.run("q1", conversation="s")
    output = agent.run("q2", conversation="s")
    assert output.content == "second answer"
    summary_calls = [
        r for r in llm_server.requests if r["messages"][0]["content"].startswith("Summarize")
    ]
    assert len(summary_calls) == 3 and all(r["model"] == "m" for r in summary_calls)
    assert llm_server.requests[3]["messages"] == [
        {
            "role": "system",
            "content": "Summary of the earlier conversation: gist 2",
            "name": "conversation_summary",
        },
        {"role": "user", "content": "q2"},
    ]
