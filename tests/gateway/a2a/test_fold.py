"""The fold of a task's log records (pure): the updates each record makes, their
numbers, and what a task ignores (late answers, a second end, an earlier turn)."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest

from a2a_bus.gateway.a2a.fold import TaskFold
from a2a_bus.gateway.a2a.model import Part, TaskState
from a2a_bus.gateway.a2a.push import PushConfig
from a2a_bus.gateway.a2a.task_log import Entry, EntryKind
from a2a_bus.gateway.a2a.updates import ArtifactChunk, StatusChanged, Update
from a2a_bus.protocol import ErrorCode, new_id

TASK = "t-1"
#: The random part of this process's ids (``new_id``).
PREFIX = new_id().rsplit("-", 1)[0]


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


def test_the_task_at_a_version_holds_exactly_the_updates_up_to_it() -> None:
    """A subscriber gets the task as it is, then the updates after its version: the
    chunk held back (not sent yet) is not on the task yet, so none comes twice."""
    fold = TaskFold(submitted(), 1 << 20, now=0.0)
    entries = [
        agent(EntryKind.STARTED),
        *(chunk(seq, word) for seq, word in enumerate(["a", "b", "c"])),
        agent(EntryKind.END, {"result": {"chunks": 3}}),
    ]
    seen: list[tuple[int, list[str]]] = []
    updates = []
    for entry in entries:
        updates += fold.apply(entry, now=1.0)
        seen.append((fold.version, [str(p.value) for a in fold.task.artifacts for p in a.parts]))
    for version, parts in seen:
        answer = "".join(parts)
        for later in updates:
            update = later.update
            if later.version > version and isinstance(update, ArtifactChunk):
                text = "".join(str(p.value) for p in update.artifact.parts)
                answer = answer + text if update.append else text
        assert answer == "abc", (version, parts)


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


def test_of_two_turns_at_once_the_first_is_taken_and_both_are_read() -> None:
    """Two replicas given the same next message both write a turn; the replica
    whose turn the fold took (its request id) sends the request, the other none."""
    fold = TaskFold(submitted(streaming=False), 1 << 20, now=0.0)
    asked = {"error": {"code": ErrorCode.INPUT_REQUIRED, "message": "Input required"}}
    run(fold, agent(EntryKind.STARTED), agent(EntryKind.ANSWER, asked))
    message = {"role": "user", "parts": [["text", "Paris"]], "messageId": "m-2"}
    call = {"method": "count", "streaming": False, "conversational": False}
    turns = [{"message": message, "call": call, "requestId": f"{TASK}.{r}"} for r in "ab"]
    updates = run(fold, *(gateway(EntryKind.TURN, t) for t in turns))
    assert shown(updates) == [TaskState.WORKING]
    assert fold.request_id == f"{TASK}.a" and fold.turns == {f"{TASK}.a", f"{TASK}.b"}
    assert len(fold.task.history) == 2


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


# -- a fold as a record (what a task store keeps) -------------------------------------------


def went_on(fold: TaskFold, entries: list[Entry]) -> list[Any]:
    """The updates ``entries`` make, as JSON as they come, then the fold's record; the
    ids of messages and artifacts (random) as their order of appearance."""
    out: list[Any] = []
    for entry in entries:
        for v in fold.apply(entry, now=2.0):
            u = v.update
            if isinstance(u, StatusChanged):
                out.append((v.version, u.snapshot.record()))
            else:
                out.append((v.version, u.artifact.record(), u.append, u.last_chunk))
    out.append(fold.record())
    labels: dict[str, str] = {}
    text = re.sub(
        PREFIX + r"-\d+",
        lambda m: labels.setdefault(m.group(), f"id-{len(labels)}"),
        orjson.dumps(out).decode(),
    )
    return list(orjson.loads(text))


def restored(fold: TaskFold, max_bytes: int) -> TaskFold:
    """``fold`` through its record, as JSON, as a store gives it back."""
    record = orjson.loads(orjson.dumps(fold.record()))
    again = TaskFold.from_record(record, max_bytes, now=5.0)
    assert again.record() == record
    return again


def a_long_life() -> list[Entry]:
    """Every kind of entry: a stream past the bound, a redelivery, a question, a turn,
    push configs, the end and what comes after it."""
    asked = {"error": {"code": ErrorCode.INPUT_REQUIRED, "message": "Input", "data": "more?"}}
    turn = {
        "message": {"role": "user", "parts": [["text", "yes"]], "messageId": "m-2"},
        "call": {"method": "chat", "streaming": True, "conversational": True},
        "requestId": f"{TASK}.1",
    }
    second = f"{TASK}.1"
    return [
        agent(EntryKind.STARTED, control="a2a.reply.n1"),
        chunk(0, {"type": "token", "text": "ab"}),
        agent(EntryKind.STARTED, redelivered=True, control="a2a.reply.n2"),
        chunk(0, {"type": "token", "text": "abc"}),
        gateway(EntryKind.PUSH_SET, PushConfig(TASK, "p1", "https://example.com/hook").to_dict()),
        chunk(1, {"type": "tool_start", "name": "x"}),
        chunk(2, {"type": "token", "text": "defghij"}),  # past the bound: counted, not kept
        chunk(3, {"type": "token", "text": "k"}),
        agent(EntryKind.END, asked),
        gateway(EntryKind.TURN, turn),
        agent(EntryKind.STARTED, request=second),
        chunk(0, {"type": "token", "text": "xyz"}, request=second),
        gateway(EntryKind.PUSH_DELETED, {"id": "p1"}),
        chunk(1, {"type": "done", "content": "xyz"}, request=second),
        agent(EntryKind.END, {"result": {"chunks": 2}}, request=second),
        gateway(EntryKind.FAILED, {"error": {"code": -32001, "message": "late"}}),
    ]


def test_a_fold_restored_from_its_record_goes_on_as_the_original_would() -> None:
    entries = a_long_life()
    max_bytes = 12
    for cut in range(len(entries) + 1):
        original = TaskFold(submitted(conversational=True), max_bytes, now=0.0)
        for entry in entries[:cut]:
            original.apply(entry, now=1.0)
        copy = restored(original, max_bytes)
        assert copy.last_activity == 5.0
        rest = entries[cut:]
        assert went_on(copy, rest) == went_on(original, rest), f"restored after {cut} entries"
    task = original.task
    assert task.state is TaskState.COMPLETED and task.metadata == {"redelivered": True}
    first, second = task.artifacts
    # The bound was reached in the first turn: the second's text is only counted.
    assert first.parts == [Part.text("abc")] and second.parts == []
    assert first.metadata is not None and first.metadata["omittedParts"] == 3


def test_a_record_of_another_format_is_refused() -> None:
    record = TaskFold(submitted(), 1 << 20, now=0.0).record()
    with pytest.raises(ValueError, match="format"):
        TaskFold.from_record({**record, "format": 99}, 1 << 20, now=0.0)


def test_a_push_config_that_cannot_be_read_is_not_taken() -> None:
    fold = TaskFold(submitted(), 1 << 20, now=0.0)
    config = PushConfig(TASK, "p1", "https://example.com/hook").to_dict()
    fold.apply(gateway(EntryKind.PUSH_SET, config), now=1.0)
    # Anyone may write to the task log: a config no webhook can be sent to is refused.
    for bad in ({**config, "url": 5}, {"id": "p2"}, {**config, "id": "p3", "token": "a\nb"}):
        with pytest.raises(ValueError, match="config"):
            fold.apply(gateway(EntryKind.PUSH_SET, bad), now=1.0)
    assert fold.push == {"p1": config}
    record = fold.record()
    with pytest.raises(ValueError, match="config"):
        TaskFold.from_record({**record, "push": {"p1": {**config, "url": None}}}, 1 << 20, 0.0)


@pytest.mark.parametrize("field", ["version", "nextSeq", "kept", "artifact"])
@pytest.mark.parametrize("value", [2**70, -1, 1.5, True, "1"])
def test_a_record_whose_counts_are_no_counts_is_refused(field: str, value: Any) -> None:
    record = TaskFold(submitted(), 1 << 20, now=0.0).record()
    with pytest.raises(ValueError, match="expected a count"):
        TaskFold.from_record({**record, field: value}, 1 << 20, now=0.0)
