"""``@method`` and ``@subscribe`` used the wrong way: refused where they are written,
with an error naming the mistake, not when the first message comes (or never)."""

from __future__ import annotations

from typing import Any

import pytest

from a2a_bus import Agent, method, subscribe


def on_event(self: Agent, event: Any) -> None:
    pass


@pytest.mark.parametrize("name", [5, 1.5, b"add", ["add"]])
def test_a_method_name_that_is_no_string_is_refused(name: Any) -> None:
    with pytest.raises(TypeError, match=r"the method name must be a string"):
        method(name)


@pytest.mark.parametrize("name", ["", "add numbers", "Adds two numbers", "add\n", "a\x00b"])
def test_a_method_name_that_is_not_one_word_is_refused(name: str) -> None:
    """Most often a description written where the name goes: the name would then be
    the whole sentence, which no caller types."""
    with pytest.raises(ValueError, match=r"a method name is one word.*@method\(description="):
        method(name)


@pytest.mark.parametrize("name", ["agent/card/get", "methods/list"])
def test_a_method_name_the_bus_answers_itself_is_refused(name: str) -> None:
    """The bus answers these for every agent: such a handler would never be called
    through it (and would replace the agent's card where it was)."""
    with pytest.raises(ValueError, match="the bus answers"):
        method(name)


@pytest.mark.parametrize("name", ["tools/call", "message/sendStream", "calc.add", "add_two", "a-b"])
def test_method_names_of_more_than_letters_are_taken(name: str) -> None:
    class Named(Agent):
        @method(name)
        def handle(self) -> None:
            pass

    assert list(Named.methods) == [name]


def test_a_description_that_is_no_string_is_refused() -> None:
    with pytest.raises(TypeError, match=r"@method\(description=\.\.\.\) must be a string"):
        method("add", description=5)  # type: ignore[arg-type]


def test_decorating_what_is_no_function_is_refused() -> None:
    with pytest.raises(TypeError, match="decorates a method"):
        method("add")(5)
    with pytest.raises(TypeError, match="decorates a method"):
        subscribe("news.*")(5)  # type: ignore[type-var]


@pytest.mark.parametrize("wrap", [staticmethod, classmethod, property])
def test_a_static_or_class_method_or_property_is_refused_as_a_handler(wrap: Any) -> None:
    """Decorated inside: it used to bind params without its first one (taken for
    ``self``), or fail with an AttributeError; decorated outside, the mark was
    silently lost and the method never exposed."""
    for decorate in (method, method("named"), subscribe("news.*")):

        def f(self: Agent, event: Any) -> None:  # one per decorator: marks stay on it
            pass

        with pytest.raises(TypeError, match=f"cannot decorate a {wrap.__name__}"):
            decorate(wrap(f))
        with pytest.raises(TypeError, match=rf"Wrapped\.f is a {wrap.__name__}: a handler is"):
            type("Wrapped", (Agent,), {"f": wrap(decorate(f))})


def test_a_handler_that_takes_no_self_is_refused() -> None:
    def alone() -> int:
        return 1

    def only_star(*values: int) -> int:
        return sum(values)

    for func in (alone, only_star):
        with pytest.raises(TypeError, match=r"takes no self: .*def f\(self, \.\.\.\)"):
            type("Selfless", (Agent,), {"f": method(func)})


def test_an_event_handler_that_takes_no_event_is_refused() -> None:
    def no_event(self: Agent) -> None:
        pass

    def two_events(self: Agent, event: Any, other: Any) -> None:
        pass

    for func in (no_event, two_events):
        with pytest.raises(TypeError, match=r"must take the event: def \w+\(self, event\)"):
            subscribe("news.*")(func)


def test_subscribe_without_a_subject_is_refused() -> None:
    """``@subscribe`` alone used to say ``invalid subject <function ...>``."""
    with pytest.raises(TypeError, match=r"on_event' needs the subject.*@subscribe\('orders\.\*'\)"):
        subscribe(on_event)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"@subscribe\(5\): the subject must be a string"):
        subscribe(5)  # type: ignore[arg-type]


def test_a_replay_that_is_no_flag_is_refused() -> None:
    with pytest.raises(TypeError, match=r"replay=\.\.\.\) must be True or False, not 'yes'"):
        subscribe("news.*", replay="yes")  # type: ignore[arg-type]


def test_a_reserved_method_name_is_refused_where_it_is_declared() -> None:
    """Calls to ``rpc.*`` are refused (-32601) before they reach any agent."""
    with pytest.raises(ValueError, match=r"begins with 'rpc\.', which JSON-RPC reserves"):
        method("rpc.discover")
