"""The Agent base class (the ``@method`` / ``@subscribe`` decorators are re-exported).

An agent is a plain class; the bus hosts each instance in its own pykka actor,
so handlers run one at a time in the actor's thread and may keep state.
"""

from __future__ import annotations

import inspect
import typing
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from a2a_bus.client import Client
from a2a_bus.core.routing import validate_name
from a2a_bus.hosting.binding import Binder, Bound
from a2a_bus.hosting.control import IDLE, RunControl
from a2a_bus.hosting.decorators import (
    METHOD_ATTR,
    SUBSCRIBE_ATTR,
    MethodMark,
    check_wrapped,
    method,
    subscribe,
)
from a2a_bus.hosting.schema import parameters_schema, parse_docstring, schema_for, stream_item_type
from a2a_bus.schedule.spec import Schedule

#: Members of Agent that the bus (or a handler) relies on: a subclass may not replace them.
_BUS_MEMBERS = frozenset(
    {"card", "client", "hosted", "event", "redelivered", "control", "cancelled", "progress"}
    | {"methods", "subscriptions"}
)
#: The kinds of parameter that can take the agent instance (``self``).
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class UnresolvedHints(UserWarning):
    """A handler's type hints name something that cannot be resolved."""


@dataclass(slots=True)
class MethodSpec:
    """One JSON-RPC method of an agent: how to bind params and describe it."""

    name: str
    attribute: str
    description: str
    signature: inspect.Signature
    hints: dict[str, Any]
    #: The handler is a generator: each item is one chunk of the response stream.
    streams_out: bool = False
    #: Name of the parameter receiving the caller's stream, if any.
    stream_param: str | None = None
    #: Parameter descriptions from the docstring (``Args:`` or ``:param:``).
    param_descriptions: dict[str, str] = field(default_factory=dict)
    binder: Binder = field(init=False)

    @classmethod
    def build(
        cls, name: str, attribute: str, func: Callable[..., Any], description: str | None
    ) -> MethodSpec:
        """The method ``name`` of the agent's ``attribute``, which holds ``func``."""
        signature = inspect.signature(func)
        parameters = list(signature.parameters.values())
        if not parameters or parameters[0].kind not in _POSITIONAL:
            raise TypeError(
                f"@method {func.__qualname__} takes no self: a handler is called on the agent "
                f"instance, def {attribute}(self, ...)"
            )
        parameters = parameters[1:]  # drop self
        signature = signature.replace(parameters=parameters)
        try:
            hints = typing.get_type_hints(func, include_extras=True)
        except Exception as exc:  # unresolvable forward references: described as "anything"
            # Said where the class is made: else its params go unchecked, unseen.
            warnings.warn(
                f"the type hints of {func.__qualname__} cannot be resolved ({exc}): its params "
                "are not checked and a stream parameter is not recognised; import the names "
                "they use at run time (not under TYPE_CHECKING)",
                UnresolvedHints,
                stacklevel=3,
            )
            hints = {}
        summary, param_descriptions = parse_docstring(inspect.getdoc(func))
        spec = cls(
            name=name,
            attribute=attribute,
            description=description or summary,
            signature=signature,
            hints=hints,
            streams_out=inspect.isgeneratorfunction(func),
            param_descriptions=param_descriptions,
        )
        spec.stream_param = next(
            (p.name for p in parameters if stream_item_type(hints.get(p.name, Any)) is not None),
            None,
        )
        spec.binder = Binder(signature, hints, spec.stream_param)
        return spec

    def bind(self, params: Any, stream: Iterator[Any] | None = None) -> Bound:
        """Bind JSON-RPC ``params``; a mismatch raises -32602."""
        return self.binder.bind(params, stream)

    def describe(self) -> dict[str, Any]:
        """This method's entry in the agent card."""
        hints = self.hints
        optional: tuple[str, ...] = ()
        if self.stream_param is not None:  # described by its items; may come as a stream
            hints = {**hints, self.stream_param: stream_item_type(hints[self.stream_param])}
            optional = (self.stream_param,)
        params = parameters_schema(
            self.signature.parameters.values(),
            hints,
            self.param_descriptions,
            optional=optional,
        )
        result_hint = self.hints.get("return", Any)
        if self.streams_out:
            result_hint = stream_item_type(result_hint) or Any
        entry: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "params": params,
            "result": schema_for(result_hint),
        }
        if self.streams_out:
            entry["streaming"] = "response"
        if self.stream_param is not None:
            entry["streaming"] = "request"
            entry["streamParam"] = self.stream_param
        return entry


def _check_class(cls: type[Agent]) -> None:
    """TypeError or ValueError, where the class is made, for settings the bus would
    trip over later: members it uses, hooks it cannot await, bounds that are no count."""
    clash = sorted(_BUS_MEMBERS.intersection(vars(cls)))
    if clash:
        raise TypeError(
            f"{cls.__qualname__}.{clash[0]} replaces Agent.{clash[0]}, which the bus uses: "
            f"give it another name (@method({clash[0]!r}) keeps that name for callers)"
        )
    for hook in ("on_start", "on_stop"):
        if inspect.iscoroutinefunction(getattr(cls, hook)):
            raise TypeError(
                f"{cls.__qualname__}.{hook} is async: it runs in the agent's actor thread, "
                "which has no event loop to await it; write a plain method"
            )
    for text in ("description", "version"):
        if not isinstance(getattr(cls, text), str):
            raise TypeError(
                f"{cls.__qualname__}.{text} must be a string, not {getattr(cls, text)!r:.60}"
            )
    schedules = cls.schedules
    if not isinstance(schedules, tuple | list) or not all(
        isinstance(item, Schedule) for item in schedules
    ):
        raise TypeError(
            f"{cls.__qualname__}.schedules must be a tuple of Schedule, not {schedules!r:.60}"
        )
    for bound in ("mailbox_size", "max_open_streams"):
        value = getattr(cls, bound)
        if type(value) is not int:
            raise TypeError(f"{cls.__qualname__}.{bound} must be a whole number, not {value!r:.60}")
        if value < 1:
            raise ValueError(f"{cls.__qualname__}.{bound} must be at least 1, not {value}")


@dataclass(frozen=True, slots=True)
class SubscriptionSpec:
    subject: str
    attribute: str
    replay: bool


class Agent:
    """Base class of agents. Set ``agent_id``; decorate handlers.

    Hooks ``on_start``/``on_stop`` run in the actor's thread. ``self.client``
    (a sync :class:`~a2a_bus.client.Client`) lets a handler call other agents;
    calling your own agent synchronously from a handler would deadlock.
    """

    agent_id: ClassVar[str] = ""
    description: ClassVar[str] = ""
    version: ClassVar[str] = "0.1.0"
    #: Bound on queued + running messages per replica before its inbox is paused.
    mailbox_size: ClassVar[int] = 64
    #: Bound on caller -> agent streams open at once per replica; beyond it a new
    #: stream is answered -32007 (see docs/bus.md, Streams).
    max_open_streams: ClassVar[int] = 16

    methods: ClassVar[dict[str, MethodSpec]] = {}
    subscriptions: ClassVar[tuple[SubscriptionSpec, ...]] = ()
    #: Ticks the agent's host fires while the agent runs here: once per process,
    #: whatever the number of replicas (on Kafka once across all processes), in the
    #: scheduler group named after the agent (see :mod:`a2a_bus.schedule`).
    schedules: ClassVar[tuple[Schedule, ...]] = ()

    _client: Client | None = None
    #: The CloudEvent being handled (set before each handler call).
    event: Any = None
    #: True when this message may have been handled before (crash, redelivery).
    redelivered: bool = False
    #: The cancel flag and progress report of the request being handled.
    control: RunControl = IDLE

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("agent_id"):
            validate_name(cls.agent_id)
        else:
            cls.agent_id = cls.__name__.lower()
            validate_name(
                cls.agent_id, "agent id (the class name lower-cased: agent_id is not set)"
            )
        if not cls.__dict__.get("description"):
            # Its own docstring (getdoc would hand down a base class's, Agent's too).
            cls.description = inspect.cleandoc(cls.__doc__) if cls.__doc__ else ""
        _check_class(cls)
        methods: dict[str, MethodSpec] = {}
        subscriptions: list[SubscriptionSpec] = []
        for klass in reversed(cls.__mro__):
            own: dict[str, str] = {}  # a subclass may replace a method, one class not twice
            for attribute, func in vars(klass).items():
                check_wrapped(klass, attribute, func)
                mark = getattr(func, METHOD_ATTR, None)
                if isinstance(mark, MethodMark):
                    name = mark.name or attribute
                    if name in own:
                        raise TypeError(
                            f"{klass.__qualname__}.{own[name]} and .{attribute} are both "
                            f"JSON-RPC method {name!r}"
                        )
                    own[name] = attribute
                    methods[name] = MethodSpec.build(name, attribute, func, mark.description)
                for subject, replay in getattr(func, SUBSCRIBE_ATTR, ()):
                    subscriptions.append(SubscriptionSpec(subject, attribute, replay))
        cls.methods = methods
        cls.subscriptions = tuple(subscriptions)

    @property
    def client(self) -> Client:
        """The sync client of the bus this agent runs on: call other agents with it.

        RuntimeError when the agent is not running on a bus (in its constructor
        it is not yet: use it from ``on_start`` or a handler).
        """
        if self._client is None:
            raise RuntimeError(
                f"agent {self.agent_id!r} is not running on a bus: self.client is set once "
                "a bus hosts the agent, after its constructor (use it from on_start or a "
                "handler)"
            )
        return self._client

    @client.setter
    def client(self, client: Client) -> None:
        self._client = client

    @property
    def hosted(self) -> bool:
        """True once a bus hosts this instance (``client`` is set)."""
        return self._client is not None

    @property
    def cancelled(self) -> bool:
        """True once the caller of the request being handled canceled it (an A2A
        ``CancelTask``): a long handler checks it and returns early. A generator
        handler need not: it is closed at its next item."""
        return self.control.cancelled

    def progress(self, note: Any = None) -> None:
        """Report progress of the request being handled: for an A2A task a
        ``working`` status update (``note`` its message: text or any JSON value)
        that also resets the task's inactivity deadline. A no-op elsewhere."""
        self.control.progress(note)

    def on_start(self) -> None:
        """Called in the actor thread before the first message."""

    def on_stop(self) -> None:
        """Called in the actor thread after the last message (not after a crash)."""

    @classmethod
    def card(cls) -> dict[str, Any]:
        """The agent card published for discovery."""
        return {
            "id": cls.agent_id,
            "description": cls.description,
            "version": cls.version,
            "methods": [spec.describe() for spec in cls.methods.values()],
            "subscriptions": [s.subject for s in cls.subscriptions],
        }


def check_spawn(agent_cls: Any, replicas: Any) -> None:
    """TypeError or ValueError, at the spawn, for what is no agent class or no count."""
    if isinstance(agent_cls, Agent):
        raise TypeError(
            f"spawn takes the agent class, not an instance: spawn({type(agent_cls).__name__}) "
            "(the constructor's arguments follow replicas)"
        )
    if not (isinstance(agent_cls, type) and issubclass(agent_cls, Agent)) or agent_cls is Agent:
        raise TypeError(f"spawn takes a subclass of a2a_bus.Agent, not {agent_cls!r:.60}")
    if type(replicas) is not int:
        raise TypeError(
            f"spawn({agent_cls.__name__}): replicas must be a whole number, not "
            f"{replicas!r:.60} (the constructor's arguments follow it: "
            f"spawn({agent_cls.__name__}, 1, ...))"
        )
    if replicas < 1:
        raise ValueError(
            f"spawn({agent_cls.__name__}): replicas must be at least 1, not {replicas}"
        )


__all__ = ["Agent", "MethodSpec", "SubscriptionSpec", "UnresolvedHints", "method", "subscribe"]
