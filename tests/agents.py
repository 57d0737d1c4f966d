"""Agents used by the behavioural suite (state shared with tests is per class)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from a2a_bus import Agent, JsonRpcError, method, subscribe


class Calc(Agent):
    agent_id = "calc"

    @method("subtract")
    def subtract(self, minuend: int, subtrahend: int) -> int:
        return minuend - subtrahend

    @method
    def divide(self, a: float, b: float) -> float:
        if b == 0:
            raise JsonRpcError(-32010, "division by zero", {"a": a})
        return a / b

    @method
    def explode(self) -> None:
        raise RuntimeError("secret internal detail")

    @method
    def count(self, n: int) -> Iterator[int]:
        yield from range(n)

    @method
    def collect(self, numbers: Iterator[int], scale: int = 1) -> list[int]:
        return [n * scale for n in numbers]


class Echo(Agent):
    agent_id = "echo"

    @method
    def echo(self, value: Any, delay: float = 0.0) -> Any:
        time.sleep(delay)
        return value


class Gated(Agent):
    """Holds every call until its class's ``gate`` opens (set a fresh one per test)."""

    agent_id = "gated"
    gate = threading.Event()

    @method
    def hold(self, value: Any) -> Any:
        if not type(self).gate.wait(60.0):  # a guard against a hung test, not a limit
            raise RuntimeError("the gate never opened")
        return value


class Recorder:
    """Thread-safe record of what subscribers saw."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: dict[str, list[Any]] = {}

    def add(self, who: str, value: Any) -> None:
        with self.lock:
            self.seen.setdefault(who, []).append(value)

    def get(self, who: str) -> list[Any]:
        with self.lock:
            return list(self.seen.get(who, ()))


RECORDER = Recorder()


def subscriber(agent_id: str, subject: str, *, replay: bool = False) -> type[Agent]:
    """A new Agent class subscribing to ``subject`` and recording the event data."""

    def on_event(self: Agent, event: Any) -> None:
        RECORDER.add(self.agent_id, event.get_data())

    namespace = {"agent_id": agent_id, "on_event": subscribe(subject, replay=replay)(on_event)}
    return type(f"Sub_{agent_id.replace('-', '_')}", (Agent,), namespace)


class Quitter(Agent):
    """Its handler raises what is no Exception: SystemExit, as a CLI library might."""

    agent_id = "quitter"

    @method
    def quit(self, kind: str) -> None:
        raise {"exit": SystemExit, "interrupt": KeyboardInterrupt}[kind]("bye")


class Flaky(Agent):
    """Raises on every 10th message (by its number), so each poison message is
    deterministic and keeps failing on retry."""

    agent_id = "flaky"

    @method
    def work(self, n: int) -> int:
        if n % 10 == 0:
            raise ValueError(f"poison message {n}")
        return n * 2


class Phoenix(Agent):
    """Crashes the first time it sees a message; the restarted actor succeeds."""

    agent_id = "phoenix"
    crashed: set[str] = set()
    instances = 0

    def __init__(self) -> None:
        Phoenix.instances += 1
        self.instance = Phoenix.instances

    @method
    def once(self, token: str) -> dict[str, Any]:
        if token not in Phoenix.crashed:
            Phoenix.crashed.add(token)
            raise RuntimeError("first try fails")
        return {"instance": self.instance, "redelivered": self.redelivered}


class Slow(Agent):
    """A slow agent with a small mailbox; tracks how many messages it held at once."""

    agent_id = "slow"
    mailbox_size = 4
    started = threading.Event()

    @method
    def nap(self, seconds: float, tag: int = 0) -> int:
        Slow.started.set()
        time.sleep(seconds)
        return tag


class Ticker(Agent):
    """Streams 0..limit-1; records how far it got and whether it was closed early."""

    agent_id = "ticker"
    produced = 0
    closed_early = threading.Event()
    done = threading.Event()

    @method
    def tick(self, limit: int) -> Iterator[int]:
        Ticker.produced = 0
        Ticker.closed_early.clear()
        Ticker.done.clear()
        try:
            for n in range(limit):
                Ticker.produced += 1
                yield n
        except GeneratorExit:
            Ticker.closed_early.set()
            raise
        finally:
            Ticker.done.set()
