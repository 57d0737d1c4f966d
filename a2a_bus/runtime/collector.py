"""Keep CPython's cyclic garbage collector off the requests a bus has in flight.

CPython collects its youngest generation each time 700 more container objects
(coroutines, futures, dicts, tuples, events) were made than freed, and the
count never drops below zero. Each request in flight holds about 27 such
objects, so at 64 requests in flight on Kafka the in-flight set alone (~1,800
objects) crosses the threshold on every wave of requests: a young collection
ran every ~36 requests, freed nothing, and moved the in-flight objects into
older generations, whose collections scanned them again. That was 11-14 us of
the ~100 us of CPU a request cost (see docs/kafka.md).

While a bus runs, the young threshold is at least :data:`DEFAULT_THRESHOLD`
(raised, never lowered, and left alone when the application disabled the
collector); when the last bus stops it goes back to what it was, unless
something else changed it meanwhile. Garbage in reference cycles is still
collected, a few thousand objects later. ``A2A_GC_THRESHOLD`` (or
``Bus(..., gc_threshold=...)``) sets another value; ``off`` leaves the
collector as it is.
"""

from __future__ import annotations

import gc
import os
import threading

from a2a_bus.protocol import whole_number

ENV = "A2A_GC_THRESHOLD"
OFF = ("off", "no", "none")
#: Young-generation threshold while a bus runs: room for ~370 requests in flight.
DEFAULT_THRESHOLD = 10_000
#: The largest threshold ``gc.set_threshold`` takes (a C int): one past it would
#: fail when the bus starts, not when it is configured.
MAX_THRESHOLD = 2**31 - 1


def choose_threshold(setting: int | str | None = None) -> int | None:
    """The young-generation threshold ``setting`` (or ``A2A_GC_THRESHOLD`` when
    None) names: :data:`DEFAULT_THRESHOLD` when unset, None for off."""
    if setting is None:
        setting = os.environ.get(ENV, "")
    refusal = f"{ENV}={setting!r}: expected off or a whole number from 1 to {MAX_THRESHOLD}"
    if isinstance(setting, str):
        text = setting.strip().lower()
        if text in OFF:
            return None
        if not text:
            return DEFAULT_THRESHOLD
        number = whole_number(text)
        if number is None:
            raise ValueError(refusal)
        setting = number
    if type(setting) is not int or not 1 <= setting <= MAX_THRESHOLD:
        raise ValueError(refusal)
    return setting


class YoungThreshold:
    """The process's young-generation threshold, raised while anyone holds it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        #: The young threshold before the first holder, restored after the last.
        self._before: int | None = None
        self._raised_to: int | None = None

    @property
    def holders(self) -> int:
        return self._holders

    def hold(self, threshold: int) -> None:
        """Raise the threshold to at least ``threshold`` until :meth:`release`."""
        with self._lock:
            young, older, oldest = gc.get_threshold()
            if self._holders == 0:
                self._before = young
            self._holders += 1
            if young == 0:  # the application turned collection off: not ours to turn on
                return
            if young < threshold:
                gc.set_threshold(threshold, older, oldest)
                self._raised_to = threshold

    def release(self) -> None:
        """Undo one :meth:`hold`; the last one puts the threshold back."""
        with self._lock:
            if self._holders == 0:
                return
            self._holders -= 1
            if self._holders or self._before is None:
                return
            before, self._before = self._before, None
            raised_to, self._raised_to = self._raised_to, None
            current = gc.get_threshold()
            if raised_to is not None and current[0] == raised_to:  # else changed by another
                gc.set_threshold(before, *current[1:])


#: The one per process (the collector is the process's).
young_threshold = YoungThreshold()
