"""Agents of the cross-process tracing test: ``front`` asks ``back`` over the bus."""

from __future__ import annotations

import logging

from a2a_bus import Agent, method

log = logging.getLogger("tests.trace_agents")


class Front(Agent):
    agent_id = "front"

    @method
    def ask(self) -> str:
        return str(self.client.request("back", "answer"))


class Back(Agent):
    agent_id = "back"

    @method
    def answer(self) -> str:
        log.warning("answering")
        return "42"
