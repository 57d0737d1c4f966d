"""Log lines that a flood could make, kept readable: a few one by one, then a count.

A transport writes a line per record it dead-letters; ten thousand junk records
would bury everything else in the log. :class:`RateLimitedLog` writes the first
lines of a flood as they come and then one summary line per interval saying how
many more came: the records themselves are all handled, only their lines are
summed up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any


class _Flood:
    """The lines of one key since its flood began."""

    __slots__ = ("left_out", "logged", "since", "timer")

    def __init__(self, timer: asyncio.TimerHandle) -> None:
        self.logged = 0
        self.left_out = 0
        #: When the first line counted in ``left_out`` came (wall clock, for the summary).
        self.since = 0.0
        self.timer = timer


class RateLimitedLog:
    """Lines about one key (say, a topic): the first ``burst`` of a flood are written
    one by one, the rest counted; every ``interval`` seconds one summary line says
    how many more came (``summary`` is formatted with the count, the key and the
    time of the first one left out). An interval without a line left out ends the
    flood: the next lines are written one by one again.

    Summaries are written from timers of the running loop (without one, every line
    is written); :meth:`close` writes what is counted still. ``burst`` and
    ``interval`` are attributes: a test may shorten the interval.
    """

    def __init__(
        self,
        logger: logging.Logger,
        summary: str,
        *,
        burst: int = 5,
        interval: float = 10.0,
        level: int = logging.WARNING,
    ) -> None:
        self.burst = burst
        self.interval = interval
        self._logger = logger
        self._summary = summary
        self._level = level
        self._floods: dict[str, _Flood] = {}

    def log(self, key: str, message: str, *args: Any) -> None:
        """Write ``message % args`` about ``key``, or count it in the next summary."""
        flood = self._floods.get(key)
        if flood is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop to write a summary from later
                self._logger.log(self._level, message, *args)
                return
            flood = self._floods[key] = _Flood(loop.call_later(self.interval, self._tick, key))
        if flood.logged < self.burst:
            flood.logged += 1
            self._logger.log(self._level, message, *args)
            return
        if not flood.left_out:
            flood.since = time.time()
        flood.left_out += 1

    def close(self) -> None:
        """Write the summaries of the lines counted still, and stop the timers."""
        floods, self._floods = self._floods, {}
        for key, flood in floods.items():
            flood.timer.cancel()
            self._write_summary(key, flood)

    def _tick(self, key: str) -> None:
        flood = self._floods[key]
        if not flood.left_out:  # a quiet interval: the flood is over
            del self._floods[key]
            return
        self._write_summary(key, flood)
        flood.left_out = 0
        flood.timer = asyncio.get_running_loop().call_later(self.interval, self._tick, key)

    def _write_summary(self, key: str, flood: _Flood) -> None:
        if flood.left_out:
            since = time.strftime("%H:%M:%S", time.localtime(flood.since))
            self._logger.log(self._level, self._summary, flood.left_out, key, since)
