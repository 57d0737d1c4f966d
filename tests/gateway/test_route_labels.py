"""Metric labels stay bounded: ids never become label values."""

from __future__ import annotations

import pytest

from a2a_bus.gateway.prom import route_label


@pytest.mark.parametrize(
    ("path", "label"),
    [
        ("/rpc", "/rpc"),
        ("/agents/calc", "/agents/{id}"),
        ("/topics/news.sport/events", "/topics/{subject}/events"),
        ("/topics/news.sport/history", "/topics/{subject}/history"),
        ("/a2a/calc", "/a2a/{id}"),
        ("/a2a/support/.well-known/agent-card.json", "/a2a/{id}/card"),
        ("/a2a", "/a2a"),
        ("/.well-known/agent-card.json", "other"),
        ("/no/such/path", "other"),
    ],
)
def test_route_label(path: str, label: str) -> None:
    assert route_label(path) == label
