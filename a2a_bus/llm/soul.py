"""System-prompt providers (the agent's "soul"): none, static text or a file.

A prompt over :data:`MAX_SYSTEM_PROMPT_BYTES` is refused when the soul is made.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

from a2a_bus.core.payload import MAX_PAYLOAD_BYTES
from a2a_bus.llm.agent_doc import read_text
from a2a_bus.llm.errors import AgentConfigError

log = logging.getLogger(__name__)

#: Bytes of UTF-8 a system prompt may have. Every LLM request carries it, so one
#: larger than any one bus message may carry is a mistake (a wrong file), not a
#: prompt: no real one comes near.
MAX_SYSTEM_PROMPT_BYTES: Final = MAX_PAYLOAD_BYTES


def oversize(size: int) -> str | None:
    """Why a system prompt of ``size`` bytes of UTF-8 is refused (None: it is not)."""
    if size <= MAX_SYSTEM_PROMPT_BYTES:
        return None
    return (
        f"{size:,} bytes of UTF-8, over the limit of {MAX_SYSTEM_PROMPT_BYTES:,} bytes "
        "(MAX_SYSTEM_PROMPT_BYTES)"
    )


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
    """A fixed system prompt (``AgentConfigError`` over :data:`MAX_SYSTEM_PROMPT_BYTES`)."""

    def __init__(self, text: str) -> None:
        problem = oversize(len(text.encode("utf-8", "surrogatepass")))
        if problem is not None:
            raise AgentConfigError(f"system prompt: {problem}")
        self.text = text

    def system_prompt(self, context: Mapping[str, Any]) -> str | None:
        return self.text or None

    def __repr__(self) -> str:
        return f"StaticSoul({self.text[:40]!r})"


class FileSoul:
    """A system prompt kept in a file (e.g. ``SOUL.md``), re-read when it changes.

    A file that cannot be read as UTF-8 text, or is over
    :data:`MAX_SYSTEM_PROMPT_BYTES`, is refused when the soul is made; one that later
    vanishes, turns unreadable or grows past the limit leaves the last good prompt in use.
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
            status = self.path.stat()
        except OSError:
            return None  # vanished: keep the last good prompt
        if status.st_mtime == self._stamp:
            return None
        self._stamp = status.st_mtime  # a bad version is reported once, not at every run
        problem = oversize(status.st_size)  # the file's bytes are its text's UTF-8
        if problem is not None:
            return problem
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
