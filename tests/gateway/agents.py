"""Agents the gateway tests talk to."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from a2a_bus.hosting.agent import Agent, method, subscribe

#: The last item Echo.count yielded (streams in tests run one at a time).
COUNTED = {"last": -1}
#: Notifications the spec agent received: (method, params), in arrival order.
NOTIFIED: list[tuple[str, tuple[Any, ...]]] = []
_LOCK = threading.Lock()


def _note(name: str, values: tuple[Any, ...]) -> None:
    with _LOCK:
        NOTIFIED.append((name, values))


class Spec(Agent):
    """The methods of the JSON-RPC 2.0 specification's examples."""

    agent_id = "spec"

    @method
    def subtract(self, minuend: int, subtrahend: int) -> int:
        return minuend - subtrahend

    @method
    def sum(self, *values: Any) -> int:
        return sum(values)

    @method
    def update(self, *values: Any) -> None:
        _note("update", values)

    @method
    def notify_hello(self, *values: Any) -> None:
        _note("notify_hello", values)

    @method
    def notify_sum(self, *values: Any) -> None:
        _note("notify_sum", values)

    @method
    def get_data(self) -> list[Any]:
        return ["hello", 5]


class Echo(Agent):
    """Answers with what it got; streams numbers; records published events."""

    agent_id = "echo"

    def __init__(self, seen: list[Any] | None = None) -> None:
        self.seen = seen if seen is not None else []

    @method
    def echo(self, value: Any) -> Any:
        return value

    @method
    def count(self, n: int, pause: float = 0.0) -> Iterator[int]:
        for i in range(n):
            if pause:
                time.sleep(pause)
            COUNTED["last"] = i
            yield i

    @subscribe("news.#")
    def on_news(self, event: Any) -> None:
        self.seen.append(event)


class Secret(Agent):
    """A second agent, for allow-list tests."""

    agent_id = "secret"

    @method
    def reveal(self) -> str:
        return "the secret"


#: Lets ``Slow.wait`` answer; a test clears it before and sets it after.
RELEASE = threading.Event()


class Slow(Agent):
    """Answers "real" once ``RELEASE`` is set (a request that stays pending meanwhile)."""

    agent_id = "slow"

    @method
    def wait(self) -> str:
        RELEASE.wait(20.0)  # bounded: never hangs a test
        return "real"
