"""Binding JSON-RPC ``params`` to a handler's signature, with checks of simple types.

Positional params (an array) bind in order, named params (an object) by name;
the routing members (``_agentId``, ``_topic``, ``_seq``, ``_sessionId``) are
dropped first. A mismatch — missing, extra, or a value of the wrong simple
type, also an item of a ``list[T]``, ``dict[str, T]`` or a stream sent as one
array — raises -32602, before the handler runs. Handlers whose parameters are all plain
(positional-or-keyword, no stream) bind without ``inspect.Signature.bind``,
which is most of the cost of a small request.

A stream parameter (``Iterator[T]``) is bound to its source: the items sent as
one array, or the caller's open stream. :meth:`Binder.call` hands the handler
a fresh iterator over that source on each call, so a retry after a crash
starts from the same input as the first attempt.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from operator import methodcaller
from typing import Any, NamedTuple

from a2a_bus.hosting.schema import (
    ItemCheck,
    accepted_types,
    item_check,
    schema_for,
    stream_item_type,
    value_check,
)
from a2a_bus.protocol import ROUTING_PARAMS, ErrorCode, JsonRpcError

_PLAIN = inspect.Parameter.POSITIONAL_OR_KEYWORD
_VAR_POSITIONAL = inspect.Parameter.VAR_POSITIONAL
_VAR_KEYWORD = inspect.Parameter.VAR_KEYWORD


class Bound(NamedTuple):
    """Call the handler with ``(*args, **kwargs)``; ``arguments`` maps names to values."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    arguments: dict[str, Any]


def invalid(detail: str) -> JsonRpcError:
    return JsonRpcError(ErrorCode.INVALID_PARAMS, "Invalid params", detail)


class Binder:
    """Binds params to ``signature`` (without ``self``); ``stream_param`` takes a stream."""

    def __init__(
        self, signature: inspect.Signature, hints: dict[str, Any], stream_param: str | None
    ) -> None:
        self.signature = signature
        self.hints = hints
        self.stream_param = stream_param
        #: The types each checked parameter's value may have (``type(v) in types``).
        self.checks: dict[str, frozenset[type]] = {}
        #: The checks of the items of each container parameter (not ``*args``/``**kwargs``).
        self.item_checks: dict[str, ItemCheck] = {}
        for name, parameter in signature.parameters.items():
            types = accepted_types(hints.get(name, Any)) if name != stream_param else None
            if types is not None:
                self.checks[name] = types
            items = item_check(hints.get(name, Any))
            if items is not None and parameter.kind not in (_VAR_POSITIONAL, _VAR_KEYWORD):
                self.item_checks[name] = items
        #: The check of each item of a stream sent chunk by chunk.
        self._chunk_check = (
            value_check(stream_item_type(hints.get(stream_param, Any)))
            if stream_param is not None
            else None
        )
        parameters = list(signature.parameters.values())
        self._plain = stream_param is None and all(p.kind is _PLAIN for p in parameters)
        self._names = tuple(p.name for p in parameters)
        self._count = len(self._names)
        self._accepted = frozenset(self._names)
        # A parameter named like a routing member never gets it: the bus's, not the handler's.
        self._shadows_routing = not self._accepted.isdisjoint(ROUTING_PARAMS)
        #: The types of each plain parameter in order (None: any), to check an array
        #: of params in place.
        self._position_types = tuple(self.checks.get(name) for name in self._names)
        # Plain parameters with defaults can only follow those without.
        self._required = sum(1 for p in parameters if p.default is p.empty)
        #: Every accepted row of value types of an array of params, when few: one
        #: lookup checks an array (None: checked value by value).
        self._type_rows = _type_rows(self._position_types, self._required)

    def bind(self, params: Any, stream: Iterable[Any] | None = None) -> Bound:
        """Bind JSON-RPC ``params`` (``stream``: the caller's stream, if one is open).

        The stream parameter is bound to its source (``stream``, or the array
        sent in its place), not to an iterator: see :meth:`call`.
        """
        if self._plain:
            if type(params) is list:
                return self._positional(params)
            if type(params) is dict:
                return self._check(self._named(params))
            if params is None:
                return self._check(self._named({}))
        if isinstance(params, dict):
            named = {k: v for k, v in params.items() if k not in ROUTING_PARAMS}
            positional: list[Any] = []
        elif isinstance(params, list):
            named, positional = {}, list(params)
        elif params is None:
            named, positional = {}, []
        else:
            raise invalid("params must be an array or object")
        if stream is not None and self.stream_param is not None:
            named[self.stream_param] = stream
        try:
            bound = self.signature.bind(*positional, **named)
        except TypeError as exc:
            raise invalid(str(exc)) from None
        if stream is None and self.stream_param in bound.arguments:
            given = bound.arguments[self.stream_param]
            if type(given) is not list:  # a whole stream sent at once is an array
                kind = type(given).__name__
                raise invalid(f"{self.stream_param}: expected an array of items, got {kind}")
        return self._check(Bound(bound.args, bound.kwargs, dict(bound.arguments)))

    def call(self, attribute: str, bound: Bound) -> Callable[[Any], Any]:
        """``agent.<attribute>(...)`` with ``bound``; the stream parameter gets a new
        iterator over its source each time."""
        name = self.stream_param
        source = bound.arguments.get(name) if name is not None else None
        if name is None or source is None:
            return methodcaller(attribute, *bound.args, **bound.kwargs)
        position = next((i for i, value in enumerate(bound.args) if value is source), None)
        return functools.partial(_call_with_stream, attribute, bound, name, position, source)

    def caller(self, attribute: str, params: Any) -> Callable[[Any], Any]:
        """``agent.<attribute>(...)`` with ``params`` bound (:meth:`bind`, then
        :meth:`call`); -32602 on a mismatch."""
        if self._plain and type(params) is list:
            # Positional params of plain parameters: checked in place, no Bound made.
            self._check_positional(params)
            return methodcaller(attribute, *params)
        return self.call(attribute, self.bind(params))

    def _positional(self, params: list[Any]) -> Bound:
        self._check_positional(params)
        return Bound(tuple(params), {}, dict(zip(self._names, params, strict=False)))

    def _check_positional(self, params: list[Any]) -> None:
        rows = self._type_rows
        if rows is None or tuple(map(type, params)) not in rows:
            self._check_positional_types(params)
        if self.item_checks:
            self._check_items(dict(zip(self._names, params, strict=False)))

    def _check_positional_types(self, params: list[Any]) -> None:
        count = len(params)
        if count > self._count:
            raise invalid("too many positional arguments")
        if count < self._required:
            raise invalid(f"missing a required argument: {self._names[count]!r}")
        for types, value in zip(self._position_types, params, strict=False):
            if types is not None and type(value) not in types:
                arguments = dict(zip(self._names, params, strict=False))
                self._check(Bound(tuple(params), {}, arguments))  # raises, naming it

    def _named(self, params: dict[str, Any]) -> Bound:
        if self._shadows_routing or not self._accepted.issuperset(params):
            named = {k: v for k, v in params.items() if k not in ROUTING_PARAMS}
            unexpected = next((k for k in named if k not in self._accepted), None)
            if unexpected is not None:
                raise invalid(f"got an unexpected keyword argument {unexpected!r}")
            params = named
        for name in self._names[: self._required]:
            if name not in params:
                raise invalid(f"missing a required argument: {name!r}")
        return Bound((), params, params)

    def _check(self, bound: Bound) -> Bound:
        if self.item_checks:
            self._check_items(bound.arguments)  # (a value of the wrong type has no items)
        checks = self.checks
        if not checks:
            return bound
        parameters = self.signature.parameters
        for name, value in bound.arguments.items():
            types = checks.get(name)
            if types is None:
                continue
            kind = parameters[name].kind
            # ``*args: int`` / ``**kwargs: int`` describe each item, not the tuple/dict.
            if kind is _VAR_POSITIONAL:
                items = [(f"{name}[{i}]", item) for i, item in enumerate(value)]
            elif kind is _VAR_KEYWORD:
                items = list(value.items())
            else:
                if type(value) in types:
                    continue
                items = [(name, value)]
            for label, item in items:
                if type(item) not in types:
                    raise _misfit(label, self.hints[name], item)
        return bound

    def _check_items(self, arguments: dict[str, Any]) -> None:
        """-32602 naming the first item of a container argument that does not fit."""
        for name, check in self.item_checks.items():
            if name in arguments and (misfit := check(arguments[name], name)) is not None:
                raise _misfit(*misfit)

    def chunk_refusal(self, item: Any, seq: int) -> JsonRpcError | None:
        """-32602 for the ``seq``-th chunk of a stream when its item does not fit the
        stream parameter's item type (``numbers[3]: expected ...``), else None."""
        check = self._chunk_check
        if check is None:
            return None
        misfit = check(item, f"{self.stream_param}[{seq}]")
        return None if misfit is None else _misfit(*misfit)


def _misfit(label: str, hint: Any, item: Any) -> JsonRpcError:
    return invalid(f"{label}: expected {schema_for(hint)}, got {type(item).__name__}")


#: Most rows of value types :func:`_type_rows` lists for one handler.
_MAX_TYPE_ROWS = 256


def _type_rows(
    position_types: tuple[frozenset[type] | None, ...], required: int
) -> frozenset[tuple[type, ...]] | None:
    """The rows of value types an array of ``required`` to ``len(position_types)``
    params may have, or None when a parameter takes any type or there are too many."""
    if any(types is None for types in position_types):
        return None
    rows: set[tuple[type, ...]] = set()
    for count in range(required, len(position_types) + 1):
        prefixes: list[tuple[type, ...]] = [()]
        for types in position_types[:count]:
            assert types is not None
            prefixes = [(*prefix, kind) for prefix in prefixes for kind in types]
            if len(prefixes) + len(rows) > _MAX_TYPE_ROWS:
                return None
        rows.update(prefixes)
    return frozenset(rows)


def _call_with_stream(
    attribute: str,
    bound: Bound,
    name: str,
    position: int | None,
    source: Iterable[Any],
    agent: Any,
) -> Any:
    args, kwargs = bound.args, bound.kwargs
    if position is None:
        kwargs = {**kwargs, name: iter(source)}
    else:
        args = (*args[:position], iter(source), *args[position + 1 :])
    return getattr(agent, attribute)(*args, **kwargs)
