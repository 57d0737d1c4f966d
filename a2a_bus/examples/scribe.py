"""A slow note taker: each message is worked on for a while (one progress note, then
quiet), so its A2A task is seen ``working`` (GetTask, ListTasks), can be canceled
while it runs, and a message to a task still working supersedes the turn before.

Serve it at a host root for clients that know only a host (the A2A conformance kit
does): ``a2a-bus serve a2a_bus.examples.scribe:Scribe --replicas 4 --a2a-root scribe``.
"""

from __future__ import annotations

import time
from typing import ClassVar

from a2a_bus import Agent, method


class Scribe(Agent):
    """Takes a note of each message, slowly."""

    agent_id = "scribe"
    #: Seconds one message takes.
    pace: ClassVar[float] = 3.0
    steps: ClassVar[int] = 10

    @method
    def message(self, text: str, session_id: str) -> str:
        """Note ``text`` (one conversation per ``session_id``)."""
        self.progress("noting")
        for _ in range(self.steps):
            if self.cancelled:
                return "stopped"
            time.sleep(self.pace / self.steps)
        return f"noted: {text}"
