"""Requests run as tasks: what the agent's host says about them beyond the answer.

A request carrying the ``taskid`` extension runs as a task (an A2A task, see
docs/gateway.md): its reply topic is the bus's task log, and everything answering
it (chunks, the end marker, the response) carries the task id and is keyed by it,
so one task's records stay in one partition, in order. Before the handler runs
the host sends a ``started`` mark (with where a cancel goes and whether this is a
redelivery); while it runs, each ``self.progress(...)`` of the handler is a
``progress`` mark. The reader of the task log (the A2A gateway) folds them into
the task's state.
"""

from __future__ import annotations

from typing import Any, Final

from cloudevents.core.v1.event import CloudEvent

from a2a_bus.core.streams import STREAM_CONTROL
from a2a_bus.protocol import Adaptor, ext, result_response

#: Extension naming what a task mark says (``started`` or ``progress``).
TASK_MARK: Final = "taskmark"
STARTED: Final = "started"
PROGRESS: Final = "progress"
#: Extension on a ``started`` mark: the request is a redelivery (its first
#: handling may have begun elsewhere: a process died, a partition moved).
REDELIVERED: Final = "redelivered"


def mark_event(
    adaptor: Adaptor,
    request: CloudEvent,
    mark: str,
    note: Any = None,
    *,
    source: str,
    control: str | None = None,
    redelivered: bool = False,
) -> CloudEvent:
    """A mark about the task ``request`` runs in: a response-shaped event whose
    ``result`` is ``note``, correlated and keyed as the answer will be."""
    event = adaptor.response_event(request, result_response(note, None), source=source)
    attributes = event.get_attributes()
    attributes[TASK_MARK] = mark
    if control is not None:
        attributes[STREAM_CONTROL] = control
    if redelivered:
        attributes[REDELIVERED] = True
    return event


def task_mark(event: CloudEvent) -> str | None:
    """``started``, ``progress`` or None (not a mark) for an event of a task log."""
    mark = event.get_attributes().get(TASK_MARK)
    return mark if isinstance(mark, str) else None


def task_id_of(event: CloudEvent) -> str | None:
    """The task an event belongs to, or None."""
    task_id = event.get_attributes().get(ext.TASK_ID)
    return task_id if isinstance(task_id, str) else None
