"""System-prompt providers (the agent's "soul"): none, static text or a file."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from a2a_bus.llm.errors import AgentConfigError


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
    """A system prompt kept in a file (e.g. ``SOUL.md``), re-read when it changes."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        if not self.path.is_file():
            raise AgentConfigError(f"system prompt file not found: {self.path}")
        self._lock = threading.Lock()
        self._stamp: float | None = None
        self._text = ""

    def system_prompt(self, context: Mapping[str, Any]) -> str | None:
        with self._lock:
            try:
                stamp = self.path.stat().st_mtime
            except OSError:
                return self._text or None  # keep the last good prompt if the file vanishes
            if stamp != self._stamp:
                self._text = self.path.read_text(encoding="utf-8").strip()
                self._stamp = stamp
            return self._text or None

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
