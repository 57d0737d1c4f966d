"""Agent files: ``model`` is optional (the client's default serves the agent), and
tool mistakes name the callable as the file does, not by an internal module name."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2a_bus.llm import (
    AgentBuilder,
    AgentFileError,
    OpenAIClient,
    agent_class_from_file,
    load_agent_file,
)
from a2a_bus.llm.agent_file import callable_label

from .conftest import ScriptedOpenAI

pytestmark = pytest.mark.timeout(60)

TOOLS = '''
def search_knowledge_base(query: str, limit: int = 3) -> list[str]:
    """Search."""
    return [query] * limit
'''


def write(tmp_path: Path, text: str, name: str = "support.agent.yaml") -> Path:
    (tmp_path / "support_tools.py").write_text(TOOLS)
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_file_without_model_uses_the_clients_model(
    tmp_path: Path, llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    path = write(tmp_path, "name: support\nsystem_prompt: You help.\n")
    assert AgentBuilder.from_file(path).model_name is None
    llm_server.reply("hello")
    assert load_agent_file(path, client=llm_client).run("hi").content == "hello"
    assert llm_server.requests[0]["model"] == llm_client.model == "scripted-model"


def test_a_file_without_model_and_without_a_client_uses_the_environments_model(
    tmp_path: Path, llm_server: ScriptedOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("A2A_LLM_MODEL", "env-model")
    path = write(tmp_path, "name: support\n")
    llm_server.reply("from env")
    agent = load_agent_file(path)
    assert agent.run("hi").content == "from env"
    assert llm_server.requests[0]["model"] == "env-model"
    served = agent_class_from_file(path)
    assert served.agent_id == "support"


def test_an_explicit_null_model_is_the_default_and_a_wrong_type_an_error(tmp_path: Path) -> None:
    assert AgentBuilder.from_file(write(tmp_path, "name: s\nmodel:\n")).model_name is None
    with pytest.raises(AgentFileError, match=r":2: model: expected a model id string"):
        AgentBuilder.from_file(write(tmp_path, "name: s\nmodel: [a, b]\n"))


@pytest.mark.parametrize(
    "reference", ["support_tools:search_knowledge_base", "./support_tools.py:search_knowledge_base"]
)
def test_a_tool_mistake_names_the_callable_as_written(tmp_path: Path, reference: str) -> None:
    text = (
        f"name: h\ntools:\n  t:\n    callable: {reference}\n    input:\n"
        "      query: tool_args.q\n      nope: 1\n"
    )
    path = write(tmp_path, text)
    with pytest.raises(AgentFileError) as info:
        AgentBuilder.from_file(path)
    assert str(info.value) == (
        f"{path}:7: tools.t.input.nope: support_tools.search_knowledge_base has no parameter 'nope'"
    )
    missing = write(
        tmp_path, f"name: h\ntools:\n  t:\n    callable: {reference}\n    input:\n      limit: 2\n"
    )
    with pytest.raises(AgentFileError, match=r"of support_tools\.search_knowledge_base is not in"):
        AgentBuilder.from_file(missing)


def test_callable_label() -> None:
    assert callable_label("pkg.tools:search") == "pkg.tools.search"
    assert callable_label("lib/tools.py:Tools.search") == "tools.Tools.search"
