"""News agents: a desk that publishes headlines, and readers that subscribe.

The desk publishes each headline once on ``news.<section>``; every reader
subscribed to a matching subject receives it (fan-out by consumer group).
"""

from __future__ import annotations

import threading
from typing import Any

from a2a_bus import Agent, method, subscribe


class NewsDesk(Agent):
    """Publishes headlines on ``news.<section>``."""

    agent_id = "newsdesk"

    @method
    def publish(self, section: str, headline: str) -> str:
        """Publish a headline; returns the event id."""
        return str(self.client.publish(f"news.{section}", {"headline": headline}))


class _Reader(Agent):
    """Base of readers: remembers what it read (readable from other threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read: list[str] = []

    def remember(self, event: Any) -> None:
        data = event.get_data() or {}
        with self._lock:
            self._read.append(f"{event.get_subject()}: {data.get('headline')}")

    @method
    def read(self) -> list[str]:
        """Headlines read so far."""
        with self._lock:
            return list(self._read)


class SportsFan(_Reader):
    """Reads sports news."""

    agent_id = "sports-fan"

    @subscribe("news.sports")
    def on_sports(self, event: Any) -> None:
        self.remember(event)


class NewsJunkie(_Reader):
    """Reads every section (wildcard subscription)."""

    agent_id = "news-junkie"

    @subscribe("news.*")
    def on_news(self, event: Any) -> None:
        self.remember(event)


class Archivist(_Reader):
    """Joins late and replays the retained history of every section."""

    agent_id = "archivist"

    @subscribe("news.*", replay=True)
    def on_news(self, event: Any) -> None:
        self.remember(event)
