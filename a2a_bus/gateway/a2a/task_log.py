"""The task log: what the records of ``<prefix>.tasks`` say, and the gateway's own.

Every A2A task is a run of records keyed by its id (one partition, in order):

* written by a gateway: ``submitted`` (the task, its owner, the call it makes),
  ``turn`` (the caller's next message to a task waiting for input), ``canceled``,
  ``failed`` (the agent could not be reached, or went silent past the task's
  inactivity limit) and the push-notification configs (``push-set``,
  ``push-deleted``);
* written by the agent's host (:mod:`a2a_bus.core.task_marks`): ``started`` and
  ``progress`` marks, then the answer: stream chunks and their end marker, or one
  response.

:func:`read_entry` turns any record into an :class:`Entry`; the fold
(:mod:`.fold`) makes the task's state of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.core.streams import STREAM_CONTROL, STREAM_END
from a2a_bus.core.task_marks import PROGRESS, REDELIVERED, STARTED, task_id_of, task_mark
from a2a_bus.protocol import ext, new_event

#: Extension naming a gateway's entry.
TASK_ENTRY: Final = "taskentry"
_TYPE_PREFIX = "a2a-bus.task."


class EntryKind(StrEnum):
    SUBMITTED = "submitted"
    TURN = "turn"
    CANCELED = "canceled"
    FAILED = "failed"
    PUSH_SET = "push-set"
    PUSH_DELETED = "push-deleted"
    STARTED = STARTED
    PROGRESS = PROGRESS
    CHUNK = "chunk"
    END = "end"
    ANSWER = "answer"


#: What gateways write (the rest comes from agents).
GATEWAY_ENTRIES = frozenset(
    {
        EntryKind.SUBMITTED,
        EntryKind.TURN,
        EntryKind.CANCELED,
        EntryKind.FAILED,
        EntryKind.PUSH_SET,
        EntryKind.PUSH_DELETED,
    }
)


@dataclass(frozen=True, slots=True)
class Entry:
    kind: EntryKind
    task_id: str
    #: When it was written (ISO 8601, UTC), or None when the record has no time.
    time: str | None
    #: The gateway's payload; a mark's note; a chunk's item; an answer's response.
    data: Any = None
    #: The bus request it answers (agents' records).
    request_id: str | None = None
    seq: int | None = None
    #: Where a cancel of the handler goes (``started``).
    control: str | None = None
    redelivered: bool = False


def iso(moment: datetime) -> str:
    """A timestamp as A2A writes them (milliseconds, ``Z``)."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def entry_event(
    kind: EntryKind, task_id: str, data: dict[str, Any], *, source: str, id: str | None = None
) -> CloudEvent:
    """A gateway's record of ``kind`` about task ``task_id``. ``id``: a fixed event
    id, for a record two gateways may both write (the fold keeps the first)."""
    attributes: dict[str, Any] = {
        "source": source,
        "type": _TYPE_PREFIX + kind.value,
        "datacontenttype": "application/json",
        "time": datetime.now(UTC),
        ext.TASK_ID: task_id,
        ext.PARTITION_KEY: task_id,
        TASK_ENTRY: kind.value,
    }
    if id is not None:
        attributes["id"] = id
    return new_event(attributes, data)


def read_entry(event: CloudEvent) -> Entry | None:
    """What a record of the task log says (None: it is none of the known kinds)."""
    task_id = task_id_of(event)
    if task_id is None:
        return None
    attributes = event.get_attributes()
    moment = attributes.get("time")
    time = iso(moment) if isinstance(moment, datetime) else None
    data = event.get_data()
    entry = attributes.get(TASK_ENTRY)
    if isinstance(entry, str):
        try:
            kind = EntryKind(entry)
        except ValueError:
            return None
        if kind not in GATEWAY_ENTRIES or not isinstance(data, dict):
            return None
        return Entry(kind, task_id, time, data)
    request_id = attributes.get(ext.COLLABORATION)
    if not isinstance(request_id, str) or not isinstance(data, dict):
        return None
    mark = task_mark(event)
    if mark is not None:
        control = attributes.get(STREAM_CONTROL)
        return Entry(
            EntryKind(mark) if mark in (STARTED, PROGRESS) else EntryKind.PROGRESS,
            task_id,
            time,
            data.get("result"),
            request_id,
            control=control if isinstance(control, str) else None,
            redelivered=_flag(attributes.get(REDELIVERED)),
        )
    seq = attributes.get(ext.SEQ)
    if _flag(attributes.get(STREAM_END)):
        return Entry(EntryKind.END, task_id, time, data, request_id, seq if type(seq) is int else 0)
    if type(seq) is int:
        return Entry(EntryKind.CHUNK, task_id, time, data.get("result"), request_id, seq)
    return Entry(EntryKind.ANSWER, task_id, time, data, request_id)


def _flag(value: Any) -> bool:
    """An extension flag, as sent (True) or as read back from Kafka headers ("true")."""
    return value is True or value == "true"
