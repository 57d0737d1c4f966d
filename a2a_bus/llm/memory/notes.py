"""A key/value notes backend that exposes its own tools to the model.

The builder merges ``backend.exposes_tools()`` (``memory_save``,
``memory_read``, ``memory_list``, ``memory_delete``) into the agent's tools, so
adding the backend is all it takes to give an agent a notebook. Notes are
scoped per agent and, by default, per conversation.
"""

from __future__ import annotations

import abc
import threading
import time
from pathlib import Path
from typing import Literal

from a2a_bus.llm.memory.sqlite_store import connect
from a2a_bus.llm.tools import AgentTool, FunctionTool, ToolContext

Scope = Literal["conversation", "agent"]


class NotesBackend(abc.ABC):
    """Notes (short texts under keys), isolated by scope."""

    def __init__(self, scope: Scope = "conversation", max_value_chars: int = 8000) -> None:
        if scope not in ("conversation", "agent"):
            raise ValueError("scope must be 'conversation' or 'agent'")
        self.scope = scope
        self.max_value_chars = max_value_chars

    @abc.abstractmethod
    def save(self, scope: str, key: str, value: str) -> None: ...

    @abc.abstractmethod
    def read(self, scope: str, key: str) -> str | None: ...

    @abc.abstractmethod
    def list_keys(self, scope: str) -> list[str]: ...

    @abc.abstractmethod
    def delete(self, scope: str, key: str) -> bool: ...

    def scope_of(self, context: ToolContext) -> str:
        if self.scope == "agent" or context.conversation is None:
            return context.agent
        return f"{context.agent}/{context.conversation}"

    def exposes_tools(self) -> list[AgentTool]:
        """The tools the model uses to keep notes."""
        backend = self

        def memory_save(key: str, value: str, context: ToolContext) -> str:
            """Save a note under a key, replacing any earlier note with that key.

            Args:
                key: short name of the note
                value: the text to remember
            """
            if len(value) > backend.max_value_chars:
                raise ValueError(
                    f"note is too long ({len(value)} > {backend.max_value_chars} chars)"
                )
            backend.save(backend.scope_of(context), key, value)
            return f"saved note {key!r}"

        def memory_read(key: str, context: ToolContext) -> str:
            """Read the note saved under a key.

            Args:
                key: name of the note
            """
            value = backend.read(backend.scope_of(context), key)
            if value is None:
                raise LookupError(f"no note named {key!r}")
            return value

        def memory_list(context: ToolContext) -> list[str]:
            """List the keys of all saved notes."""
            return backend.list_keys(backend.scope_of(context))

        def memory_delete(key: str, context: ToolContext) -> str:
            """Delete the note saved under a key.

            Args:
                key: name of the note
            """
            if not backend.delete(backend.scope_of(context), key):
                raise LookupError(f"no note named {key!r}")
            return f"deleted note {key!r}"

        blocking = isinstance(self, SqliteNotes)
        return [
            FunctionTool(f, blocking=blocking)
            for f in (memory_save, memory_read, memory_list, memory_delete)
        ]


class InMemoryNotes(NotesBackend):
    """Notes in a dict (lost on restart)."""

    def __init__(self, scope: Scope = "conversation", max_value_chars: int = 8000) -> None:
        super().__init__(scope, max_value_chars)
        self._notes: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()

    def save(self, scope: str, key: str, value: str) -> None:
        with self._lock:
            self._notes.setdefault(scope, {})[key] = value

    def read(self, scope: str, key: str) -> str | None:
        with self._lock:
            return self._notes.get(scope, {}).get(key)

    def list_keys(self, scope: str) -> list[str]:
        with self._lock:
            return sorted(self._notes.get(scope, {}))

    def delete(self, scope: str, key: str) -> bool:
        with self._lock:
            return self._notes.get(scope, {}).pop(key, None) is not None


class SqliteNotes(NotesBackend):
    """Notes in a SQLite file (may share the conversations database)."""

    def __init__(
        self,
        path: str | Path = "a2a-notes.db",
        scope: Scope = "conversation",
        max_value_chars: int = 8000,
    ) -> None:
        super().__init__(scope, max_value_chars)
        self._lock = threading.Lock()
        self._db = connect(path)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS a2a_notes (scope TEXT NOT NULL, key TEXT NOT NULL, "
            "value TEXT NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (scope, key))"
        )

    def save(self, scope: str, key: str, value: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO a2a_notes (scope, key, value, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(scope, key) DO UPDATE SET value = excluded.value, "
                "updated_at = excluded.updated_at",
                (scope, key, value, time.time()),
            )

    def read(self, scope: str, key: str) -> str | None:
        with self._lock:
            row = self._db.execute(
                "SELECT value FROM a2a_notes WHERE scope = ? AND key = ?", (scope, key)
            ).fetchone()
        return row[0] if row else None

    def list_keys(self, scope: str) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT key FROM a2a_notes WHERE scope = ? ORDER BY key", (scope,)
            ).fetchall()
        return [row[0] for row in rows]

    def delete(self, scope: str, key: str) -> bool:
        with self._lock:
            cursor = self._db.execute(
                "DELETE FROM a2a_notes WHERE scope = ? AND key = ?", (scope, key)
            )
        return cursor.rowcount > 0

    def close(self) -> None:
        with self._lock:
            self._db.close()
