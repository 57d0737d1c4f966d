"""Counting calls of Python functions in every thread, for the tests that hold a
path (one request, one stream chunk) to a budget of steps rather than of time."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import FrameType
from typing import Any

import a2a_bus
from a2a_bus import Agent, Bus

PACKAGE = str(Path(a2a_bus.__file__).parent)


class Calls:
    """A profile function (``threading.setprofile``) that counts calls while ``on``:
    the project's by function name (``project``), and all but those of the file
    ``besides`` (the counting test's own) in ``all``."""

    def __init__(self, besides: str = "") -> None:
        self.on = False
        self.project: Counter[str] = Counter()
        self.all = 0
        self._besides = besides

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if self.on and event == "call":
            filename = frame.f_code.co_filename
            if filename == self._besides:
                return
            self.all += 1
            if filename.startswith(PACKAGE):
                self.project[frame.f_code.co_name] += 1


def count_calls(
    agent: type[Agent],
    work: Callable[[Bus, int], Coroutine[Any, Any, None]],
    warm: int,
    counted: int,
    besides: str = "",
) -> Calls:
    """The calls ``work(bus, counted)`` makes on a memory bus hosting ``agent``, in
    every thread, after ``work(bus, warm)`` warmed it up (no heartbeat meanwhile)."""
    calls = Calls(besides)
    threading.setprofile(calls)  # the bus's loop and actor threads start after this
    try:
        with Bus.memory(heartbeat=3600) as bus:
            bus.spawn(agent)
            asyncio.run_coroutine_threadsafe(work(bus, warm), bus.loop).result()
            calls.on = True
            asyncio.run_coroutine_threadsafe(work(bus, counted), bus.loop).result()
            calls.on = False
    finally:
        threading.setprofile(None)
    return calls
