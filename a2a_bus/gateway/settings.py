"""Settings of the HTTP gateway: limits, timeouts and access tokens."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from a2a_bus.core.routing import RoutingError, validate_name
from a2a_bus.gateway.auth import Access
from a2a_bus.protocol.constants import DEFAULT_MAX_BATCH, DEFAULT_MAX_MESSAGE_BYTES
from a2a_bus.runtime.env import count, seconds

ENV_PREFIX = "A2A_GATEWAY_"
#: The settings that count something (at least 1).
#: How many A2A tasks a gateway remembers; the oldest finished are forgotten first.
DEFAULT_MAX_TASKS = 1000
#: How many of them one owner may hold: a quarter of the store, so one token's
#: flood leaves the rest to the others.
DEFAULT_MAX_TASKS_PER_OWNER = DEFAULT_MAX_TASKS // 4
_COUNTS = ("max_body_bytes", "max_batch", "a2a_max_tasks", "a2a_max_tasks_per_owner")


@dataclass(frozen=True)
class GatewaySettings:
    """How the gateway answers: limits, deadlines, and who may call what.

    With no ``tokens`` the gateway is open; with tokens every request needs
    ``Authorization: Bearer <token>`` and is held to that token's allow-lists.
    """

    #: Largest request body accepted (413 beyond), checked while reading.
    max_body_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    #: Longest JSON-RPC or CloudEvents batch accepted.
    max_batch: int = DEFAULT_MAX_BATCH
    #: Seconds a JSON-RPC request waits for its answer (per chunk for streams).
    request_timeout: float = 30.0
    #: The ``source`` attribute of events the gateway creates.
    source: str = "a2a-bus-gateway"
    #: A2A tasks the gateway keeps for ``tasks/get``, all tokens together.
    a2a_max_tasks: int = DEFAULT_MAX_TASKS
    #: A2A tasks one token keeps at most (only with tokens: without, all callers are one).
    a2a_max_tasks_per_owner: int = DEFAULT_MAX_TASKS_PER_OWNER
    #: The agent served at the host's root as an A2A agent (its card at
    #: ``/.well-known/agent-card.json``, its endpoint ``POST /``), for clients that
    #: know only a host; None: the root's card is the gateway's.
    a2a_root: str | None = None
    #: Bearer token -> what it may reach.
    tokens: Mapping[str, Access] = field(default_factory=dict, repr=False)

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, **overrides: Any
    ) -> GatewaySettings:
        """Read ``A2A_GATEWAY_MAX_BODY_BYTES``, ``_MAX_BATCH``, ``_REQUEST_TIMEOUT``,
        ``_SOURCE``, ``_A2A_ROOT``, ``_A2A_MAX_TASKS``, ``_A2A_MAX_TASKS_PER_OWNER``,
        ``_TOKEN`` (one token with full access) and ``_TOKENS_FILE`` (YAML or JSON:
        ``{token: {agents: [...], methods: [...], topics: [...]}}``)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name in _COUNTS:
            number = count(env, ENV_PREFIX + name.upper())
            if number is not None:
                values[name] = number
        timeout = seconds(env, ENV_PREFIX + "REQUEST_TIMEOUT")
        if timeout is not None:
            values["request_timeout"] = timeout
        for name in ("source", "a2a_root"):
            text = env.get(ENV_PREFIX + name.upper())
            if text:
                values[name] = text
        tokens: dict[str, Access] = {}
        tokens_file = env.get(ENV_PREFIX + "TOKENS_FILE")
        if tokens_file:
            tokens.update(load_tokens(Path(tokens_file)))
        single = env.get(ENV_PREFIX + "TOKEN")
        if single:
            tokens[single] = Access(name="env")
        if tokens:
            values["tokens"] = tokens
        values.update(overrides)
        return cls(**values)

    def __post_init__(self) -> None:
        for name in _COUNTS:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.a2a_root is not None:
            try:
                validate_name(self.a2a_root)
            except RoutingError as exc:
                raise ValueError(f"a2a_root: {exc.message}") from None
        # A deadline <= 0 fails every request at once; nan or inf is no deadline.
        if not (self.request_timeout > 0 and math.isfinite(self.request_timeout)):
            raise ValueError(
                f"request_timeout must be a positive number of seconds, not {self.request_timeout}"
            )


def load_tokens(path: Path) -> dict[str, Access]:
    """Tokens from a YAML or JSON file: ``{token: {name, agents, methods, topics}}``.

    A missing list allows everything of that kind; an empty list allows nothing.
    Any mistake in the file raises ValueError naming the file (and the token).
    """
    text = path.read_bytes()
    try:
        data = orjson.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (orjson.JSONDecodeError, yaml.YAMLError) as exc:
        kind = "JSON" if path.suffix == ".json" else "YAML"
        raise ValueError(f"{path}: not valid {kind}: {_syntax_error(exc)}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of token -> allow-lists")
    tokens: dict[str, Access] = {}
    for index, (token, entry) in enumerate(data.items(), 1):
        if entry is not None and not isinstance(entry, dict):
            raise ValueError(f"{path}: token #{index}: expected a mapping of allow-lists")
        try:
            tokens[str(token)] = Access.from_dict(entry or {}, f"token-{index}")
        except ValueError as exc:
            raise ValueError(f"{path}: token #{index}: {exc}") from None
    return tokens


def _syntax_error(exc: Exception) -> str:
    """A parser's complaint in one line (YAML's spans several, with a code excerpt)."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"{exc.problem} (line {mark.line + 1}, column {mark.column + 1})"
    return " ".join(str(exc).split())
