"""The fold of a task's log records (pure): the updates each record makes, their
numbers, and what a task ignores (late answers, a second end, an earlier turn)."""

from __future__ import annotations

from typing import Any

from a2a_bus.gateway.a2a.fold import ArtifactChunk, StatusChanged, TaskFold, Update
from a2a_bus.gateway.a2a.model import Part, TaskState
from a2a_bus.gateway.a2a.task_log import Entry, EntryKind
from a2a_bus.protocol import ErrorCode

TASK = "t-1"


def submitted(*, conversational: bool = False, streaming: bool = True) -> Entry:
    data = {
        "owner": "me",
        "endpoint": "echo",
        "agent": "echo",
        "contextId": "c-1",
        "message": {"role": "user", "parts": [["text", "hi"]], "messageId": "m-1"},
        "call": {"method": "count", "streaming": streaming, "conversational": conversational},
        "requestId": TASK,
        "inactivity": 30.0,
    }
    return Entry(EntryKind.SUBMITTED, TASK, "2026-01-01T00:00:00.000Z", data)


def agent(kind: EntryKind, data: Any = None, *, seq: int | None = None, **more: Any) -> Entry:
    request = more.pop("request", TASK)
    return Entry(kind, TASK, "2026-01-01T00:00:01.000Z", data, request, seq, **more)


def chunk(seq: int, item: Any, request: str = TASK) -> Entry:
    return agent(EntryKind.CHUNK, item, seq=seq, request=request)


def gateway(kind: EntryKind, data: dict[str, Any]) -> Entry:
    return Entry(kind, TASK, "2026-01-01T00:00:02.000Z", data)


def shown(updates: list[Update]) -> list[Any]:
    """Updates as (parts, last) for chunks and the state for status changes."""
    return [
        (u.artifact.parts, u.last_chunk) if isinstance(u, ArtifactChunk) else u.snapshot.state
        for u in updates
    ]


def run(fold: TaskFold, *entries: Entry) -> list[Update]:
    before = fold.version
    versioned = [v for entry in entries for v in fold.apply(entry, now=1.0)]
    assert [v.version for v in versioned] == list(range(before + 1, fold.version + 1))
    return [v.update for v in versioned]


def test_a_chunk_is_held_until_the_next_update_tells_whether_it_was_last() -> None:
    fold = TaskFold(submitted(conversational=True), 1 << 20, now=0.0)
    updates = run(
        fold,
        agent(EntryKind.STARTED, control="a2a.reply.n1"),
        chunk(0, {"type": "token", "text": "a"}),
        chunk(1, {"type": "tool_start", "name": "x"}),  # progress releases the chunk, not last
        chunk(2, {"type": "token", "text": "b"}),
        agent(EntryKind.END, {"result": {"chunks": 3}}),
    )
    assert shown(updates) == [
        TaskState.WORKING,
        ([Part.text("a")], False),
        TaskState.WORKING,
        ([Part.text("b")], True),
        TaskState.COMPLETED,
    ]
    assert fold.control == "a2a.reply.n1"
    assert fold.task.artifacts[0].parts == [Part.text("ab")]


def test_after_the_end_nothing_changes_the_task() -> None:
    fold = TaskFold(submitted(streaming=False), 1 << 20, now=0.0)
    run(fold, agent(EntryKind.ANSWER, {"result": "done"}))
    assert fold.task.state is TaskState.COMPLETED
    late = run(
        fold,
        gateway(EntryKind.FAILED, {"error": {"code": -32001, "message": "Timeout"}}),
        gateway(EntryKind.CANCELED, {}),
        agent(EntryKind.ANSWER, {"result": "again"}),
    )
    assert late == [] and fold.task.state is TaskState.COMPLETED
    assert fold.task.artifacts[0].parts == [Part.text("done")]


def test_a_redelivered_start_begins_the_answer_again() -> None:
    fold = TaskFold(submitted(), 1 << 20, now=0.0)
    run(fold, agent(EntryKind.STARTED), chunk(0, 1), chunk(1, 2))
    updates = run(
        fold,
        agent(EntryKind.STARTED, redelivered=True),  # another replica took the request over
        chunk(0, 1),
        chunk(0, 1),  # a repeat: dropped
        agent(EntryKind.END, {"result": {"chunks": 1}}),
    )
    assert shown(updates) == [TaskState.WORKING, ([Part.data(1)], True), TaskState.COMPLETED]
    assert isinstance(updates[1], ArtifactChunk) and updates[1].append is False
    assert [a.parts for a in fold.task.artifacts] == [[Part.data(1)]]
    assert fold.task.metadata == {"redelivered": True}


def test_input_required_waits_for_the_next_turn_and_ignores_the_earlier_one() -> None:
    fold = TaskFold(submitted(streaming=False), 1 << 20, now=0.0)
    asked = {
        "error": {"code": ErrorCode.INPUT_REQUIRED, "message": "Input required", "data": "city?"}
    }
    run(fold, agent(EntryKind.STARTED), agent(EntryKind.ANSWER, asked))
    assert fold.task.state is TaskState.INPUT_REQUIRED and not fold.active
    assert fold.task.message is not None and fold.task.message.parts == [Part.text("city?")]
    turn = {
        "message": {"role": "user", "parts": [["text", "Paris"]], "messageId": "m-2"},
        "call": {"method": "count", "streaming": False, "conversational": False},
        "requestId": f"{TASK}.1",
    }
    updates = run(
        fold,
        gateway(EntryKind.TURN, turn),
        agent(EntryKind.ANSWER, {"result": "stale"}),  # the first turn's: ignored
        agent(EntryKind.ANSWER, {"result": "sunny"}, request=f"{TASK}.1"),
    )
    assert shown(updates) == [TaskState.WORKING, ([Part.text("sunny")], True), TaskState.COMPLETED]
    assert [m.parts for m in fold.task.history] == [[Part.text("hi")], [Part.text("Paris")]]


def test_a_failure_and_a_progress_note_become_status_messages() -> None:
    fold = TaskFold(submitted(streaming=False), 1 << 20, now=0.0)
    updates = run(
        fold,
        agent(EntryKind.PROGRESS, "half way"),
        gateway(
            EntryKind.FAILED, {"error": {"code": -32001, "message": "Timeout", "data": "silent"}}
        ),
    )
    assert shown(updates) == [TaskState.WORKING, TaskState.FAILED]
    progress = updates[0]
    assert isinstance(progress, StatusChanged) and progress.snapshot.message is not None
    assert progress.snapshot.message.parts == [Part.text("half way")]
    assert fold.task.message is not None
    assert fold.task.message.parts[0] == Part.text("Timeout: silent (error -32001)")
