"""A durable conversation store in one SQLite file (stdlib ``sqlite3``)."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from a2a_bus.llm.memory.stores import ConversationStore, Outage, dump_messages, load_messages
from a2a_bus.llm.messages import LlmMessage

_SCHEMA = """
CREATE TABLE IF NOT EXISTS a2a_conversations (
    key TEXT PRIMARY KEY,
    messages TEXT NOT NULL,
    updated_at REAL NOT NULL
)
"""


def connect(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A connection shared by threads (callers serialise with a lock), in WAL mode."""
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    if str(path) != ":memory:":
        connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA busy_timeout=5000")
    return connection


class SqliteStore(ConversationStore):
    """Conversations as JSON rows in a SQLite database; survives restarts.

    A file that cannot be opened (its directory not writable) is a
    :class:`~a2a_bus.llm.memory.stores.StoreError` here, and so is a failure later.
    """

    def __init__(self, path: str | os.PathLike[str] = "a2a-conversations.db") -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._outage = Outage(repr(self), (sqlite3.Error, OSError))
        with self._outage.watch("open"):
            self._db = connect(path)
            self._db.execute(_SCHEMA)

    def load(self, key: str) -> list[LlmMessage]:
        with self._lock, self._outage.watch("load"):
            row = self._db.execute(
                "SELECT messages FROM a2a_conversations WHERE key = ?", (key,)
            ).fetchone()
        return load_messages(row[0]) if row else []

    def save(self, key: str, messages: Sequence[LlmMessage]) -> None:
        data = dump_messages(messages)
        with self._lock, self._outage.watch("save"):
            self._db.execute(
                "INSERT INTO a2a_conversations (key, messages, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET messages = excluded.messages, "
                "updated_at = excluded.updated_at",
                (key, data, time.time()),
            )

    def delete(self, key: str) -> None:
        with self._lock, self._outage.watch("delete"):
            self._db.execute("DELETE FROM a2a_conversations WHERE key = ?", (key,))

    def keys(self) -> list[str]:
        with self._lock, self._outage.watch("keys"):
            rows = self._db.execute("SELECT key FROM a2a_conversations ORDER BY key").fetchall()
        return [row[0] for row in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r})"
