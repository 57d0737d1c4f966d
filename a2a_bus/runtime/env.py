"""Reading ``A2A_*`` environment variables, with errors that name them.

The one reader of settings: every part that takes a setting from the
environment (the bus in :mod:`a2a_bus.settings`, the Kafka transport, the
gateway, the event loop choice) reads it with these functions, so a value that
cannot be used is refused the same way everywhere, with the variable's name and
what it accepts (``A2A_REQUEST_TIMEOUT='abc': expected a positive number of seconds``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from a2a_bus.protocol import whole_number

_YES = ("1", "true", "yes", "on")
_NO = ("0", "false", "no", "off")


class EnvError(ValueError):
    """An environment variable holds a value that cannot be used."""


def environ(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def seconds(env: Mapping[str, str], name: str, *, zero: bool = False) -> float | None:
    """The positive (or, with ``zero``, non-negative) finite number of seconds
    ``name`` holds, or None when unset or empty."""
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (value >= 0 if zero else value > 0) or value == float("inf"):
        expected = "a number of seconds, 0 or more" if zero else "a positive number of seconds"
        raise EnvError(f"{name}={raw!r}: expected {expected}")
    return value


def count(env: Mapping[str, str], name: str) -> int | None:
    """The whole number (at least 1) ``name`` holds, or None when unset or empty."""
    return whole(env, name, 1)


def whole(env: Mapping[str, str], name: str, least: int = 0) -> int | None:
    """The whole number (at least ``least``) ``name`` holds, or None when unset or empty."""
    raw = env.get(name, "").strip()
    if not raw:
        return None
    number = whole_number(raw)
    if number is None or number < least:
        raise EnvError(f"{name}={raw!r}: expected a whole number, at least {least}")
    return number


def switch(env: Mapping[str, str], name: str) -> bool | None:
    """Whether ``name`` says yes (true, yes, on, 1) or no (false, no, off, 0), or
    None when unset or empty."""
    word = env.get(name, "").strip().lower()
    if not word:
        return None
    if word not in _YES + _NO:
        raise EnvError(f"{name}={env.get(name)!r}: expected true or false")
    return word in _YES


def choice(env: Mapping[str, str], name: str, choices: Sequence[str], default: str) -> str:
    """The value of ``name`` (case-insensitive, trimmed), one of ``choices`` as
    spelt there; ``default`` when unset or empty."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    for option in choices:
        if option.lower() == raw.lower():
            return option
    raise EnvError(f"{name}={env.get(name)!r}: expected one of {', '.join(choices)}")
