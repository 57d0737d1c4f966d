"""Named tuples built from all their fields at once: the same value as the class
makes, of the class's type, and without running its Python ``__new__``."""

from __future__ import annotations

from typing import NamedTuple

from a2a_bus.runtime.tuples import build


class Point(NamedTuple):
    x: int
    y: int
    label: str = "origin"


def test_a_built_tuple_equals_the_one_its_class_makes_and_has_its_type() -> None:
    point = build(Point, (1, 2, "a"))
    assert point == Point(1, 2, "a")
    assert type(point) is Point
    assert (point.x, point.y, point.label) == (1, 2, "a")
    assert point._replace(y=5) == Point(1, 5, "a")


def test_building_skips_the_classes_own_new_so_every_field_must_be_given() -> None:
    calls: list[tuple[object, ...]] = []

    class Checked(NamedTuple):
        value: int

    original = Checked.__new__

    def counting_new(cls: type[Checked], value: int) -> Checked:
        calls.append((value,))
        return original(cls, value)

    Checked.__new__ = counting_new  # type: ignore[method-assign, assignment]
    assert Checked(3) == build(Checked, (3,))
    assert calls == [(3,)]  # the class call ran its __new__, build did not
    short = build(Point, (1, 2))  # no defaults: a field not given is missing
    assert len(short) == 2
