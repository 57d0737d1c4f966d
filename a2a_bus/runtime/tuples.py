"""Named tuples built from all their fields at once, in C.

A named tuple's own ``__new__`` is Python code that names every field; the
records, deliveries and trace origins made once per message skip it.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

T = TypeVar("T", bound=tuple[Any, ...])


class TupleBuilder(Protocol):
    def __call__(self, cls: type[T], fields: tuple[Any, ...], /) -> T:
        """An instance of the named tuple ``cls`` holding ``fields`` (all of them, in order)."""


#: ``build(Point, (1, 2))`` is ``Point(1, 2)`` without its Python ``__new__``.
build: TupleBuilder = tuple.__new__
