"""The ``@method`` / ``@subscribe`` decorators: they mark an agent's handlers, which
:class:`~a2a_bus.hosting.agent.Agent` collects where the class is made.

What cannot work is refused where it is declared (TypeError or ValueError naming
it), not when the first message comes.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from a2a_bus.core.routing import validate_subject
from a2a_bus.discovery.cards import method_name_problem

F = TypeVar("F", bound=Callable[..., Any])

METHOD_ATTR = "__a2a_method__"
SUBSCRIBE_ATTR = "__a2a_subscriptions__"


@dataclass(frozen=True, slots=True)
class MethodMark:
    """What ``@method`` says of a handler."""

    name: str | None
    description: str | None


def method(name: str | F | None = None, *, description: str | None = None) -> Any:
    """Expose a handler as JSON-RPC method ``name`` (default: the function name).

    Positional params bind in order, named params by name. A generator handler
    streams its items; a parameter typed ``Iterator[T]`` receives a stream the
    caller sends.
    """
    if description is not None and not isinstance(description, str):
        raise TypeError(f"@method(description=...) must be a string, not {description!r:.60}")
    if name is not None and not isinstance(name, str):
        if not _decorated(name):
            raise TypeError(
                f"@method({name!r:.60}): the method name must be a string "
                "(or use @method alone to name it after the function)"
            )
        _check_handler(name, "@method")
        setattr(name, METHOD_ATTR, MethodMark(None, description))
        return name
    if name is not None:
        _check_method_name(name)

    def mark(func: F) -> F:
        _check_handler(func, "@method")
        setattr(func, METHOD_ATTR, MethodMark(name, description))
        return func

    return mark


def _check_method_name(name: str) -> None:
    """ValueError for a name no caller could use as one method name (the rule the
    directory holds every card to)."""
    problem = method_name_problem(name)
    if problem is not None:
        # A description put where the name goes, most likely.
        raise ValueError(
            f"@method({name!r:.60}): the name {problem}; a method name is one word, without "
            "spaces or control characters (a description goes in @method(description=...) "
            "or the docstring)"
        )


def _decorated(target: object) -> bool:
    """Whether ``target`` is what a decorator was put on (not an argument to it)."""
    return callable(target) or isinstance(target, staticmethod | classmethod | property)


def _check_handler(func: Callable[..., Any], decorator: str) -> None:
    """TypeError for what cannot be a handler: a static or class method or a
    property (called on the agent instance, the handler gets ``self`` first), or an
    ``async def`` (handlers run in the agent's actor thread, which has no event
    loop to await them: each call would fail)."""
    if isinstance(func, staticmethod | classmethod | property):
        raise TypeError(
            f"{decorator} cannot decorate a {type(func).__name__}: a handler is a plain "
            "method, def name(self, ...); put the decorator on that"
        )
    if not callable(func):
        raise TypeError(f"{decorator} decorates a method, def name(self, ...), not {func!r:.60}")
    if inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func):
        raise TypeError(
            f"{decorator} {func.__qualname__} is async: handlers run in the agent's actor "
            "thread; write a plain function or generator (self.client calls other agents)"
        )


def subscribe(subject: str, *, replay: bool = False) -> Callable[[F], F]:
    """Receive every event published on ``subject`` (``*`` and ``#`` wildcards).

    With ``replay`` a newly created subscription starts from the retained history.
    """
    if not isinstance(subject, str):
        if _decorated(subject):  # @subscribe put on the handler without its subject
            raise TypeError(
                f"@subscribe on {getattr(subject, '__qualname__', subject)!r:.60} needs the "
                "subject to receive: @subscribe('orders.*')"
            )
        raise TypeError(f"@subscribe({subject!r:.60}): the subject must be a string")
    if not isinstance(replay, bool):
        raise TypeError(f"@subscribe(replay=...) must be True or False, not {replay!r:.60}")
    validate_subject(subject, wildcards=True)

    def mark(func: F) -> F:
        _check_handler(func, "@subscribe")
        if inspect.isgeneratorfunction(func):  # its body would never run
            raise TypeError(
                f"@subscribe {func.__qualname__} is a generator: an event handler answers "
                "nothing; write a plain function (self.client.publish sends events on)"
            )
        with contextlib.suppress(ValueError):  # a callable without a signature: not checked
            try:
                inspect.signature(func).bind(None, None)
            except TypeError:
                raise TypeError(
                    f"@subscribe {func.__qualname__} must take the event: "
                    f"def {func.__name__}(self, event)"
                ) from None
        marks = list(getattr(func, SUBSCRIBE_ATTR, ()))
        marks.append((subject, replay))
        setattr(func, SUBSCRIBE_ATTR, marks)
        return func

    return mark


def check_wrapped(klass: type, attribute: str, value: Any) -> None:
    """TypeError for a handler wrapped in a static or class method or a property
    (the mark is on the function inside, where it would be silently ignored)."""
    inner = getattr(value, "__func__", None) or getattr(value, "fget", None)
    marked = getattr(inner, METHOD_ATTR, None) or getattr(inner, SUBSCRIBE_ATTR, None)
    if marked and isinstance(value, staticmethod | classmethod | property):
        raise TypeError(
            f"{klass.__qualname__}.{attribute} is a {type(value).__name__}: a handler is a "
            f"plain method, def {attribute}(self, ...)"
        )
