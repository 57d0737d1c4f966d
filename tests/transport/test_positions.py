"""Cursors: the opaque form of a read position (pure, no transport)."""

from __future__ import annotations

import re

import pytest

from a2a_bus.transport.positions import check_limit, check_partitions, encode_cursor, parse_cursor


@pytest.mark.parametrize("position", [{}, {0: 0}, {0: 5, 1: 0, 2: 123_456_789_012}])
def test_a_cursor_stands_for_its_position(position: dict[int, int]) -> None:
    cursor = encode_cursor("a2a.topic.orders", position)
    assert cursor.replace("-", "").replace("_", "").isalnum()  # safe in a URL as it is
    assert parse_cursor("a2a.topic.orders", cursor) == position


def test_damaged_and_foreign_cursors_are_refused() -> None:
    cursor = encode_cursor("a2a.topic.orders", {0: 5, 1: 7})
    for bad in ("", "%%%", cursor + "!", cursor[:-2], cursor.swapcase(), "YWJj", 5):
        with pytest.raises(ValueError, match="invalid cursor"):
            parse_cursor("a2a.topic.orders", bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=re.escape("another topic than 'a2a.topic.orders'")):
        parse_cursor("a2a.topic.orders", encode_cursor("a2a.topic.other", {0: 5}))


def test_limits_and_partitions_are_checked() -> None:
    assert check_limit(1) == 1 and check_limit(1000) == 1000
    for bad in (0, 1001, True, 2.0, "3"):
        with pytest.raises(ValueError, match="limit must be an integer from 1 to 1000"):
            check_limit(bad)
    check_partitions({0: 1, 2: 0}, 3, "t")
    with pytest.raises(
        ValueError, match="'t' has 3 partition\\(s\\), the cursor names partition 3"
    ):
        check_partitions({0: 1, 3: 0}, 3, "t")
