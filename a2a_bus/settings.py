"""The bus's settings from ``A2A_*`` environment variables (read with
:mod:`a2a_bus.runtime.env`).

An ``A2A_KAFKA_*`` name that is no Kafka setting (a typo, most likely) is
reported once instead of being ignored without a word.
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from a2a_bus.core.routing import RoutingError, validate_name
from a2a_bus.runtime import loops
from a2a_bus.runtime.affinity import ENV as PIN_ENV
from a2a_bus.runtime.collector import ENV as GC_ENV
from a2a_bus.runtime.collector import choose_threshold
from a2a_bus.runtime.env import EnvError, choice, count, environ, seconds
from a2a_bus.transport.kafka.config import KafkaSettings

log = logging.getLogger(__name__)

TRANSPORTS = ("memory", "kafka")
KAFKA_PREFIX = "A2A_KAFKA_"
#: Kafka settings that only code can give (objects, not strings).
_KAFKA_CODE_ONLY = frozenset({"ssl_context", "sasl_oauth_token_provider"})
_SECONDS = (("request_timeout", "A2A_REQUEST_TIMEOUT"), ("heartbeat", "A2A_HEARTBEAT"))
HEARTBEAT_ENV = "A2A_HEARTBEAT"
#: The shortest heartbeat the environment may set: each one publishes every card
#: of the process, so a shorter one keeps a core busy announcing and the registry
#: growing, and no expiry needs cards that fresh.
MIN_HEARTBEAT = 0.1
_warned: set[str] = set()


def transport_kind(env: Mapping[str, str] | None = None) -> str:
    """``A2A_TRANSPORT``; without it ``kafka`` when a bootstrap is set, else ``memory``
    (an empty variable counts as unset: it names no broker)."""
    env = environ(env)
    bootstraps = ("A2A_KAFKA_BOOTSTRAP_SERVERS", "KAFKA_BOOTSTRAP_SERVERS")
    has_kafka = any(env.get(name, "").strip() for name in bootstraps)
    return choice(env, "A2A_TRANSPORT", TRANSPORTS, "kafka" if has_kafka else "memory")


def bus_environment(
    kafka: str | None, prefix: str | None, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment a command's bus is built from: the process's, with the
    command-line flags on top (``--kafka`` chooses Kafka at that bootstrap)."""
    out = dict(os.environ if env is None else env)
    if kafka:
        out["A2A_TRANSPORT"] = "kafka"
        out["A2A_KAFKA_BOOTSTRAP_SERVERS"] = kafka
    if prefix is not None:
        out["A2A_PREFIX"] = prefix
    return out


def bus_options(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``Bus(...)`` keyword arguments from ``A2A_PREFIX``, ``A2A_NODE``,
    ``A2A_REQUEST_TIMEOUT``, ``A2A_HEARTBEAT``, ``A2A_MAX_CALL_DEPTH``, ``A2A_PIN_CPU`` and
    ``A2A_GC_THRESHOLD``.

    Also checks ``A2A_TRANSPORT`` and ``A2A_EVENT_LOOP`` and reports misspelt
    ``A2A_KAFKA_*`` names, so that a bad environment fails when the bus is built,
    not later and elsewhere.
    """
    env = environ(env)
    prefix = env.get("A2A_PREFIX", "a2a")
    options: dict[str, Any] = {"prefix": _name(env, "A2A_PREFIX", prefix, "topic prefix")}
    if env.get("A2A_NODE"):
        options["node"] = _name(env, "A2A_NODE", env["A2A_NODE"], "node id")
    for option, name in _SECONDS:
        value = seconds(env, name)
        if value is not None:
            options[option] = value
    if options.get("heartbeat", MIN_HEARTBEAT) < MIN_HEARTBEAT:
        raise EnvError(
            f"{HEARTBEAT_ENV}={env[HEARTBEAT_ENV]!r}: expected at least {MIN_HEARTBEAT} seconds"
        )
    depth = count(env, "A2A_MAX_CALL_DEPTH")
    if depth is not None:
        options["max_call_depth"] = depth
    options["pin_cpu"] = env.get(PIN_ENV, "off")
    try:
        options["gc_threshold"] = choose_threshold(env.get(GC_ENV, "")) or "off"
    except ValueError as exc:
        raise EnvError(str(exc)) from None
    transport_kind(env)
    loops.loop_choice(env)
    warn_unknown_kafka_names(env)
    return options


def _name(env: Mapping[str, str], variable: str, value: str, what: str) -> str:
    try:
        return validate_name(value, what)
    except RoutingError:
        raise EnvError(f"{variable}={value!r}: a {what} is made of [A-Za-z0-9._-]") from None


def unknown_kafka_names(env: Mapping[str, str] | None = None) -> list[tuple[str, str | None]]:
    """``A2A_KAFKA_*`` variables that name no Kafka setting, each with the closest
    known name (or None)."""
    env = environ(env)
    names = [name for name in env if name.startswith(KAFKA_PREFIX)]
    if not names:
        return []
    settable = [f.name for f in fields(KafkaSettings) if f.name not in _KAFKA_CODE_ONLY]
    unknown = []
    for name in sorted(names):
        setting = name.removeprefix(KAFKA_PREFIX).lower()
        if setting not in settable:
            close = difflib.get_close_matches(setting, settable, n=1)
            unknown.append((name, KAFKA_PREFIX + close[0].upper() if close else None))
    return unknown


def warn_unknown_kafka_names(env: Mapping[str, str] | None = None) -> None:
    """Log a warning, once per name, for each misspelt ``A2A_KAFKA_*`` variable."""
    for name, close in unknown_kafka_names(env):
        if name in _warned:
            continue
        _warned.add(name)
        hint = f" (did you mean {close}?)" if close else ""
        log.warning("%s is not a Kafka setting and is ignored%s", name, hint)
