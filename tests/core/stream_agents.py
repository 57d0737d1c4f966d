"""Agents that run in processes of their own in the stream tests (``a2a-bus serve``)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

from a2a_bus import Agent, method


class Narrator(Agent):
    """Tells numbered lines slowly, each naming the process that told it."""

    agent_id = "narrator"

    @method
    def lines(self, count: int) -> Iterator[str]:
        for n in range(count):
            time.sleep(0.1)
            yield f"{os.getpid()} line {n}"
