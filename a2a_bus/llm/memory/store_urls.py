"""Conversation stores named by URL: ``memory://``, ``sqlite:///path.db``, ``redis://...``."""

from __future__ import annotations

from a2a_bus.llm.memory.redis_store import RedisStore
from a2a_bus.llm.memory.sqlite_store import SqliteStore
from a2a_bus.llm.memory.stores import ConversationStore, InMemoryStore


def open_store(url: str | None = None) -> ConversationStore:
    """A store from a URL: ``memory://``, ``sqlite:///path.db`` or ``redis://host:port/db``."""
    if url is None or url in ("memory", "memory://"):
        return InMemoryStore()
    if url.startswith("sqlite://"):
        path = url.removeprefix("sqlite://").removeprefix("/") or ":memory:"
        return SqliteStore(path)
    if url.startswith(("redis://", "rediss://", "unix://")):
        return RedisStore(url)
    raise ValueError(f"unsupported store URL {url!r}: use memory://, sqlite:///path or redis://")
