"""The echo agent: answers with what it was sent (handy to probe the bus)."""

from __future__ import annotations

from typing import Any

from a2a_bus import Agent, method


class Echo(Agent):
    """Returns its input unchanged."""

    agent_id = "echo"

    @method
    def echo(self, message: Any) -> Any:
        """The message, unchanged."""
        return message

    @method
    def shout(self, text: str) -> str:
        """The text in upper case."""
        return text.upper()
