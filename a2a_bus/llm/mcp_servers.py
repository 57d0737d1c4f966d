"""MCP servers an LLM agent mounts: what to start (a command, over stdio) or reach
(a URL, over streamable HTTP), and how that is written in an agent file.

Pure description: :mod:`a2a_bus.llm.mcp_tools` starts them and makes their tools.

.. code-block:: yaml

    mcp_servers:
      files:                              # tools files__read_file, files__list_dir, ...
        command: python
        args: [files_server.py, --root, /data]
        env: {LOG_LEVEL: info}            # ${NAME} takes a variable of this process
        cwd: .                            # default: the agent file's folder
      search:
        url: http://127.0.0.1:9000/mcp
        headers: {Authorization: "Bearer ${SEARCH_TOKEN}"}
        tools: [search]                   # only these tools of the server (default: all)
        timeout: 30                       # seconds one tool call may take (default 60)
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: What an agent calls a server: its tools are named ``<server>__<tool>``.
SERVER_NAME = re.compile(r"^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$")
SEPARATOR = "__"
SERVER_KEYS = {
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "tools",
    "timeout",
    "start_timeout",
}
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class McpConfigError(ValueError):
    """An MCP server entry that cannot work; ``key`` names the offending entry."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(problem)
        self.key = key


@dataclass(frozen=True)
class McpServer:
    """One MCP server: ``command`` (+ ``args``, ``env``, ``cwd``) runs it as a child
    process spoken to over stdio; ``url`` (+ ``headers``) reaches it over streamable HTTP.

    ``tools`` keeps only the named tools of the server; ``timeout`` bounds one tool
    call, ``start_timeout`` the start and handshake.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    tools: tuple[str, ...] | None = None
    timeout: float = 60.0
    start_timeout: float = 30.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not SERVER_NAME.match(self.name):
            raise McpConfigError(
                "name",
                f"invalid MCP server name {self.name!r}: use letters, digits, '-' and single '_'",
            )
        if (self.command is None) == (self.url is None):
            raise McpConfigError("command", "give command (stdio) or url (HTTP), exactly one")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise McpConfigError("url", f"expected an http:// or https:// URL, got {self.url!r}")
        if self.command is not None and not self.command.strip():
            raise McpConfigError("command", "must not be empty")
        for key in ("timeout", "start_timeout"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise McpConfigError(key, f"must be a positive number of seconds, not {value!r}")

    @classmethod
    def stdio(
        cls,
        name: str,
        command: str,
        *args: str,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        **options: Any,
    ) -> McpServer:
        """A server run as ``command args...``, spoken to over its stdin and stdout."""
        where = None if cwd is None else os.fspath(cwd)
        return cls(name, command=command, args=tuple(args), env=env, cwd=where, **options)

    @classmethod
    def http(
        cls, name: str, url: str, headers: Mapping[str, str] | None = None, **options: Any
    ) -> McpServer:
        """A server reached at ``url`` over streamable HTTP, with ``headers`` on every request."""
        return cls(name, url=url, headers=dict(headers or {}), **options)

    @property
    def where(self) -> str:
        """How messages name what was started or reached."""
        if self.url is not None:
            return self.url
        return " ".join([self.command or "", *self.args])

    @classmethod
    def from_dict(
        cls, name: str, entry: Mapping[str, Any], base: Path, env: Mapping[str, str] | None = None
    ) -> McpServer:
        """An agent file's entry; relative ``cwd`` is taken from ``base`` (the file's
        folder, also the default), ``${NAME}`` in env and headers from ``env``."""
        environ = os.environ if env is None else env
        if not isinstance(entry, Mapping):
            raise McpConfigError("", "expected a mapping with command (stdio) or url (HTTP)")
        unknown = sorted(set(entry) - SERVER_KEYS)
        if unknown:
            keys = ", ".join(sorted(SERVER_KEYS))
            raise McpConfigError(unknown[0], f"unknown keyword; expected one of {keys}")
        options: dict[str, Any] = {}
        for key in ("command", "url"):
            if key in entry:
                options[key] = _text(entry[key], key)
        if "args" in entry:
            options["args"] = tuple(_text(item, "args") for item in _list(entry["args"], "args"))
        for key in ("env", "headers"):
            if key in entry:
                options[key] = {
                    str(k): _expand(_text(v, key, scalar=True), key, environ)
                    for k, v in _mapping(entry[key], key).items()
                }
        if "tools" in entry:
            names = _list(entry["tools"], "tools")
            options["tools"] = tuple(_text(item, "tools") for item in names)
        for key in ("timeout", "start_timeout"):
            if key in entry:
                options[key] = entry[key]
        if "url" not in options:
            cwd = _text(entry["cwd"], "cwd") if "cwd" in entry else "."
            options["cwd"] = str((base / cwd).resolve())
        elif "cwd" in entry or "env" in entry or "args" in entry:
            key = next(k for k in ("args", "env", "cwd") if k in entry)
            raise McpConfigError(key, "applies to a command (stdio), not to a url")
        elif "headers" not in options:
            options["headers"] = {}
        return cls(name, **options)


def servers_from(entries: Any, base: Path) -> list[McpServer]:
    """The ``mcp_servers`` mapping of an agent file (name -> entry)."""
    if not isinstance(entries, Mapping):
        raise McpConfigError("", "expected a mapping of server name -> command or url")
    servers = []
    for name, entry in entries.items():
        try:
            servers.append(McpServer.from_dict(str(name), entry, base))
        except McpConfigError as exc:
            raise McpConfigError(f"{name}.{exc.key}" if exc.key else str(name), str(exc)) from None
    return servers


def check_unique(servers: Sequence[McpServer]) -> None:
    """ValueError when two servers share a name (their tools would collide)."""
    seen: set[str] = set()
    for server in servers:
        if server.name in seen:
            raise ValueError(f"two MCP servers are named {server.name!r}")
        seen.add(server.name)


def _text(value: Any, key: str, *, scalar: bool = False) -> str:
    if scalar and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise McpConfigError(key, f"expected a string, got {type(value).__name__}")
    return value


def _list(value: Any, key: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise McpConfigError(key, f"expected a list, got {type(value).__name__}")
    return list(value)


def _mapping(value: Any, key: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise McpConfigError(key, f"expected a mapping, got {type(value).__name__}")
    return value


def _expand(text: str, key: str, environ: Mapping[str, str]) -> str:
    """``${NAME}`` replaced by the variable's value; an unset one is an error."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise McpConfigError(key, f"${{{name}}} is not set in the environment")
        return environ[name]

    return _VARIABLE.sub(value, text)
