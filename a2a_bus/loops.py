"""Which asyncio event loop the bus runs on.

uvloop when it is installed (it is a dependency on Linux and macOS): its
thread-safe wake-up and its I/O callbacks cost a fraction of the standard
loop's, which is most of a round trip between the loop and an actor thread.
``A2A_EVENT_LOOP=asyncio`` picks the standard loop; ``uvloop`` insists on uvloop.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

ENV = "A2A_EVENT_LOOP"
CHOICES = ("auto", "uvloop", "asyncio")


def loop_kind() -> str:
    """``uvloop`` or ``asyncio``: what :func:`new_event_loop` builds here."""
    choice = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if choice not in CHOICES:
        raise ValueError(f"{ENV}={choice!r}: expected one of {', '.join(CHOICES)}")
    if choice == "asyncio":
        return "asyncio"
    try:
        import uvloop  # noqa: F401
    except ImportError:
        if choice == "uvloop":
            raise RuntimeError(f"{ENV}=uvloop but uvloop is not installed") from None
        return "asyncio"
    return "uvloop"


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop of the kind :func:`loop_kind` names."""
    if loop_kind() == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on a loop from :func:`new_event_loop`."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)
