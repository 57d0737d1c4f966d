"""Settings of the HTTP gateway: limits, timeouts and access tokens."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson
import yaml

from a2a_bus.core.routing import RoutingError, validate_name
from a2a_bus.gateway.auth import Access
from a2a_bus.gateway.url_policy import AllowList, split_entries
from a2a_bus.protocol.constants import DEFAULT_MAX_BATCH, DEFAULT_MAX_MESSAGE_BYTES
from a2a_bus.runtime.env import EnvError, count, seconds

ENV_PREFIX = "A2A_GATEWAY_"
T = TypeVar("T")
#: The settings that count something (at least 1).
#: How many A2A tasks a gateway remembers; the oldest finished are forgotten first.
DEFAULT_MAX_TASKS = 1000
#: How many of them one owner may hold: a quarter of the store, so one token's
#: flood leaves the rest to the others.
DEFAULT_MAX_TASKS_PER_OWNER = DEFAULT_MAX_TASKS // 4
_COUNTS = (
    "max_body_bytes",
    "max_batch",
    "a2a_max_tasks",
    "a2a_max_tasks_per_owner",
    "push_max_attempts",
)
#: The settings that are a positive, finite number of seconds.
_SECONDS = ("request_timeout", "push_timeout", "push_backoff", "push_backoff_max")
#: The durations that may be left unset (None: another setting's value).
_OPTIONAL_SECONDS = ("a2a_task_inactivity", "a2a_blocking_wait")


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
    #: Seconds an A2A task's agent may stay silent (no start, progress, chunk or
    #: answer) before the task fails; None: ``request_timeout``.
    a2a_task_inactivity: float | None = None
    #: Seconds a blocking A2A send waits for its task to end or ask for input; a task
    #: still working then is answered as it is (the caller polls, subscribes or is
    #: pushed the rest). None: ``request_timeout``.
    a2a_blocking_wait: float | None = None
    #: Where A2A tasks' latest states are kept beyond the task log: ``memory`` (not
    #: kept: the view holds what the log retains), ``sqlite:///path/to/tasks.db``
    #: (a SQLite file; ``sqlite://tasks.db`` is relative to the working directory) or
    #: ``kafka`` (the compacted topic ``<prefix>.tasks.state``). None: ``kafka`` on
    #: a transport with a broker, ``memory`` on the in-memory one.
    a2a_task_store: str | None = None
    #: Hosts and networks push-notification webhooks may reach although they are not
    #: public (loopback, private...): host names, addresses or CIDRs.
    push_allow: tuple[str, ...] = ()
    #: Attempts at one webhook delivery (the first and its retries).
    push_max_attempts: int = 6
    #: Seconds one webhook POST may take.
    push_timeout: float = 10.0
    #: Seconds before the first retry; doubled for each next one (with jitter).
    push_backoff: float = 0.5
    #: Longest wait between two attempts, in seconds.
    push_backoff_max: float = 30.0
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
        ``_A2A_TASK_INACTIVITY``, ``_A2A_BLOCKING_WAIT``, ``_A2A_TASK_STORE``, ``_PUSH_ALLOW``
        (comma-separated hosts and CIDRs), ``_PUSH_MAX_ATTEMPTS``, ``_PUSH_TIMEOUT``,
        ``_PUSH_BACKOFF``, ``_PUSH_BACKOFF_MAX``, ``_TOKEN`` (one token with full
        access) and ``_TOKENS_FILE`` (YAML or JSON:
        ``{token: {agents: [...], methods: [...], topics: [...]}}``)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name in _COUNTS:
            number = count(env, ENV_PREFIX + name.upper())
            if number is not None:
                values[name] = number
        for name in _SECONDS:
            delay = seconds(env, ENV_PREFIX + name.upper())
            if delay is not None:
                values[name] = delay
        allow = split_entries(env.get(ENV_PREFIX + "PUSH_ALLOW", ""))
        if allow:
            values["push_allow"] = allow
        for name in _OPTIONAL_SECONDS:
            value = seconds(env, ENV_PREFIX + name.upper())
            if value is not None:
                values[name] = value
        store = env.get(ENV_PREFIX + "A2A_TASK_STORE")
        if store:
            _named(env, "A2A_TASK_STORE", _task_store)
            values["a2a_task_store"] = store
        for name in ("source", "a2a_root"):
            text = env.get(ENV_PREFIX + name.upper())
            if text:
                values[name] = text
        if values.get("a2a_root"):
            _named(env, "A2A_ROOT", _root_agent)
        tokens: dict[str, Access] = {}
        tokens_file = env.get(ENV_PREFIX + "TOKENS_FILE")
        if tokens_file:
            tokens.update(_named(env, "TOKENS_FILE", lambda path: load_tokens(Path(path))))
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
                _root_agent(self.a2a_root)
            except ValueError as exc:
                raise ValueError(f"a2a_root: {exc}") from None
        # A deadline <= 0 fails every request at once; nan or inf is no deadline.
        for name in _SECONDS:
            value = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a positive number of seconds, not {value}")
        if isinstance(self.push_allow, str):
            # One string would be taken letter by letter: split it as the variable is.
            object.__setattr__(self, "push_allow", split_entries(self.push_allow))
        AllowList.parse(self.push_allow)  # a bad entry fails here, at start-up
        for name in _OPTIONAL_SECONDS:
            value = getattr(self, name)
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a positive number of seconds, not {value}")
        parse_task_store(self.a2a_task_store)  # a bad value fails here, at start-up


def _named(env: Mapping[str, str], setting: str, read: Callable[[str], T]) -> T:
    """``read`` of the variable ``A2A_GATEWAY_<setting>``; an error names the variable."""
    name = ENV_PREFIX + setting
    try:
        return read(env[name])
    except OSError as exc:  # the tokens file: no such file, not readable
        raise EnvError(f"{name}={env[name]!r}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise EnvError(f"{name}={env[name]!r}: {exc}") from None


def _root_agent(agent_id: str) -> str:
    """``agent_id`` if it can name the root agent, else ValueError."""
    try:
        return validate_name(agent_id)
    except RoutingError as exc:
        raise ValueError(exc.message) from None


def _task_store(spec: str) -> None:
    try:
        parse_task_store(spec)
    except ValueError:
        raise ValueError(f"expected {TASK_STORES}") from None


def parse_task_store(spec: str | None) -> tuple[str, str | None]:
    """``a2a_task_store`` as ``(kind, path)``: kind ``auto`` (unset), ``memory``,
    ``kafka`` or ``sqlite`` (with the file's path). Raises ValueError otherwise."""
    if spec is None or spec.strip() in ("", "auto"):
        return "auto", None
    spec = spec.strip()
    if spec in ("memory", "kafka"):
        return spec, None
    if spec.startswith(_SQLITE):
        path = spec.removeprefix(_SQLITE)
        if path and not path.endswith("/"):
            return "sqlite", path
    raise ValueError(f"a2a_task_store must be {TASK_STORES}, not {spec!r}")


_SQLITE = "sqlite://"
TASK_STORES = "'memory', 'kafka' or 'sqlite:///path/to/file.db'"


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
