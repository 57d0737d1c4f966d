"""A conversation store in Redis, shared by agent replicas on several machines.

Needs the ``redis`` package (``pip install 'a2a-bus[redis]'``), imported lazily.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

from a2a_bus.llm.memory.stores import ConversationStore, Outage, dump_messages, load_messages
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
        self._outage = Outage(repr(self), _redis_failures(), _secrets(url))

    def _key(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def load(self, key: str) -> list[LlmMessage]:
        with self._outage.watch("load"):
            data = self._redis.get(self._key(key))
        return load_messages(data) if data else []

    def save(self, key: str, messages: Sequence[LlmMessage]) -> None:
        ttl_ms = int(self.ttl * 1000) if self.ttl else None
        with self._outage.watch("save"):
            self._redis.set(self._key(key), dump_messages(messages), px=ttl_ms)

    def delete(self, key: str) -> None:
        with self._outage.watch("delete"):
            self._redis.delete(self._key(key))

    def keys(self) -> list[str]:
        keys = []
        with self._outage.watch("keys"):
            for raw in self._redis.scan_iter(match=f"{self.prefix}*", count=500):
                name = raw.decode() if isinstance(raw, bytes) else str(raw)
                keys.append(name.removeprefix(self.prefix))
        return sorted(keys)

    def close(self) -> None:
        self._redis.close()

    def __repr__(self) -> str:
        return f"RedisStore({public_url(self.url)!r}, prefix={self.prefix!r})"


def public_url(url: str) -> str:
    """``url`` without what may be secret: its user name and password, and its query
    (``?password=`` is a way to give one)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def _secrets(url: str) -> list[str]:
    """The passwords ``url`` gives (after the user name, or as ``?password=``)."""
    parts = urlsplit(url)
    return [parts.password or "", *parse_qs(parts.query).get("password", [])]


def _redis_failures() -> tuple[type[Exception], ...]:
    """What a Redis client raises when the server cannot serve (OSError: one of
    another make, without the redis package)."""
    try:
        from redis.exceptions import RedisError
    except ImportError:  # pragma: no cover - depends on the install
        return (OSError,)
    return (RedisError, OSError)
