"""Signals on a command's event loop: Ctrl-C (and, for a server, SIGTERM) taken
between the loop's callbacks, and a command that a signal cancelled ended without a
traceback."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

import typer

from a2a_bus.runtime import loops

T = TypeVar("T")


class Signals:
    """SIGINT (and, for a server, SIGTERM) on a command's event loop, taken between
    its callbacks: asyncio's own SIGINT handler cancels the main task wherever the
    interpreter is, even between aiokafka's check of a reply's future and its
    setting of it (which it logs as InvalidStateError, with a traceback).

    Until :meth:`serving` a signal cancels the main task, so a start that hangs (a
    Kafka that never answers) is not waited for; :func:`run_async` then ends the
    command. From then on the first signal sets :attr:`stop`, a later one :attr:`again`.
    """

    def __init__(self, *signums: signal.Signals) -> None:
        self.signums = signums or (signal.SIGINT,)
        #: The signal that cancelled the main task, if one did.
        self.received: int | None = None
        self.stop = asyncio.Event()
        self.again = asyncio.Event()
        self._serving = False
        self._task: asyncio.Task[Any] | None = None

    def serving(self) -> None:
        """Started: a signal now asks for a clean stop instead of cancelling."""
        self._serving = True

    def _on_signal(self, signum: int) -> None:
        if self._serving:
            (self.again if self.stop.is_set() else self.stop).set()
            return
        self.received = self.received or signum
        if self._task is not None:
            self._task.cancel()

    async def run(self, main: Awaitable[T]) -> T:
        """``main``, with the signals handled as the class says."""
        self._task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for signum in self.signums:
            loop.add_signal_handler(signum, self._on_signal, signum)
        try:
            return await main
        finally:
            for signum in self.signums:
                loop.remove_signal_handler(signum)


def run_async(main: Coroutine[Any, Any, T], signals: Signals | None = None) -> T:
    """Run ``main`` on a new event loop. A signal that cancelled it (see
    :class:`Signals`) ends the command once it has cleaned up (a bus stopped):
    KeyboardInterrupt for SIGINT (exit 130, no traceback), exit 128 + N for another."""
    signals = signals or Signals()
    try:
        return loops.run(signals.run(main))
    except asyncio.CancelledError:
        if signals.received == signal.SIGINT:
            raise KeyboardInterrupt from None
        if signals.received is not None:
            raise typer.Exit(128 + signals.received) from None
        raise
    finally:
        main.close()  # never started when the loop could not be made: no warning then
