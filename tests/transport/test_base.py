"""The transport contract: the topics ``subscribe`` accepts (``checked_topics``)."""

from __future__ import annotations

import pytest


def test_subscribe_refuses_a_bare_string_and_nothing_on_every_transport() -> None:
    from a2a_bus.transport.base import TopicPattern, checked_topics

    with pytest.raises(TypeError, match="not a str"):
        checked_topics("orders")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one topic"):
        checked_topics([])
    pattern = TopicPattern(r"^a2a\.topic\..*$")
    assert checked_topics(pattern) is pattern
    assert checked_topics(["a", "b"]) == ["a", "b"]
