"""Agents of the multi-process task tests (``test_tasks_on_kafka.py``), hosted by
``a2a-bus serve`` in processes of their own.

Each handler appends one JSON line per step to the file named by
``A2A_TEST_TASK_LOG`` (O_APPEND, one ``write`` per line: several processes share
the file and a line survives ``kill -9``): ``{"agent", "task", "event", "i",
"pid", "redelivered"}``. So the test counts what ran where, and how far, also in a
process it killed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import orjson

from a2a_bus import Agent, InputRequired, method

#: The variable naming the shared log file.
LOG_ENV = "A2A_TEST_TASK_LOG"
_fd: list[int] = []


def _write(agent: Agent, event: str, i: int | None = None) -> None:
    """One line about the request ``agent`` is handling."""
    if not _fd:
        _fd.append(os.open(os.environ[LOG_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))
    request: Any = agent.event
    task = request.get_attributes().get("taskid") if request is not None else None
    line = {
        "agent": agent.agent_id,
        "task": task,
        "event": event,
        "i": i,
        "pid": os.getpid(),
        "redelivered": agent.redelivered,
    }
    os.write(_fd[0], orjson.dumps(line) + b"\n")


class Streamer(Agent):
    """Streams words slowly."""

    agent_id = "streamer"

    @method
    def words(self, n: int, pause: float) -> Iterator[str]:
        """Yield ``w0 `` .. ``w<n-1> ``, one per ``pause`` seconds."""
        _write(self, "start")
        i = 0
        try:
            for i in range(n):
                time.sleep(pause)
                _write(self, "item", i)
                yield f"w{i} "
            _write(self, "done", n)
        except GeneratorExit:  # closed by the host: the task was canceled
            _write(self, "closed", i)
            raise


class Narrator(Streamer):
    """The same stream under another id (its own inbox: a stream of each runs at once)."""

    agent_id = "narrator"


class Plodder(Agent):
    """A long plain handler that reports progress and stops when canceled."""

    agent_id = "plodder"

    @method
    def plod(self, steps: int, pause: float) -> int:
        """Take ``steps`` steps of ``pause`` seconds (a progress note each); the
        steps taken."""
        _write(self, "start")
        for i in range(steps):
            if self.cancelled:
                _write(self, "cancelled", i)
                return i
            time.sleep(pause)
            _write(self, "step", i)
            self.progress(f"step {i}")
        _write(self, "done", steps)
        return steps


class Relay(Plodder):
    """The same long handler under another id: hosted by two processes of its own."""

    agent_id = "relay"


class Booker(Agent):
    """Books a table over two turns: asks for the party size first."""

    agent_id = "booker"

    @method
    def message(self, text: str) -> str:
        """``book``: asks how many; a number: the booking."""
        _write(self, "turn")
        if not text.strip().isdigit():
            raise InputRequired("for how many people?")
        return f"booked a table for {int(text)}"
