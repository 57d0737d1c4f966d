"""System-prompt providers (the agent's "soul"): none, static text or a file."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from a2a_bus.llm.agent_doc import read_text
from a2a_bus.llm.errors import AgentConfigError

log = logging.getLogger(__name__)


@runtime_checkable
class SoulProvider(Protocol):
    """Gives the system prompt for a run (``None``: no system prompt)."""

    def system_prompt(self, context: Mapping[str, Any]) -> str | None: ...


class NoSoul:
    """No system prompt."""

    def system_prompt(self, context: Mapping[str, Any]) -> str | None:
        return None

    def __repr__(self) -> str:
        return "NoSoul()"


class StaticSoul:
    """A fixed system prompt."""

    def __init__(self, text: str) -> None:
        self.text = text

    def system_prompt(self, context: Mapping[str, Any]) -> str | None:
        return self.text or None

    def __repr__(self) -> str:
        return f"StaticSoul({self.text[:40]!r})"


class FileSoul:
    """A system prompt kept in a file (e.g. ``SOUL.md``), re-read when it changes.

    A file that cannot be read as UTF-8 text is refused when the soul is made; one
    that later vanishes or turns unreadable leaves the last good prompt in use.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        if not self.path.is_file():
            raise AgentConfigError(f"system prompt file not found: {self.path}")
        self._lock = threading.Lock()
        self._stamp: float | None = None
        self._text = ""
        problem = self._reread()
        if problem is not None:
            raise AgentConfigError(f"system prompt file {self.path}: {problem}")

    def _reread(self) -> str | None:
        """Take the file's text if it changed; why it cannot be read, if so."""
        try:
            stamp = self.path.stat().st_mtime
        except OSError:
            return None  # vanished: keep the last good prompt
        if stamp == self._stamp:
            return None
        self._stamp = stamp  # a bad version is reported once, not at every run
        try:
            self._text = read_text(self.path).strip()
        except AgentConfigError as exc:
            return str(exc)
        return None

    def system_prompt(self, context: Mapping[str, Any]) -> str | None:
        with self._lock:
            problem = self._reread()
            text = self._text
        if problem is not None:
            log.warning("system prompt file %s: %s; the last good one is kept", self.path, problem)
        return text or None

    def __repr__(self) -> str:
        return f"FileSoul({str(self.path)!r})"


class CallableSoul:
    """A system prompt computed by a function of the run context."""

    def __init__(self, func: Callable[[Mapping[str, Any]], str | None]) -> None:
        self.func = func

    def system_prompt(self, context: Mapping[str, Any]) -> str | None:
        return self.func(context)


def as_soul(
    value: str | SoulProvider | Callable[[Mapping[str, Any]], str | None] | None,
) -> SoulProvider:
    """Accept the usual spellings: None, a string, a provider or a function."""
    if value is None:
        return NoSoul()
    if isinstance(value, str):
        return StaticSoul(value)
    if isinstance(value, SoulProvider):
        return value
    if callable(value):
        return CallableSoul(value)
    raise AgentConfigError(f"not a system prompt or soul provider: {value!r}")
