"""Which asyncio event loop the bus runs on.

uvloop when it is installed (it is a dependency on Linux and macOS): its
thread-safe wake-up and its I/O callbacks cost a fraction of the standard
loop's, which is most of a round trip between the loop and an actor thread.
``A2A_EVENT_LOOP=asyncio`` picks the standard loop; ``uvloop`` insists on uvloop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from a2a_bus.runtime.env import choice, environ

T = TypeVar("T")

ENV = "A2A_EVENT_LOOP"
CHOICES = ("auto", "uvloop", "asyncio")


def loop_choice(env: Mapping[str, str] | None = None) -> str:
    """``A2A_EVENT_LOOP``: one of :data:`CHOICES` (else an :class:`EnvError`)."""
    return choice(environ(env), ENV, CHOICES, "auto")


def loop_kind() -> str:
    """``uvloop`` or ``asyncio``: what :func:`new_event_loop` builds here."""
    chosen = loop_choice()
    if chosen == "asyncio":
        return "asyncio"
    try:
        import uvloop  # noqa: F401
    except ImportError:
        if chosen == "uvloop":
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
    try:
        loop_choice()
    except ValueError:
        main.close()  # not run: no "never awaited" warning on top of the error
        raise
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)


async def stop_task(task: asyncio.Task[Any] | None) -> None:
    """Cancel ``task`` (None: nothing to stop) and wait until it has ended, so its
    cleanup has run before the caller goes on."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
