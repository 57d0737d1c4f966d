"""A conversation store in Redis, shared by agent replicas on several machines.

Needs the ``redis`` package (``pip install 'a2a-bus[redis]'``), imported lazily.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from a2a_bus.llm.memory.stores import ConversationStore, dump_messages, load_messages
from a2a_bus.llm.messages import LlmMessage


class RedisStore(ConversationStore):
    """One Redis string (JSON) per conversation under ``prefix``; optional TTL."""

    def __init__(
        self,
        url: str = "redis://localhost:6379/0",
        *,
        client: Any = None,
        prefix: str = "a2a:conversation:",
        ttl: float | None = None,
    ) -> None:
        if client is None:
            try:
                import redis
            except ImportError as exc:  # pragma: no cover - depends on the install
                raise ImportError(
                    "RedisStore needs the redis package: pip install 'a2a-bus[redis]'"
                ) from exc
            client = redis.Redis.from_url(url)
        self.url = url
        self.prefix = prefix
        self.ttl = ttl
        self._redis = client

    def _key(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def load(self, key: str) -> list[LlmMessage]:
        data = self._redis.get(self._key(key))
        return load_messages(data) if data else []

    def save(self, key: str, messages: Sequence[LlmMessage]) -> None:
        ttl_ms = int(self.ttl * 1000) if self.ttl else None
        self._redis.set(self._key(key), dump_messages(messages), px=ttl_ms)

    def delete(self, key: str) -> None:
        self._redis.delete(self._key(key))

    def keys(self) -> list[str]:
        keys = []
        for raw in self._redis.scan_iter(match=f"{self.prefix}*", count=500):
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
            keys.append(name.removeprefix(self.prefix))
        return sorted(keys)

    def close(self) -> None:
        self._redis.close()

    def __repr__(self) -> str:
        return f"RedisStore({self.url!r}, prefix={self.prefix!r})"
