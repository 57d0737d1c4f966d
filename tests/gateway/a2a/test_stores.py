"""Where tasks live beyond the task log: a SQLite file for a single node (its tasks
outlive a restart, the in-memory log's loss included) and a compacted state topic
on Kafka (a new view finds a task whose log records are gone). A restored view
folds only the log records after each snapshot, and a task that was running when
its node stopped fails after its inactivity limit instead of staying ``working``.
A store that fails gets the changes once it works again; what cannot be read from
it is left out with a warning."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import sqlite3
import subprocess
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_bus.bus import Bus
from a2a_bus.core.routing import Topics
from a2a_bus.core.task_marks import PROGRESS, mark_event
from a2a_bus.gateway import GatewaySettings, create_app
from a2a_bus.gateway.a2a import TaskView, saver
from a2a_bus.gateway.a2a.model import TaskState
from a2a_bus.gateway.a2a.stores import (
    KafkaStateTopic,
    Snapshot,
    SqliteTaskStore,
    TaskStore,
    check_task_store,
    open_task_store,
    state_topic,
)
from a2a_bus.gateway.a2a.task_log import EntryKind
from a2a_bus.hosting.agent import Agent, method
from a2a_bus.protocol import Adaptor, ext
from tests.transport.kafka.test_transport import cleanup_policy

from .test_a2a import BASE, WAIT, submitted_record, within
from .test_tasks import call, rpc

pytestmark = pytest.mark.timeout(120)

#: Lets ``Busy.work`` return; a test sets it once its gateway stopped.
LET_GO = threading.Event()
#: The inactivity limit of the tasks of the restart test, in seconds.
INACTIVITY = 1.0


class Busy(Agent):
    """Works, saying so often, until ``LET_GO`` (bounded: never hangs a test)."""

    agent_id = "busy"

    @method
    def work(self) -> str:
        deadline = time.monotonic() + WAIT
        while not LET_GO.is_set() and time.monotonic() < deadline:
            self.progress("still here")
            LET_GO.wait(INACTIVITY / 10)
        return "done"

    @method
    def add(self, a: int, b: int) -> int:
        return a + b


@contextlib.asynccontextmanager
async def gateway(bus: Bus, settings: GatewaySettings) -> AsyncIterator[httpx.AsyncClient]:
    """The gateway app of ``bus``, started and stopped as a server does it."""
    app = create_app(bus, settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE, timeout=WAIT) as http:
            yield http


async def get_task(http: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    body = (await rpc(http, "busy", "GetTask", {"id": task_id})).json()
    assert "result" in body, body
    return dict(body["result"])


async def left(http: httpx.AsyncClient, task_id: str, state: str) -> dict[str, Any]:
    """The task once it is no longer in ``state``."""

    async def poll() -> dict[str, Any]:
        while (task := await get_task(http, task_id))["status"]["state"] == state:
            await asyncio.sleep(0.05)
        return task

    return await within(poll())


async def test_a_sqlite_store_keeps_the_tasks_across_a_restart(tmp_path: Path) -> None:
    settings = GatewaySettings(
        request_timeout=WAIT,
        a2a_task_inactivity=INACTIVITY,
        a2a_task_store=f"sqlite://{tmp_path}/tasks.db",
    )
    LET_GO.clear()
    async with Bus.memory() as bus:
        await bus.aspawn(Busy)
        async with gateway(bus, settings) as http:
            answer = (await rpc(http, "busy", "SendMessage", call("add", a=2, b=3))).json()
            assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", answer
            done = await get_task(http, answer["result"]["task"]["id"])
            answer = (await rpc(http, "busy", "SendMessage", call("work", blocking=False))).json()
            running = answer["result"]["task"]["id"]
            working = await left(http, running, "TASK_STATE_SUBMITTED")
            assert working["status"]["state"] == "TASK_STATE_WORKING", working
        LET_GO.set()  # its answer goes to a log nobody reads any more
    # A new process: a new in-memory log, the same file, the agent again (not its run).
    async with Bus.memory() as bus, gateway(bus, settings) as http:
        await bus.aspawn(Busy)
        assert await get_task(http, done["id"]) == done
        listed = (await rpc(http, "busy", "ListTasks", {})).json()["result"]
        assert {t["id"] for t in listed["tasks"]} == {done["id"], running}
        # Nothing runs it any more: it fails once silent past its limit, saying why.
        task = await left(http, running, "TASK_STATE_WORKING")
        assert task["status"]["state"] == "TASK_STATE_FAILED", task
        reason = str(task["status"]["message"])
        assert "sent nothing for this task for over 1 s" in reason, reason


# -- the view and its store ----------------------------------------------------------------


def progress(bus: Bus, task_id: str, request_id: str, note: str) -> Any:
    """An agent's progress mark about ``task_id`` on the task log."""
    adaptor = Adaptor()
    request = adaptor.from_json({"jsonrpc": "2.0", "method": "work", "id": request_id})[0]
    attributes = request.get_attributes()
    attributes["id"] = request_id
    attributes[ext.TASK_ID] = attributes[ext.PARTITION_KEY] = task_id
    event = mark_event(adaptor, request, PROGRESS, note, source="busy")
    return bus.transport.publish(bus.topics.tasks, event, key=task_id.encode())


def view_of(bus: Bus, store: TaskStore, *, saving: bool = True) -> TaskView:
    return TaskView(
        bus.transport,
        bus.topics,
        uuid.uuid4().hex[:8],
        "test",
        max_bytes=1 << 20,
        max_tasks=100,
        store=store,
        saving=saving,
    )


async def a_working_task(bus: Bus, view: TaskView) -> str:
    """A task with two progress notes (version 2); its id."""
    task_id = uuid.uuid4().hex
    record = submitted_record("busy", "me", "busy")
    await view.write(EntryKind.SUBMITTED, task_id, record)
    for note in ("one", "two"):
        await progress(bus, task_id, record["requestId"], note)
    await within(view.sync())
    fold = view.get(task_id)
    assert fold is not None and fold.version == 2
    return task_id


async def test_a_view_started_again_folds_no_record_twice(bus: Bus, tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")
    first = view_of(bus, store)
    await first.start()
    try:
        task_id = await a_working_task(bus, first)
    finally:
        await first.stop()
    [saved] = await store.load()
    assert saved == first.snapshot(task_id)
    # A snapshot of one record: none once the task has a later one (its last progress).
    assert first.snapshot(task_id, at=(saved.partition, saved.offset)) == saved
    assert first.snapshot(task_id, at=(saved.partition, saved.offset - 1)) is None
    again = view_of(bus, store)
    await again.start()
    try:
        await within(again.sync())  # the whole log read again: only its records after...
        fold = again.get(task_id)
        assert fold is not None and fold.version == 2  # ...the snapshot count
        assert fold.task.message is not None and fold.task.message.parts[0].value == "two"
        assert again.updates.after(task_id, 0) is None  # not kept: GetTask tells the rest
        record = (await store.load())[0].record
        await again.write(EntryKind.CANCELED, task_id, {})
        await within(again.sync())
        assert fold.version == 3 and fold.task.state is TaskState.CANCELED
    finally:
        await again.stop()
    [saved] = await store.load()
    assert saved.record != record and saved.record["task"]["state"] == "canceled"


async def test_a_snapshot_past_the_logs_end_is_of_another_log(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")
    async with Bus.memory() as bus:
        view = view_of(bus, store)
        await view.start()
        try:
            for _ in range(3):
                await a_working_task(bus, view)  # the log grows past the next task's start
            task_id = await a_working_task(bus, view)
        finally:
            await view.stop()
    async with Bus.memory() as bus:  # a new log: its offsets start again at 0
        view = view_of(bus, store)
        await view.start()
        try:
            fold = view.get(task_id)
            assert fold is not None and fold.version == 2
            await view.write(EntryKind.CANCELED, task_id, {"reason": "late"})
            await within(view.sync())
            assert fold.task.state is TaskState.CANCELED and fold.version == 3
            assert len(view.owned("me")) == 4
        finally:
            await view.stop()


async def test_a_forgotten_task_leaves_the_store(bus: Bus, tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")
    view = view_of(bus, store)
    view.max_tasks = 1
    await view.start()
    try:
        first = await a_working_task(bus, view)
        second = await a_working_task(bus, view)
        assert view.get(first) is None
    finally:
        await view.stop()
    assert [s.task_id for s in await store.load()] == [second]


def test_the_store_is_a_gateway_setting(tmp_path: Path) -> None:
    environ = {"A2A_GATEWAY_A2A_TASK_STORE": f"sqlite://{tmp_path}/t.db"}
    assert GatewaySettings.from_env(environ).a2a_task_store == f"sqlite://{tmp_path}/t.db"
    for bad in ("redis", "sqlite://", "sqlite:///dir/"):
        with pytest.raises(ValueError, match="a2a_task_store must be"):
            GatewaySettings(a2a_task_store=bad)
    memory = Bus.memory()
    topics = memory.topics
    assert open_task_store(None, memory.transport, topics, "s") is None
    assert open_task_store("memory", memory.transport, topics, "s") is None
    store = open_task_store(f"sqlite://{tmp_path}/t.db", memory.transport, topics, "s")
    assert isinstance(store, SqliteTaskStore) and store.path == tmp_path / "t.db"
    state = open_task_store("kafka", memory.transport, topics, "s")
    assert isinstance(state, KafkaStateTopic) and state.topic == f"{topics.tasks}.state"


async def test_a_sqlite_store_in_a_missing_directory_is_refused_not_made(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "tasks.db"
    with pytest.raises(ValueError, match=f"^no such directory: {tmp_path}/no/such$"):
        check_task_store(f"sqlite://{missing}")
    store = SqliteTaskStore(missing)
    try:
        with pytest.raises(FileNotFoundError, match="no such directory"):
            await store.load()
    finally:
        await store.close()
    assert not (tmp_path / "no").exists()


def test_a_file_that_is_no_database_is_refused_when_checked(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a database, but long enough to have a header's size: " * 4)
    with pytest.raises(ValueError, match=r"^file is not a database$"):
        check_task_store(f"sqlite://{text}")
    check_task_store(f"sqlite://{tmp_path}/tasks.db")  # a new file in a directory that exists
    assert (tmp_path / "tasks.db").exists()
    for other in (None, "memory", "kafka"):
        check_task_store(other)  # nothing to open


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` made read-only, also for root (immutable) where that can be done."""
    path.chmod(0o444)
    immutable = False
    try:
        if os.access(path, os.W_OK):  # root: the mode does not stop it
            chattr = shutil.which("chattr")
            immutable = chattr is not None and subprocess.run([chattr, "+i", path]).returncode == 0
            if not immutable:
                pytest.skip("no way to make a file read-only for this user")
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", path], check=True)
        path.chmod(0o644)


def test_a_store_file_that_cannot_be_written_is_refused_when_checked(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    check_task_store(f"sqlite://{path}")
    refused = pytest.raises(ValueError, match=r"^attempt to write a readonly database$")
    with read_only(path), refused:
        check_task_store(f"sqlite://{path}")


# -- a store that fails, or holds what cannot be read --------------------------------------


async def stored(path: Path) -> dict[str, str]:
    """The state of each task in the SQLite file at ``path``, read by a store of its own."""
    if not path.exists():
        return {}
    reader = SqliteTaskStore(path)
    try:
        return {s.task_id: s.record["task"]["state"] for s in await reader.load()}
    finally:
        await reader.close()


async def until_stored(path: Path, expected: dict[str, str]) -> None:
    async def poll() -> None:
        while await stored(path) != expected:
            await asyncio.sleep(0.05)

    await within(poll())


async def test_a_store_file_deleted_while_in_use_is_made_again_with_every_task(
    bus: Bus, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "tasks.db"
    view = view_of(bus, SqliteTaskStore(path))
    await view.start()
    try:
        first = await a_working_task(bus, view)
        await until_stored(path, {first: "working"})
        for file in tmp_path.glob("tasks.db*"):
            file.unlink()
        second = await a_working_task(bus, view)  # a change of the second task alone
        await until_stored(path, {first: "working", second: "working"})
    finally:
        await view.stop()
    assert f"task store {path} was deleted or replaced" in caplog.text


async def test_changes_wait_for_a_failing_store_until_it_works_again(
    bus: Bus, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=saver.__name__)
    directory = tmp_path / "state"
    directory.mkdir()
    path = directory / "tasks.db"
    view = view_of(bus, SqliteTaskStore(path))
    await view.start()
    try:
        first = await a_working_task(bus, view)
        await until_stored(path, {first: "working"})
        shutil.rmtree(directory)  # no file, and nowhere to make one
        await view.write(EntryKind.CANCELED, first, {})  # its last change
        second = await a_working_task(bus, view)

        async def failed(times: int) -> None:
            while sum(r.name == saver.__name__ for r in caplog.records) < times:
                await asyncio.sleep(0.05)

        await within(failed(5))  # as many tries as a change once got before it was dropped
        directory.mkdir()
        await until_stored(path, {first: "canceled", second: "working"})
    finally:
        await view.stop()


async def test_stored_tasks_that_cannot_be_read_are_left_out_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "tasks.db"
    settings = GatewaySettings(request_timeout=WAIT, a2a_task_store=f"sqlite://{path}")
    async with Bus.memory() as bus:
        await bus.aspawn(Busy)
        async with gateway(bus, settings) as http:
            answer = (await rpc(http, "busy", "SendMessage", call("add", a=2, b=3))).json()
            done = await get_task(http, answer["result"]["task"]["id"])
    reader = SqliteTaskStore(path)
    [saved] = await reader.load()
    await reader.close()

    def like(task_id: str, task_changes: dict[str, Any] | None = None, **changes: Any) -> bytes:
        """The saved task's record under another id, with ``changes`` (``task_changes``
        to its task)."""
        task = {**saved.record["task"], "id": task_id, **(task_changes or {})}
        return json.dumps({**saved.record, "task": task, **changes}).encode()

    # Rows written by another hand (the stored JSON stays readable by any tool).
    rows = [
        ("not-json", 0, 0, b"{not json"),
        ("a-list", 0, 0, b"[]"),
        ("a-position-in-words", "first", 0, like("a-position-in-words")),
        ("a-task-that-is-a-list", 0, 0, like("a-task-that-is-a-list", task=[])),
        ("a-count-past-64-bits", 0, 0, like("a-count-past-64-bits", version=2**70)),
        ("a-push-config-without-url", 0, 0, like("a-push-config-without-url", push={"p": {}})),
        # ListTasks filters by it: read as the caller's, it would answer -32602 about it.
        ("a-timestamp-in-words", 0, 0, like("a-timestamp-in-words", {"timestamp": "yesterday"})),
    ]
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.executemany("INSERT INTO tasks VALUES (?, ?, ?, ?)", rows)
    async with Bus.memory() as bus, gateway(bus, settings) as http:
        await bus.aspawn(Busy)
        assert await get_task(http, done["id"]) == done
        for task_id, *_ in rows:
            body = (await rpc(http, "busy", "GetTask", {"id": task_id})).json()
            assert body["error"]["code"] == -32001, body
        since = {"statusTimestampAfter": "2000-01-01T00:00:00Z"}
        listed = (await rpc(http, "busy", "ListTasks", since)).json()
        assert [task["id"] for task in listed["result"]["tasks"]] == [done["id"]], listed
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    for task_id, *_ in rows:
        assert any(task_id in message for message in warned), (task_id, warned)


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("kafka", marks=pytest.mark.kafka)])
async def test_a_snapshot_that_cannot_be_written_does_not_hold_up_the_others(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    unwritable = Snapshot("huge", {"n": 2**70}, 0, 0)  # no JSON integer holds it
    fine = Snapshot("fine", {"n": 1}, 0, 1)
    if kind == "sqlite":
        store: TaskStore = SqliteTaskStore(tmp_path / "tasks.db")
        await store.save_many([unwritable, fine])
        assert await store.load() == [fine]
        await store.close()
        return
    prefix = f"t{uuid.uuid4().hex[:10]}"
    async with kafka_bus(request.getfixturevalue("kafka_bootstrap"), prefix) as bus:
        store = KafkaStateTopic(bus.transport, state_topic(bus.topics), "test")
        await store.save_many([unwritable, fine])
        assert await store.load() == [fine]


# -- Kafka: the compacted state topic ------------------------------------------------------


@contextlib.asynccontextmanager
async def kafka_bus(bootstrap: str, prefix: str) -> AsyncIterator[Bus]:
    bus = Bus.kafka(bootstrap, bus_options={"prefix": prefix}, metadata_max_age_ms=1000)
    async with bus:
        yield bus


def test_an_event_of_the_state_topic_that_is_no_snapshot_is_refused() -> None:
    fine = {"taskId": "t", "partition": 0, "offset": 3, "record": {}}
    assert Snapshot.from_json(fine) == Snapshot("t", {}, 0, 3)
    # Anyone may write to the topic: what does not fit is left out at load.
    for bad in (
        [],
        {**fine, "taskId": 5},
        {**fine, "partition": True},
        {**fine, "offset": "3"},
        {**fine, "offset": 3.0},
        {**fine, "offset": -1},
        {**fine, "offset": 2**70},
        {**fine, "record": []},
    ):
        with pytest.raises(ValueError, match=r"^not a task snapshot"):
            Snapshot.from_json(bad)


@pytest.mark.kafka
async def test_the_state_topic_outlives_the_task_log(kafka_bootstrap: str) -> None:
    prefix = f"t{uuid.uuid4().hex[:10]}"
    topic = state_topic(Topics(prefix))
    async with kafka_bus(kafka_bootstrap, prefix) as bus:
        # As a notifier does it: the view saves nothing, the snapshot is saved after.
        store = KafkaStateTopic(bus.transport, topic, "test")
        view = view_of(bus, store, saving=False)
        await view.start()
        try:
            task_id = await a_working_task(bus, view)
            snapshot = view.snapshot(task_id)
            assert snapshot is not None
            await store.save(snapshot)
            gone = await a_working_task(bus, view)
            doomed = view.snapshot(gone)
            assert doomed is not None
            await store.save(doomed)
            await store.delete([gone])
        finally:
            await view.stop()
    assert await cleanup_policy(kafka_bootstrap, topic) == "compact"
    # Another log (its records of the task are not there), the same state topic.
    async with kafka_bus(kafka_bootstrap, f"t{uuid.uuid4().hex[:10]}") as bus:
        store = KafkaStateTopic(bus.transport, topic, "test")
        assert [s.task_id for s in await store.load()] == [task_id]
        view = view_of(bus, store)  # this one saves what changes
        await view.start()
        try:
            fold = view.get(task_id)
            assert fold is not None and fold.version == 2 and fold.task.state is TaskState.WORKING
            assert view.get(gone) is None
            await view.write(EntryKind.CANCELED, task_id, {})
            await within(view.sync())
            assert fold.task.state is TaskState.CANCELED
        finally:
            await view.stop()
        [saved] = await store.load()
        assert saved.record["task"]["state"] == "canceled"
