"""Schedules: when a tick falls due (a fixed interval, or a cron expression) and
what it does (publish an event on a subject, or call an agent's method). Pure: no I/O.

Times are whole milliseconds since the epoch. Interval ticks fall on the multiples
of the interval (every 60 s: on the minute), so every process computes the same
ticks; cron ticks come from ``croniter`` in the schedule's time zone (five fields,
or six with seconds last).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from a2a_bus.core.payload import PayloadError, check_payload
from a2a_bus.core.routing import RoutingError, validate_name, validate_subject
from a2a_bus.protocol import Kind, classify

#: Schedule names: a word of letters, digits, ``-``, ``_`` and ``.``.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
#: The shortest interval (each tick writes to the bus).
MIN_EVERY = 0.05
#: The longest interval: a year (366 days). Ticks fall on multiples of the interval
#: since the epoch, so a longer one may not fire for decades, or ever.
MAX_EVERY = 366 * 86400.0
MISSED = ("skip", "catch_up")
#: Missed cron ticks counted beyond those kept, at most: croniter steps back one tick
#: at a time, so counting all of a long gap (a per-second schedule down for a day)
#: would hold the bus loop for seconds.
MAX_COUNTED = 1000
KEYS = {"every", "cron", "timezone", "publish", "data", "call", "params", "missed", "max_catch_up"}
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")


class ScheduleError(ValueError):
    """A schedule that cannot work; ``key`` names the offending entry."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(problem)
        self.key = key


def iso(ms: int) -> str:
    """A tick time as RFC 3339 UTC with milliseconds."""
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def seconds(value: Any, key: str = "every") -> float:
    """A duration: a number of seconds, or text such as ``"90s"``, ``"5m"``, ``"1h"``."""
    if isinstance(value, bool):
        raise ScheduleError(key, "expected seconds or a duration such as 30s, 5m, 1h")
    if isinstance(value, int | float):
        return float(value)
    match = _DURATION.match(value) if isinstance(value, str) else None
    if match is None:
        raise ScheduleError(
            key, f"expected seconds or a duration such as 30s, 5m, 1h, not {value!r}"
        )
    return float(match.group(1)) * _UNITS[match.group(2)]


@dataclass(frozen=True)
class Schedule:
    """One schedule: ``every`` (seconds, or a duration such as ``"5m"``) or ``cron``;
    ``publish`` (a subject, with ``data``) or ``call`` (agent and method, with ``params``).

    ``missed`` says what happens to ticks that fell due while no scheduler ran
    (every process down), or while one was held up past the next tick: ``skip``
    fires only the latest of them, ``catch_up``
    fires each of them, oldest first, at most ``max_catch_up``.
    """

    name: str
    every: float | None = None
    cron: str | None = None
    timezone: str = "UTC"
    publish: str | None = None
    data: Any = None
    call: tuple[str, str] | None = None
    params: Any = None
    missed: Literal["skip", "catch_up"] = "skip"
    max_catch_up: int = 1000

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not NAME.match(self.name):
            raise ScheduleError("name", f"invalid schedule name {self.name!r}")
        for key in ("cron", "timezone", "publish", "missed"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, str):
                raise ScheduleError(key, f"expected a string, got {type(value).__name__}")
        if (self.every is None) == (self.cron is None):
            raise ScheduleError("every", "give every (an interval) or cron, exactly one")
        if self.every is not None:  # "1h" as in a schedule file; bad types named here
            object.__setattr__(self, "every", seconds(self.every))
        if self.every is not None and not MIN_EVERY <= self.every <= MAX_EVERY:
            raise ScheduleError(
                "every", f"must be from {MIN_EVERY} seconds to {MAX_EVERY / 86400:g} days"
            )
        if self.cron is not None and not croniter.is_valid(self.cron):
            raise ScheduleError("cron", f"invalid cron expression {self.cron!r}")
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ScheduleError("timezone", f"unknown time zone {self.timezone!r}") from None
        if self.cron is not None:
            self._check_cron_fires()
        if (self.publish is None) == (self.call is None):
            raise ScheduleError("publish", "give publish (a subject) or call, exactly one")
        if self.call is not None:
            object.__setattr__(self, "call", _call_pair(self.call))
        self._check_action()
        if self.missed not in MISSED:
            raise ScheduleError("missed", f"expected skip or catch_up, not {self.missed!r}")
        if isinstance(self.max_catch_up, bool) or not isinstance(self.max_catch_up, int):
            raise ScheduleError("max_catch_up", "expected a whole number")
        if self.max_catch_up < 1:
            raise ScheduleError("max_catch_up", "must be at least 1")

    def _check_cron_fires(self) -> None:
        """A valid expression may still name no date (``0 0 30 2 *``: February 30th)."""
        try:
            self.next_after(int(time.time() * 1000))
        except (CroniterError, ValueError, OverflowError):
            raise ScheduleError("cron", f"cron expression {self.cron!r} never fires") from None

    def _check_action(self) -> None:
        """What a tick sends must be routable and carried, or every tick would fail."""
        try:
            if self.publish is not None:
                validate_subject(self.publish)
            if self.call is not None:
                validate_name(self.call[0])
        except RoutingError as exc:
            raise ScheduleError("publish" if self.call is None else "call", exc.message) from None
        if self.call is not None:
            failure = classify({"jsonrpc": "2.0", "method": self.call[1]})
            if not isinstance(failure, Kind):
                raise ScheduleError("call", f"cannot call {self.call[1]!r}: {failure.data}")
        if self.publish is not None and self.params is not None:
            raise ScheduleError("params", "params go with call; publish sends data")
        if self.call is not None and self.data is not None:
            raise ScheduleError("data", "data goes with publish; call sends params")
        if self.params is not None and not isinstance(self.params, dict | list):
            raise ScheduleError("params", "expected an object or an array (JSON-RPC params)")
        for key, value in (("data", self.data), ("params", self.params)):
            try:
                check_payload(value, key, binary=key == "data")
            except PayloadError as exc:
                raise ScheduleError(key, exc.detail) from None

    # -- time -------------------------------------------------------------------------

    def next_after(self, ms: int) -> int:
        """The first tick after ``ms``."""
        if self.every is not None:
            step = self._step()
            return (ms // step + 1) * step
        moment = datetime.fromtimestamp(ms / 1000, ZoneInfo(self.timezone))
        following: datetime = croniter(self.cron, moment).get_next(datetime)
        return int(following.timestamp() * 1000)

    def due(self, after: int, until: int, keep: int | None = None) -> tuple[list[int], int]:
        """The ticks in ``(after, until]``, oldest first, at most ``keep`` (default
        ``max_catch_up``) of the latest ones; and how many earlier ones were left out
        (a cron expression's counted up to ``MAX_COUNTED + 1``: "more than")."""
        keep = self.max_catch_up if keep is None else keep
        if self.every is not None:
            step = self._step()
            first, last = after // step + 1, until // step
            count = max(0, last - first + 1)
            kept = min(count, keep)
            return [k * step for k in range(last - kept + 1, last + 1)], count - kept
        ticks: list[int] = []
        moment = datetime.fromtimestamp(until / 1000, ZoneInfo(self.timezone))
        backwards = croniter(self.cron, moment)
        # croniter's get_prev is strictly before: the tick at ``until`` itself counts.
        if self.next_after(until - 1) == until:
            ticks.append(until)
        dropped = 0
        while True:
            previous = int(backwards.get_prev(datetime).timestamp() * 1000)
            if previous <= after:
                break
            if len(ticks) < keep:
                ticks.append(previous)
            else:
                dropped += 1
                if dropped > MAX_COUNTED:
                    break
        ticks.reverse()
        return ticks, dropped

    def _step(self) -> int:
        assert self.every is not None
        return max(1, round(self.every * 1000))

    # -- agent files ------------------------------------------------------------------

    @classmethod
    def from_dict(cls, name: str, entry: Mapping[str, Any]) -> Schedule:
        """A schedule as an agent file writes it (``call`` is ``{agent, method}``;
        ``every`` takes seconds or ``30s``, ``5m``, ``1h``)."""
        if not isinstance(entry, Mapping):
            raise ScheduleError("", "expected a mapping with every or cron, and publish or call")
        unknown = sorted(set(entry) - KEYS)
        if unknown:
            raise ScheduleError(
                unknown[0], f"unknown keyword; expected one of {', '.join(sorted(KEYS))}"
            )
        options: dict[str, Any] = {k: v for k, v in entry.items() if k in KEYS}
        if "every" in options:
            options["every"] = seconds(options["every"])
        if "call" in options:
            options["call"] = _call(options["call"])
        return cls(name, **options)


def _call(value: Any) -> tuple[str, str]:
    if not isinstance(value, Mapping) or set(value) != {"agent", "method"}:
        raise ScheduleError("call", "expected {agent: <agent id>, method: <method>}")
    agent, method = value["agent"], value["method"]
    if not isinstance(agent, str) or not isinstance(method, str) or not agent or not method:
        raise ScheduleError("call", "expected {agent: <agent id>, method: <method>}")
    return agent, method


def _call_pair(value: Any) -> tuple[str, str]:
    """``call`` as code gives it: an agent id and a method name."""
    if (
        not isinstance(value, tuple | list)
        or len(value) != 2
        or not all(isinstance(part, str) and part for part in value)
    ):
        raise ScheduleError("call", f"expected (agent id, method name), not {value!r:.100}")
    return value[0], value[1]
