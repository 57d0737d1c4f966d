"""One task's state, made of its task-log entries (:mod:`.task_log`) in order.

The fold is pure and deterministic: every gateway replica reads the same records
in the same order (one task, one partition), so every replica makes the same
task and numbers its updates the same. An update's number (its version) is what
a client resuming a stream names (SSE ``id``, ``Last-Event-ID``).

* A streaming answer's chunks go onto one artifact per turn; whether a chunk is
  its artifact's last is only known when the next update comes or the answer
  ends, so the newest chunk is held back until then (one chunk, not the stream).
  A status update releases the held chunk as not last, so progress is neither
  delayed nor reordered. A held chunk goes onto the stored artifact when it is
  released: the task as it is at a version holds exactly the updates up to it,
  so a subscriber given the task and then the updates after it gets no chunk twice.
* What the task keeps of an answer is bounded (:mod:`.budget`): at most
  ``max_bytes`` of JSON; from the first chunk that does not fit on, the stored
  artifact stops growing and its metadata says so. A subscriber still gets every
  chunk.
* A ``started`` mark that is a redelivery, after another start of the same turn,
  begins the turn's answer again: the artifact so far is dropped (the next chunk
  replaces it: ``append`` false) and the task's metadata says ``redelivered``.
* The caller's next message (a ``turn``) is the next call, whether the task waits
  for input or its agent still works on the turn before (which it supersedes: the
  earlier turn's answers no longer count). The same message twice (by its id) is
  one turn: the first record of it is taken.
* Once the task is terminal, nothing but push-notification configs changes it:
  a late answer, a second ``failed`` from another replica's watchdog, a cancel
  that came too late.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from a2a_bus.gateway.a2a.budget import AnswerBudget
from a2a_bus.gateway.a2a.calls import (
    CallPlan,
    answer_parts,
    chunk_parts,
    error_parts,
    is_progress,
)
from a2a_bus.gateway.a2a.model import Artifact, Message, Part, Task, TaskState
from a2a_bus.gateway.a2a.push import PushConfig
from a2a_bus.gateway.a2a.task_log import Entry, EntryKind
from a2a_bus.gateway.a2a.updates import ArtifactChunk, StatusChanged, Update, Versioned
from a2a_bus.protocol import ErrorCode

#: The version of :meth:`TaskFold.record`'s shape.
RECORD_FORMAT = 1
#: What reading a record of the wrong shape raises: the task log and the stores are
#: shared, so a record may be anyone's (a list where an object belongs, a missing key).
UNREADABLE = (AttributeError, IndexError, KeyError, TypeError, ValueError)


class TaskFold:
    """A task and what its next entries need to know."""

    def __init__(self, submitted: Entry, max_bytes: int, now: float) -> None:
        data = submitted.data
        message = Message.from_record(data["message"])
        self.task = Task(str(data["contextId"]), [message], id=submitted.task_id)
        self.task.set_state(TaskState.SUBMITTED, timestamp=submitted.time)
        #: The identity of the token that created it: other tokens do not see it.
        self.owner = str(data["owner"])
        #: The endpoint's agent (None for the gateway's own endpoint).
        self.endpoint: str | None = data.get("endpoint")
        #: The agent that runs it.
        self.agent = str(data["agent"])
        self.message_id = message.message_id
        self.call = CallPlan.of(data["call"])
        #: The bus request of the current turn: only its answers count.
        self.request_id = str(data["requestId"])
        #: The request ids of every ``turn`` record read, taken or not (for the sends
        #: of this process waiting for theirs: not part of the record).
        self.turns: set[str] = set()
        #: Seconds the agent may stay silent while the task is submitted or working.
        self.inactivity = float(data["inactivity"])
        self.version = 0
        #: The node running the current turn's handler (where a cancel goes).
        self.control: str | None = None
        #: When this replica last saw the agent alive for it (its own clock).
        self.last_activity = now
        #: Push-notification configs by id.
        self.push: dict[str, dict[str, Any]] = {}
        self._started = False
        self._next_seq = 0
        self._artifact: Artifact | None = None
        self._held: ArtifactChunk | None = None
        self._budget = AnswerBudget(max_bytes)

    # -- as a record (a task store's snapshot) ----------------------------------------

    def record(self) -> dict[str, Any]:
        """The whole state as JSON: :meth:`from_record` makes the same fold of it, one
        that takes the task's next entries as this one would."""
        artifacts = self.task.artifacts
        held = self._held
        omitted = self._budget.omitted
        return {
            "format": RECORD_FORMAT,
            "task": self.task.record(),
            "owner": self.owner,
            "endpoint": self.endpoint,
            "agent": self.agent,
            "call": self.call.record(),
            "requestId": self.request_id,
            "inactivity": self.inactivity,
            "version": self.version,
            "control": self.control,
            "push": self.push,
            "started": self._started,
            "nextSeq": self._next_seq,
            # The current turn's artifact and the truncated one, by their place in the task.
            "artifact": _index(artifacts, self._artifact),
            "held": None
            if held is None
            else {
                "artifact": held.artifact.record(),
                "append": held.append,
                "lastChunk": held.last_chunk,
            },
            "kept": self._budget.kept,
            "omitted": None
            if omitted is None
            else {
                "artifact": next(
                    (i for i, a in enumerate(artifacts) if a.metadata is omitted), None
                ),
                "counts": omitted,
            },
        }

    @classmethod
    def from_record(cls, record: dict[str, Any], max_bytes: int, now: float) -> TaskFold:
        """The fold :meth:`record` describes; the agent counts as seen alive ``now``
        (so the watchdog gives a restored running task its whole inactivity limit).
        Raises one of :data:`UNREADABLE` for a record it cannot read."""
        if record.get("format") != RECORD_FORMAT:
            raise ValueError(f"unknown task record format {record.get('format')!r}")
        task = Task.from_record(record["task"])
        submitted = {
            "contextId": task.context_id,
            "message": task.history[0].record(),
            "owner": record["owner"],
            "endpoint": record["endpoint"],
            "agent": record["agent"],
            "call": record["call"],
            "requestId": record["requestId"],
            "inactivity": record["inactivity"],
        }
        fold = cls(Entry(EntryKind.SUBMITTED, task.id, task.timestamp, submitted), max_bytes, now)
        fold.task = task
        fold.version = _count(record["version"])
        control = record["control"]
        if control is not None and not isinstance(control, str):
            raise ValueError(f"expected the node running the task, not {control!r}")
        fold.control = control
        # Checked here: a config that cannot be read would fail each notification.
        fold.push = {PushConfig.from_dict(c).config_id: c for c in record["push"].values()}
        fold._started = bool(record["started"])
        fold._next_seq = _count(record["nextSeq"])
        artifact = record["artifact"]
        fold._artifact = None if artifact is None else task.artifacts[_count(artifact)]
        held = record["held"]
        if held is not None:
            chunk = Artifact.from_record(held["artifact"])
            fold._held = ArtifactChunk(chunk, bool(held["append"]), bool(held["lastChunk"]))
            if fold._artifact is None:  # the turn's first chunk: not on the task yet
                fold._artifact = Artifact([], chunk.name, chunk.artifact_id)
        fold._budget.kept = _count(record["kept"])
        omitted = record["omitted"]
        if omitted is not None:
            where = omitted["artifact"]
            counts = dict(omitted["counts"])
            if where is not None:
                task.artifacts[_count(where)].metadata = counts
            fold._budget.omitted = counts
        return fold

    @property
    def active(self) -> bool:
        """Submitted or working: an agent is expected to answer (the watchdog's concern)."""
        return self.task.state in (TaskState.SUBMITTED, TaskState.WORKING)

    def apply(self, entry: Entry, now: float) -> list[Versioned]:
        """Take the next entry of the task's log; the updates it makes, numbered."""
        kind = entry.kind
        if kind is EntryKind.PUSH_SET:
            self.push[PushConfig.from_dict(entry.data).config_id] = entry.data
            return []
        if kind is EntryKind.PUSH_DELETED:
            self.push.pop(str(entry.data.get("id")), None)
            return []
        if kind is EntryKind.TURN:
            self.turns.add(str(entry.data.get("requestId")))
        task = self.task
        if task.state.terminal or kind is EntryKind.SUBMITTED:
            return []
        if entry.request_id is not None:
            if entry.request_id != self.request_id:
                return []  # an earlier turn's late answer
            self.last_activity = now
        out: list[Update] = []
        if kind is EntryKind.STARTED:
            self._start(entry, out)
        elif kind is EntryKind.PROGRESS:
            note = entry.data
            message = task.agent_message([Part.of(note)]) if note is not None else None
            self._status(TaskState.WORKING, message, entry.time, out)
        elif kind is EntryKind.CHUNK:
            self._chunk(entry, out)
        elif kind is EntryKind.ANSWER:
            self._answer(entry.data, entry.time, out)
        elif kind is EntryKind.END:
            self._finish(entry.data.get("error"), entry.time, out)
        elif kind is EntryKind.TURN:
            self._turn(entry, now, out)
        elif kind is EntryKind.CANCELED:
            reason = entry.data.get("reason")
            text = f"canceled: {reason}" if isinstance(reason, str) and reason else "canceled"
            self._end(TaskState.CANCELED, task.agent_message([Part.text(text)]), entry.time, out)
        elif kind is EntryKind.FAILED:
            self._finish(entry.data.get("error") or {}, entry.time, out)
        return self._numbered(out)

    # -- entries ----------------------------------------------------------------------

    def _start(self, entry: Entry, out: list[Update]) -> None:
        self.control = entry.control
        restart = entry.redelivered and self._started
        if entry.redelivered:
            self.task.metadata["redelivered"] = True
        if restart:  # another replica begins the turn again: its answer replaces this one
            if self._artifact is not None and self._artifact in self.task.artifacts:
                self.task.artifacts.remove(self._artifact)
            self._artifact, self._held, self._next_seq = None, None, 0
        self._started = True
        if restart or self.task.state is not TaskState.WORKING:
            self._status(TaskState.WORKING, None, entry.time, out)

    def _turn(self, entry: Entry, now: float, out: list[Update]) -> None:
        """The caller's next message: the next call. One that comes while the agent
        still works on the turn before supersedes it (its late answers are ignored);
        the same message again (its id is in the history: sent to two replicas at
        once) is not a new turn."""
        task = self.task
        message_id = entry.data["message"].get("messageId")
        if any(m.message_id == message_id for m in task.history):
            return
        held, self._held = self._held, None
        if held is not None:  # the superseded turn's artifact ends here
            out.append(replace(held, last_chunk=True))
        data = entry.data
        message = Message.from_record(data["message"])
        task.history.append(message)
        self.call = CallPlan.of(data["call"])
        self.request_id = str(data["requestId"])
        self._started, self._next_seq, self._artifact = False, 0, None
        self.last_activity = now
        self._status(TaskState.WORKING, None, entry.time, out)

    def _chunk(self, entry: Entry, out: list[Update]) -> None:
        seq = entry.seq or 0
        if seq < self._next_seq:
            return  # a repeat
        self._next_seq = seq + 1
        item = entry.data
        task = self.task
        if self.call.conversational and is_progress(item):
            self._status(TaskState.WORKING, task.agent_message([Part.data(item)]), entry.time, out)
            return
        started = self._artifact is not None
        parts = chunk_parts(item, self.call.conversational, started)
        if not parts:
            return
        artifact = self._artifact
        if artifact is None:  # onto the task with its first chunk's release
            artifact = self._artifact = Artifact([])
        delta = Artifact(parts, artifact.name, artifact.artifact_id)
        self._push(ArtifactChunk(delta, append=started, last_chunk=False), out)

    def _answer(self, response: dict[str, Any], time: str | None, out: list[Update]) -> None:
        if "error" in response:
            self._finish(response["error"], time, out)
            return
        parts = answer_parts(response.get("result"))
        artifact = Artifact([])
        self.task.artifacts.append(artifact)
        self._budget.keep(artifact, parts)
        whole = Artifact(parts, artifact.name, artifact.artifact_id)
        self._push(ArtifactChunk(whole, append=False, last_chunk=True), out)
        self._finish(None, time, out)

    def _finish(self, error: Any, time: str | None, out: list[Update]) -> None:
        """The turn's answer ended: completed, waiting for input, or failed."""
        task = self.task
        if error is None:
            self._end(TaskState.COMPLETED, None, time, out)
        elif isinstance(error, dict) and error.get("code") == ErrorCode.INPUT_REQUIRED:
            prompt = error.get("data")
            message = task.agent_message([Part.of(prompt if prompt is not None else "")])
            self._end(TaskState.INPUT_REQUIRED, message, time, out)
        else:
            error = error if isinstance(error, dict) else {"code": -32603, "message": str(error)}
            self._end(TaskState.FAILED, task.agent_message(error_parts(error)), time, out)

    # -- updates ----------------------------------------------------------------------

    def _status(
        self, state: TaskState, message: Message | None, time: str | None, out: list[Update]
    ) -> None:
        task = self.task
        task.set_state(state, message, time)
        # The lists are copied: a later turn's message or artifact is not in this snapshot.
        snapshot = copy.copy(task)
        snapshot.history, snapshot.artifacts = list(task.history), list(task.artifacts)
        self._push(StatusChanged(snapshot), out)

    def _end(
        self, state: TaskState, message: Message | None, time: str | None, out: list[Update]
    ) -> None:
        """The held chunk goes out marked last, then the status."""
        held, self._held = self._held, None
        if held is not None:
            self._release(replace(held, last_chunk=True), out)
        self._status(state, message, time, out)

    def _push(self, update: Update, out: list[Update]) -> None:
        held = self._held
        self._held = None
        if isinstance(update, ArtifactChunk) and not update.last_chunk:
            self._held = update
            if held is not None:
                ended = held.artifact.artifact_id != update.artifact.artifact_id
                self._release(replace(held, last_chunk=ended), out)
            return
        if held is not None:
            self._release(held, out)
        out.append(update)

    def _release(self, held: ArtifactChunk, out: list[Update]) -> None:
        """A held chunk goes out, and onto the stored artifact (the current turn's)."""
        artifact = self._artifact
        if artifact is not None:
            if artifact not in self.task.artifacts:
                self.task.artifacts.append(artifact)
            self._budget.keep(artifact, held.artifact.parts)
        out.append(held)

    def _numbered(self, updates: list[Update]) -> list[Versioned]:
        numbered = []
        for update in updates:
            self.version += 1
            numbered.append(Versioned(self.version, update))
        return numbered


def _count(value: Any) -> int:
    """A record's count or index: a whole number a snapshot can hold, else ValueError."""
    if type(value) is not int or not 0 <= value < 2**63:
        raise ValueError(f"expected a count, not {value!r}")
    return value


def _index(artifacts: list[Artifact], artifact: Artifact | None) -> int | None:
    """Where ``artifact`` is among the task's (by identity), or None."""
    return next((i for i, a in enumerate(artifacts) if a is artifact), None)
