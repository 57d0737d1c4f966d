"""Where the latest state of each A2A task is kept beyond the task log.

The task log (``<prefix>.tasks``) is the tasks' truth, but it is not kept forever
(retention) and the in-memory transport's log is gone when its process stops. A
task store keeps each task's latest :class:`Snapshot`: the fold's record
(:meth:`.fold.TaskFold.record`) and the position of the last log record folded
into it. A view starting with a store (:mod:`.view`) restores the snapshots, then
folds only the log records after each snapshot's position.

* :class:`SqliteTaskStore`: one table in a SQLite file (WAL), for a single node
  (its tasks outlive a restart of the process, whatever the transport).
* :class:`KafkaStateTopic`: the compacted topic ``<prefix>.tasks.state``, keyed by
  task id: every replica reads it at start.
* No store (``memory``): the view holds what the log retains, nothing more.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

import orjson

from a2a_bus.core.routing import Topics
from a2a_bus.gateway.settings import parse_task_store
from a2a_bus.protocol import new_event
from a2a_bus.transport.base import Transport
from a2a_bus.transport.errors import RecordTooLarge

log = logging.getLogger(__name__)

#: The CloudEvents type of a snapshot on the state topic.
STATE_TYPE: Final = "a2a-bus.task.state"
#: Events read per page when loading the state topic.
_PAGE = 1000
T = TypeVar("T")


@dataclass(frozen=True)
class Snapshot:
    """A task's state (:meth:`.fold.TaskFold.record`) as of one task-log record."""

    task_id: str
    record: dict[str, Any]
    #: Where the last record folded into it is in the task log.
    partition: int
    offset: int

    def to_json(self) -> dict[str, Any]:
        return {
            "taskId": self.task_id,
            "partition": self.partition,
            "offset": self.offset,
            "record": self.record,
        }

    @classmethod
    def of(cls, task_id: Any, record: Any, partition: Any, offset: Any) -> Snapshot:
        """A snapshot of these values, as read from a store; ValueError when they are
        not a snapshot's (a store is shared: a row or event there may be anyone's)."""
        if not isinstance(task_id, str):
            raise ValueError(f"not a task snapshot: its task id is {task_id!r}")
        if not all(type(n) is int and 0 <= n < 2**63 for n in (partition, offset)):
            raise ValueError(f"not a task snapshot: its position is {partition!r}, {offset!r}")
        if not isinstance(record, dict):
            raise ValueError("not a task snapshot: its record is no object")
        return cls(task_id, record, partition, offset)

    @classmethod
    def from_json(cls, data: Any) -> Snapshot:
        """Raises ValueError when ``data`` is no snapshot."""
        if not isinstance(data, dict):
            raise ValueError("not a task snapshot: no object")
        return cls.of(
            data.get("taskId"), data.get("record"), data.get("partition"), data.get("offset")
        )


class StoreLost(Exception):
    """The store no longer holds what was saved (its file was deleted or replaced):
    every task must be saved again."""


class TaskStore(abc.ABC):
    """The latest snapshot of each task, by task id."""

    @abc.abstractmethod
    async def load(self) -> list[Snapshot]:
        """Every task's latest snapshot, the earliest kept first."""

    @abc.abstractmethod
    async def save(self, snapshot: Snapshot) -> None:
        """Keep ``snapshot`` as its task's latest (replacing the one before)."""

    async def save_many(self, snapshots: Sequence[Snapshot]) -> None:
        for snapshot in snapshots:
            await self.save(snapshot)

    @abc.abstractmethod
    async def delete(self, task_ids: Iterable[str]) -> None:
        """Forget these tasks."""

    async def close(self) -> None:
        """Let go of what the store holds open (it opens again when used)."""
        return None  # nothing held open by default


class SqliteTaskStore(TaskStore):
    """Snapshots in a SQLite file: one row per task, replaced in place.

    Write-ahead logging with ``synchronous=NORMAL``: a saved snapshot survives the
    process's crash (not necessarily the machine's). The calls run one at a time
    in a thread of the store's own, which alone uses the connection. A file deleted
    or replaced while open is made again at the next call, which raises
    :class:`StoreLost` (rows saved to the old file would be lost with it). A row
    that cannot be read is left out of :meth:`load`, with a warning.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._connection: sqlite3.Connection | None = None
        #: The open file's (device, inode): another file at ``path`` is not it.
        self._opened: tuple[int, int] | None = None
        self._lost = False
        self._thread: ThreadPoolExecutor | None = None

    async def load(self) -> list[Snapshot]:
        snapshots = []
        for task_id, partition, offset, text in await self._run(_select):
            try:
                # SQLite keeps any type in any column: a row written by another hand may not fit.
                record = orjson.loads(text) if isinstance(text, bytes | str) else None
                snapshots.append(Snapshot.of(task_id, record, partition, offset))
            except ValueError as exc:  # orjson's decode error is one
                log.warning(
                    "task store %s: the row of task %r cannot be read: %s", self.path, task_id, exc
                )
        return snapshots

    async def save(self, snapshot: Snapshot) -> None:
        await self.save_many([snapshot])

    async def save_many(self, snapshots: Sequence[Snapshot]) -> None:
        rows = []
        for s in snapshots:
            try:
                rows.append((s.task_id, s.partition, s.offset, orjson.dumps(s.record)))
            except TypeError as exc:  # trying again would not help; the others are saved
                log.warning("task %s: its snapshot is not saved: %s", s.task_id, exc)
        if rows:
            await self._run(_upsert, rows)

    async def delete(self, task_ids: Iterable[str]) -> None:
        rows = [(task_id,) for task_id in task_ids]
        if rows:
            await self._run(_delete, rows)

    async def close(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            await asyncio.get_running_loop().run_in_executor(thread, self._close)
            thread.shutdown()

    async def _run(self, work: Callable[..., T], *args: Any) -> T:
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="a2a-task-store")
        # A cancelled caller leaves the call running: the next one waits for it.
        return await asyncio.get_running_loop().run_in_executor(
            self._thread, self._call, work, *args
        )

    def _close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def _call(self, work: Callable[..., T], *args: Any) -> T:
        """In the store's thread: open the file on first use (again when it is no
        longer the file at ``path``), then do ``work``."""
        if self._connection is not None and _identity(self.path) != self._opened:
            log.warning("task store %s was deleted or replaced: making it again", self.path)
            self._close()
            self._lost = True
        if self._connection is None:
            self._connection = open_sqlite(self.path)
            self._opened = _identity(self.path)
        if self._lost:
            self._lost = False
            raise StoreLost(f"task store {self.path} was deleted or replaced")
        with self._connection:  # one transaction
            return work(self._connection, *args)


def _identity(path: Path) -> tuple[int, int] | None:
    """The (device, inode) of the file at ``path``; None when there is none."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def open_sqlite(path: Path) -> sqlite3.Connection:
    """The task store's SQLite file at ``path``, made if missing (its directory must
    exist: a mistyped path is refused, not made), with the tasks table."""
    if not path.parent.is_dir():
        raise FileNotFoundError(f"no such directory: {path.parent}")
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.execute(
            "CREATE TABLE IF NOT EXISTS tasks (task_id TEXT PRIMARY KEY, "
            "log_partition INTEGER NOT NULL, log_offset INTEGER NOT NULL, "
            "record BLOB NOT NULL)"
        )
        # A write that changes nothing: a file it may only read fails here, not at each save.
        connection.execute("DELETE FROM tasks WHERE 0")
        connection.commit()
    except BaseException:
        connection.close()
        raise
    return connection


def check_task_store(spec: str | None) -> None:
    """Open the SQLite file ``spec`` names, if it names one, so that a store that
    cannot be used (no such directory, not a database, not writable) fails before a
    gateway serves, not in its start-up; ValueError saying why."""
    kind, path = parse_task_store(spec)
    if kind != "sqlite":
        return
    assert path is not None
    try:
        open_sqlite(Path(path)).close()
    except (sqlite3.Error, OSError) as exc:
        raise ValueError(str(exc)) from None


def _select(connection: sqlite3.Connection) -> list[tuple[str, int, int, bytes]]:
    # An upsert keeps its row's rowid: the order is the tasks' first save.
    cursor = connection.execute(
        "SELECT task_id, log_partition, log_offset, record FROM tasks ORDER BY rowid"
    )
    return cursor.fetchall()


def _upsert(connection: sqlite3.Connection, rows: list[tuple[str, int, int, bytes]]) -> None:
    connection.executemany(
        "INSERT INTO tasks (task_id, log_partition, log_offset, record) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (task_id) DO UPDATE SET log_partition = excluded.log_partition, "
        "log_offset = excluded.log_offset, record = excluded.record",
        rows,
    )


def _delete(connection: sqlite3.Connection, rows: list[tuple[str]]) -> None:
    connection.executemany("DELETE FROM tasks WHERE task_id = ?", rows)


class KafkaStateTopic(TaskStore):
    """Snapshots on a compacted topic, keyed by task id (the newest per task stays).

    A snapshot over the broker's record size (a task holding close to
    ``max_body_bytes`` of answer, plus its history) is not saved: a warning says so.
    A forgotten task gets a ``deleted`` marker (what a reader of the topic sees
    after the snapshots before it) and then a tombstone, so compaction removes the
    key altogether in time. The topic is read to its end at each load.
    """

    def __init__(self, transport: Transport, topic: str, source: str) -> None:
        self.transport = transport
        self.topic = topic
        self.source = source
        transport.declare_compacted(topic)

    async def load(self) -> list[Snapshot]:
        latest: dict[str, Snapshot | None] = {}
        position = None
        while True:
            batch = await self.transport.read(self.topic, limit=_PAGE, position=position)
            if not batch.events:
                return [snapshot for snapshot in latest.values() if snapshot is not None]
            position = batch.position
            for event in batch.events:
                data = event.get_data()
                if isinstance(data, dict) and data.get("deleted") is True:
                    latest.pop(str(data.get("taskId")), None)
                    continue
                try:
                    snapshot = Snapshot.from_json(data)
                except ValueError:
                    continue  # not ours: the topic is the bus's, anyone may write to it
                latest.pop(snapshot.task_id, None)  # the order is each task's last save
                latest[snapshot.task_id] = snapshot

    async def save(self, snapshot: Snapshot) -> None:
        try:
            await self._publish(snapshot.task_id, snapshot.to_json())
        except (RecordTooLarge, TypeError) as exc:  # too large, or no JSON: no use retrying
            log.warning("task %s: its snapshot is not saved: %s", snapshot.task_id, exc)

    async def save_many(self, snapshots: Sequence[Snapshot]) -> None:
        await asyncio.gather(*(self.save(snapshot) for snapshot in snapshots))

    async def delete(self, task_ids: Iterable[str]) -> None:
        for task_id in task_ids:
            await self._publish(task_id, {"taskId": task_id, "deleted": True})
            await self.transport.publish_raw(self.topic, None, key=task_id.encode())

    async def _publish(self, task_id: str, data: dict[str, Any]) -> None:
        attributes = {
            "source": self.source,
            "type": STATE_TYPE,
            "datacontenttype": "application/json",
        }
        await self.transport.publish(self.topic, new_event(attributes, data), key=task_id.encode())


def state_topic(topics: Topics) -> str:
    """The compacted topic of the tasks' latest states."""
    return f"{topics.tasks}.state"


def open_task_store(
    spec: str | None, transport: Transport, topics: Topics, source: str
) -> TaskStore | None:
    """The store ``spec`` names (see ``GatewaySettings.a2a_task_store``); None: none.
    Unset: the state topic on a transport with a broker, none in memory."""
    kind, path = parse_task_store(spec)
    if kind == "auto":
        kind = "memory" if transport.in_process else "kafka"
    if kind == "sqlite":
        assert path is not None
        return SqliteTaskStore(path)
    if kind == "kafka":
        return KafkaStateTopic(transport, state_topic(topics), source)
    return None
