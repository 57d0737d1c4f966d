"""The Agent base class and the ``@method`` / ``@subscribe`` decorators.

An agent is a plain class; the bus hosts each instance in its own pykka actor,
so handlers run one at a time in the actor's thread and may keep state.
"""

from __future__ import annotations

import inspect
import typing
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from a2a_bus.client import Client
from a2a_bus.core.routing import validate_name, validate_subject
from a2a_bus.hosting.binding import Binder, Bound
from a2a_bus.hosting.control import IDLE, RunControl
from a2a_bus.hosting.schema import parameters_schema, parse_docstring, schema_for, stream_item_type
from a2a_bus.protocol.jsonrpc import RESERVED_METHOD_PREFIX
from a2a_bus.schedule.spec import Schedule

F = TypeVar("F", bound=Callable[..., Any])

_METHOD_ATTR = "__a2a_method__"
_SUBSCRIBE_ATTR = "__a2a_subscriptions__"


class UnresolvedHints(UserWarning):
    """A handler's type hints name something that cannot be resolved."""


@dataclass(frozen=True, slots=True)
class _MethodMark:
    name: str | None
    description: str | None


def method(name: str | F | None = None, *, description: str | None = None) -> Any:
    """Expose a handler as JSON-RPC method ``name`` (default: the function name).

    Positional params bind in order, named params by name. A generator handler
    streams its items; a parameter typed ``Iterator[T]`` receives a stream the
    caller sends.
    """
    if callable(name):
        _check_handler(name, "@method")
        setattr(name, _METHOD_ATTR, _MethodMark(None, description))
        return name
    if name is not None and name.startswith(RESERVED_METHOD_PREFIX):
        # Calls to it would be refused (-32601) before they reached the agent.
        detail = f"names beginning with {RESERVED_METHOD_PREFIX!r} are reserved"
        raise ValueError(f"@method({name!r}): {detail}")

    def mark(func: F) -> F:
        _check_handler(func, "@method")
        setattr(func, _METHOD_ATTR, _MethodMark(name, description))
        return func

    return mark


def _check_handler(func: Callable[..., Any], decorator: str) -> None:
    """TypeError for an ``async def`` handler: handlers run in the agent's actor
    thread, which has no event loop to await them (each call would fail)."""
    if inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func):
        raise TypeError(
            f"{decorator} {func.__qualname__} is async: handlers run in the agent's actor "
            "thread; write a plain function or generator (self.client calls other agents)"
        )


def subscribe(subject: str, *, replay: bool = False) -> Callable[[F], F]:
    """Receive every event published on ``subject`` (``*`` and ``#`` wildcards).

    With ``replay`` a newly created subscription starts from the retained history.
    """
    validate_subject(subject, wildcards=True)

    def mark(func: F) -> F:
        _check_handler(func, "@subscribe")
        if inspect.isgeneratorfunction(func):  # its body would never run
            raise TypeError(
                f"@subscribe {func.__qualname__} is a generator: an event handler answers "
                "nothing; write a plain function (self.client.publish sends events on)"
            )
        marks = list(getattr(func, _SUBSCRIBE_ATTR, ()))
        marks.append((subject, replay))
        setattr(func, _SUBSCRIBE_ATTR, marks)
        return func

    return mark


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
    def build(cls, name: str, func: Callable[..., Any], description: str | None) -> MethodSpec:
        signature = inspect.signature(func)
        parameters = list(signature.parameters.values())[1:]  # drop self
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
            attribute=func.__name__,
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
        if not cls.__dict__.get("agent_id"):
            cls.agent_id = cls.__name__.lower()
        validate_name(cls.agent_id)
        if not cls.__dict__.get("description"):
            # Its own docstring (getdoc would hand down a base class's, Agent's too).
            cls.description = inspect.cleandoc(cls.__doc__) if cls.__doc__ else ""
        methods: dict[str, MethodSpec] = {}
        subscriptions: list[SubscriptionSpec] = []
        for klass in reversed(cls.__mro__):
            own: dict[str, str] = {}  # a subclass may replace a method, one class not twice
            for attribute, func in vars(klass).items():
                mark = getattr(func, _METHOD_ATTR, None)
                if isinstance(mark, _MethodMark):
                    name = mark.name or attribute
                    if name in own:
                        raise TypeError(
                            f"{klass.__qualname__}.{own[name]} and .{attribute} are both "
                            f"JSON-RPC method {name!r}"
                        )
                    own[name] = attribute
                    methods[name] = MethodSpec.build(name, func, mark.description)
                for subject, replay in getattr(func, _SUBSCRIBE_ATTR, ()):
                    subscriptions.append(SubscriptionSpec(subject, attribute, replay))
        cls.methods = methods
        cls.subscriptions = tuple(subscriptions)

    @property
    def client(self) -> Client:
        """The sync client of the bus this agent runs on: call other agents with it.

        RuntimeError when the agent is not running on a bus.
        """
        if self._client is None:
            raise RuntimeError(f"agent {self.agent_id!r} is not running on a bus")
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
