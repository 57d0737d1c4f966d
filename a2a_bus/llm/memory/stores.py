"""Conversation stores: where each conversation's messages live between runs.

Conversations are isolated by key. The in-memory store is the default; the
SQLite store is the embedded durable one; the Redis store serves replicas on
several machines. :func:`~a2a_bus.llm.memory.store_urls.open_store` picks one from a URL.
A store that cannot be used raises :class:`StoreError`, which names it and why.
"""

from __future__ import annotations

import abc
import contextlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence

from a2a_bus.llm.messages import LlmMessage
from a2a_bus.protocol import ErrorCode, JsonRpcError

log = logging.getLogger(__name__)


class StoreError(JsonRpcError):
    """A conversation store that cannot be used: its server out of reach, its file
    not writable. A JSON-RPC error (-32603, ``data`` naming the store and why), so
    an agent on the bus answers with the reason instead of crashing on it."""

    def __init__(self, store: str, problem: str) -> None:
        super().__init__(
            ErrorCode.INTERNAL_ERROR, "Internal error", f"conversation store {store}: {problem}"
        )
        self.store = store
        self.problem = problem


class Outage:
    """Turns what a store's backend raises into :class:`StoreError`, logged once per
    outage: at its first failure, and again only after the store worked meanwhile."""

    def __init__(
        self, store: str, failures: tuple[type[Exception], ...], hidden: Sequence[str] = ()
    ) -> None:
        self.store = store
        self.failures = failures
        #: Texts never to show (a password the backend's message might quote).
        self.hidden = tuple(text for text in hidden if text)
        self.down = False

    @contextlib.contextmanager
    def watch(self, action: str) -> Iterator[None]:
        """Around one use of the backend (``action`` names it in the error)."""
        try:
            yield
        except self.failures as exc:
            reason = f"{type(exc).__name__}: {exc}"
            for text in self.hidden:
                reason = reason.replace(text, "***")
            error = StoreError(self.store, f"{action} failed: {reason}")
            if not self.down:
                self.down = True
                log.warning("%s (logged once until it works again)", error.data)
            raise error from exc
        if self.down:
            self.down = False
            log.info("conversation store %s works again", self.store)


class ConversationStore(abc.ABC):
    """Persists conversations (lists of messages) by key."""

    #: True when calls do I/O; the async loop then runs them in a worker thread.
    blocking: bool = True

    @abc.abstractmethod
    def load(self, key: str) -> list[LlmMessage]:
        """The conversation's messages, or ``[]`` for an unknown key."""

    @abc.abstractmethod
    def save(self, key: str, messages: Sequence[LlmMessage]) -> None:
        """Replace the conversation's messages."""

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Forget the conversation (no error if unknown)."""

    @abc.abstractmethod
    def keys(self) -> list[str]:
        """Keys of the stored conversations."""

    def close(self) -> None:  # noqa: B027 - optional hook, no-op by default
        """Release resources."""

    def __enter__(self) -> ConversationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def dump_messages(messages: Sequence[LlmMessage]) -> str:
    return json.dumps([m.to_dict() for m in messages], ensure_ascii=False, separators=(",", ":"))


def load_messages(text: str | bytes) -> list[LlmMessage]:
    return [LlmMessage.from_dict(item) for item in json.loads(text)]


class InMemoryStore(ConversationStore):
    """Conversations in a dict, least recently used evicted beyond ``max_conversations``."""

    blocking = False

    def __init__(self, max_conversations: int = 10_000) -> None:
        if max_conversations < 1:
            raise ValueError("max_conversations must be >= 1")
        self.max_conversations = max_conversations
        self._data: OrderedDict[str, tuple[LlmMessage, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def load(self, key: str) -> list[LlmMessage]:
        with self._lock:
            messages = self._data.get(key)
            if messages is None:
                return []
            self._data.move_to_end(key)
            return list(messages)

    def save(self, key: str, messages: Sequence[LlmMessage]) -> None:
        with self._lock:
            self._data[key] = tuple(messages)
            self._data.move_to_end(key)
            while len(self._data) > self.max_conversations:
                self._data.popitem(last=False)

    def delete(self, key: str) -> None:
        with self._lock:
            self._data.pop(key, None)

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._data)
