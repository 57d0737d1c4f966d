"""An Agent class and its spawn, written the wrong way: refused where the class is
made or the spawn is asked for, with an error naming the mistake, not later (a
crash at the first message, a hang, a setting silently ignored)."""

from __future__ import annotations

from typing import Any

import pytest

from a2a_bus import Agent, Bus, method
from a2a_bus.schedule.spec import Schedule
from tests.agents import Calc

WAIT = 10.0


def answer(self: Agent) -> int:
    return 42


@pytest.mark.parametrize(
    "name", ["card", "client", "hosted", "event", "redelivered", "control", "cancelled", "methods"]
)
def test_a_subclass_may_not_replace_what_the_bus_uses(name: str) -> None:
    """A handler named ``card`` used to break the agent's start (``card()`` missing
    ``self``), one named ``client`` or ``event`` every call after it (-32603)."""
    with pytest.raises(TypeError, match=rf"Clash\.{name} replaces Agent\.{name}, which the bus"):
        type("Clash", (Agent,), {name: method(answer)})


def test_the_name_of_a_method_may_be_one_the_bus_uses() -> None:
    """The way out the error gives: the attribute named otherwise."""
    named = type("Named", (Agent,), {"card_": method("card")(answer)})
    assert named.methods["card"].attribute == "card_"


def test_a_method_is_called_by_the_attribute_that_holds_it() -> None:
    """A function declared under another name (``run = method(_impl)``, a lambda)
    used to be called by its own name: an AttributeError at every call."""
    spare = type(
        "Spare",
        (Agent,),
        {"run": method(answer), "other": method("named")(lambda self: "lambda")},
    )
    with Bus.memory() as bus:
        bus.spawn(spare)
        client = bus.client()
        assert client.request("spare", "run", timeout=WAIT) == 42
        assert client.request("spare", "named", timeout=WAIT) == "lambda"


def test_an_agent_id_taken_from_the_class_name_says_so_when_it_is_invalid() -> None:
    with pytest.raises(
        ValueError, match=r"the class name lower-cased: agent_id is not set\) 'café'"
    ):
        type("Café", (Agent,), {})
    with pytest.raises(ValueError, match=r"invalid agent id 'two words': must match"):
        type("Set", (Agent,), {"agent_id": "two words"})


@pytest.mark.parametrize("hook", ["on_start", "on_stop"])
def test_an_async_hook_is_refused(hook: str) -> None:
    """It ran as a coroutine nobody awaited: silently, nothing happened."""

    async def run(self: Agent) -> None:
        pass

    with pytest.raises(TypeError, match=rf"Hooked\.{hook} is async: it runs in the agent's actor"):
        type("Hooked", (Agent,), {hook: run})


@pytest.mark.parametrize(
    ("setting", "value", "error", "said"),
    [
        ("mailbox_size", 0, ValueError, "must be at least 1, not 0"),
        ("mailbox_size", -3, ValueError, "must be at least 1, not -3"),
        ("mailbox_size", "5", TypeError, "must be a whole number, not '5'"),
        ("mailbox_size", True, TypeError, "must be a whole number, not True"),
        ("max_open_streams", 0, ValueError, "must be at least 1, not 0"),
        ("max_open_streams", 2.5, TypeError, "must be a whole number, not 2.5"),
        ("description", 5, TypeError, "must be a string, not 5"),
        ("version", 1.0, TypeError, "must be a string, not 1.0"),
        ("schedules", ["hourly"], TypeError, "must be a tuple of Schedule"),
        ("schedules", Schedule("tick", every=3600, publish="ticks"), TypeError, "must be a tuple"),
    ],
)
def test_class_settings_the_bus_cannot_use_are_refused(
    setting: str, value: Any, error: type[Exception], said: str
) -> None:
    with pytest.raises(error, match=rf"Set\.{setting} {said}"):
        type("Set", (Agent,), {setting: value})


@pytest.mark.parametrize(
    ("agent", "args", "error", "said"),
    [
        (Calc, ("2",), TypeError, r"spawn\(Calc\): replicas must be a whole number, not '2'"),
        (Calc, (True,), TypeError, r"replicas must be a whole number, not True"),
        (Calc, (2.0,), TypeError, r"replicas must be a whole number, not 2.0"),
        (Calc, (0,), ValueError, r"spawn\(Calc\): replicas must be at least 1, not 0"),
        (Calc, (-1,), ValueError, r"replicas must be at least 1, not -1"),
        (Calc(), (), TypeError, r"the agent class, not an instance: spawn\(Calc\)"),
        (Agent, (), TypeError, r"a subclass of a2a_bus.Agent, not <class 'a2a_bus"),
        (int, (), TypeError, r"a subclass of a2a_bus.Agent, not <class 'int'>"),
        ("calc", (), TypeError, r"a subclass of a2a_bus.Agent, not 'calc'"),
    ],
)
def test_a_spawn_of_what_is_no_agent_class_or_no_count_is_refused(
    agent: Any, args: tuple[Any, ...], error: type[Exception], said: str
) -> None:
    """Before, ``replicas="2"`` was a TypeError comparing str and int, ``True`` and
    ``2.0`` were taken, and ``Agent`` itself was hosted under the empty id."""
    bus = Bus.memory()
    with pytest.raises(error, match=said):
        bus.spawn(agent, *args)
    assert bus.hosts == []  # nothing recorded: a later spawn of it is not refused
    bus.spawn(Calc)


class Eager(Agent):
    """Uses its client in its constructor, before any bus hosts it."""

    def __init__(self) -> None:
        self.client.publish("boot", {})


def test_a_client_used_in_the_constructor_is_refused_saying_where_it_can_be() -> None:
    bus = Bus.memory()
    bus.spawn(Eager)
    with pytest.raises(RuntimeError, match=r"after its constructor .*use it from on_start"):
        bus.start()
    assert not bus.running
