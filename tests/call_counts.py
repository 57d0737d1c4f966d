"""Counting calls of Python functions in every thread, for the tests that hold a
path (one request, one stream chunk) to a budget of steps rather than of time."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import a2a_bus

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
