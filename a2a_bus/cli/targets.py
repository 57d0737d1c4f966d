"""What ``a2a-bus serve`` hosts: TARGET arguments -> Agent classes, checked before
anything starts (a bad target is bad usage, exit 2, never a traceback)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import typer

from a2a_bus.hosting.agent import Agent
from a2a_bus.runtime.modules import ModuleLoadError, import_module, load_file

AGENT_FILE_SUFFIXES = (".yaml", ".yml", ".toml")


def load_target(target: str) -> type[Agent]:
    """``module:Class``, ``path/to/file.py:Class`` or an agent file -> an Agent class."""
    if target.endswith(AGENT_FILE_SUFFIXES):
        return _agent_file(Path(target))
    where, _, name = target.rpartition(":")
    if not where or not name:
        raise typer.BadParameter(
            f"{target!r}: use module:Class, path/to/file.py:Class or an agent file",
            param_hint="TARGET",
        )
    try:
        module = load_file(where) if where.endswith(".py") else import_module(where)
    except ModuleLoadError as exc:
        raise typer.BadParameter(str(exc), param_hint="TARGET") from None
    found = getattr(module, name, None)
    if not (isinstance(found, type) and issubclass(found, Agent)):
        raise typer.BadParameter(f"{target!r} is not an Agent subclass", param_hint="TARGET")
    return found


def _agent_file(path: Path) -> type[Agent]:
    try:
        from a2a_bus.llm.bus_agent import agent_class_from_file  # type: ignore[import-not-found,unused-ignore]
        from a2a_bus.llm.errors import AgentFileError  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise typer.BadParameter(
            f"{path}: agent files need a2a_bus.llm (a2a_bus.llm.bus_agent is not available)",
            param_hint="TARGET",
        ) from None
    if not path.is_file():
        raise typer.BadParameter(f"no such file: {path}", param_hint="TARGET")
    try:
        agent_cls: type[Agent] = agent_class_from_file(path)
    except AgentFileError as exc:  # it starts with file:line: already
        raise typer.BadParameter(str(exc), param_hint="TARGET") from None
    except Exception as exc:  # the file's own error, without a traceback
        raise typer.BadParameter(f"{path}: {exc}", param_hint="TARGET") from None
    return agent_cls


def load_targets(targets: Sequence[str]) -> list[type[Agent]]:
    """The Agent classes of ``targets``; two targets with one agent id are refused
    (``--replicas`` runs more actors of one agent)."""
    classes: list[type[Agent]] = []
    for target in targets:
        agent_cls = load_target(target)
        same = [i for i, known in enumerate(classes) if known.agent_id == agent_cls.agent_id]
        if same:
            raise typer.BadParameter(
                f"agent id {agent_cls.agent_id!r} is served twice ({targets[same[0]]} and "
                f"{target}); "
                "use --replicas for more actors of one agent",
                param_hint="TARGET",
            )
        classes.append(agent_cls)
    return classes


def llm_warnings(targets: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    """Why the LLM agents among ``targets`` would fail every chat, as far as the
    environment tells: an agent file talks to the OpenAI API (``OPENAI_BASE_URL``,
    default api.openai.com), which needs ``OPENAI_API_KEY``."""
    env = os.environ if env is None else env
    files = [target for target in targets if target.endswith(AGENT_FILE_SUFFIXES)]
    if not files or env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"):
        return []
    from a2a_bus.llm.openai_client import DEFAULT_BASE_URL

    return [
        f"{target}: OPENAI_API_KEY is not set, so its chats with {DEFAULT_BASE_URL} will fail "
        "(set OPENAI_API_KEY, or OPENAI_BASE_URL for a server that needs no key)"
        for target in files
    ]
