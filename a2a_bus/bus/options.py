"""The checks and defaults of the Bus's keyword options.

Each is checked where it is given, not where it is used: a 0 heartbeat would spin
a core, a 0 timeout fail every later call, each far from the mistake.
"""

from __future__ import annotations

import math
import os
from typing import Any

from a2a_bus.discovery.directory import REQUIRE_KNOWN_ENV
from a2a_bus.runtime.env import switch
from a2a_bus.transport.base import Transport
from a2a_bus.transport.kafka import KafkaTransport

#: Seconds a stop waits for running handlers unless the bus is told otherwise (on
#: Kafka: the transport's ``drain_timeout``).
DEFAULT_DRAIN_TIMEOUT = 10.0


def check_seconds(name: str, value: Any, *, finite: bool = True, zero: bool = False) -> None:
    """TypeError unless ``value`` is a number, ValueError unless it is positive (or,
    with ``zero``, 0) and, with ``finite``, not infinite; NaN is none of these."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds, not {value!r}")
    if not (value >= 0 if zero else value > 0) or (finite and math.isinf(value)):
        kind = ("non-negative" if zero else "positive") + (" finite" if finite else "")
        raise ValueError(f"{name} must be a {kind} number of seconds, not {value!r}")


def check_call_depth(max_call_depth: Any) -> None:
    """ValueError unless ``max_call_depth`` is an integer >= 1."""
    if type(max_call_depth) is not int or max_call_depth < 1:
        raise ValueError(f"max_call_depth must be an integer >= 1, not {max_call_depth!r}")


def drain_timeout_of(transport: Transport, given: float | None) -> float:
    """The seconds a stop waits for running handlers: ``given``, else (one setting
    bounds the whole stop) on Kafka the transport's ``drain_timeout``, else the
    default; checked."""
    drain_timeout = given
    if drain_timeout is None:
        drain_timeout = DEFAULT_DRAIN_TIMEOUT
        if isinstance(transport, KafkaTransport):
            drain_timeout = transport.settings.drain_timeout
    check_seconds("drain_timeout", drain_timeout, finite=False, zero=True)
    return drain_timeout


def require_known(given: bool | str | None) -> bool:
    """Whether messages to unknown agents are refused: ``given`` (a flag, or the words
    the environment takes), else ``A2A_REQUIRE_KNOWN_AGENTS``; true when neither says
    (empty is unset, as for every variable)."""
    if isinstance(given, bool):
        return given
    found = switch(os.environ if given is None else {REQUIRE_KNOWN_ENV: given}, REQUIRE_KNOWN_ENV)
    return True if found is None else found
