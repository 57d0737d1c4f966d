"""A task's Server-Sent Events: the task, then its updates as they come, to its end.

``SendStreamingMessage`` and ``SubscribeToTask`` (and their 0.3 names) answer with
this stream. Every event's ``id:`` is its update's number, the same on every
replica (:mod:`.fold`), so a client that lost its stream resumes on any replica
with ``Last-Event-ID``. The task goes on when the client leaves: it is the bus's,
not the connection's.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from starlette.responses import Response

from a2a_bus.gateway.a2a.errors import A2ACode, A2AError
from a2a_bus.gateway.a2a.fold import TaskFold
from a2a_bus.gateway.a2a.model import Task
from a2a_bus.gateway.a2a.updates import ArtifactChunk, StatusChanged, Versioned
from a2a_bus.gateway.a2a.view import TaskView
from a2a_bus.gateway.a2a.wire import Version, artifact_update, status_update, task_result
from a2a_bus.gateway.sse import SSEResponse, frame
from a2a_bus.protocol import result_response, whole_number


def sent_stream(
    view: TaskView, fold: TaskFold, version: Version, id: Any, start: int | None
) -> Response:
    """The stream of a send: the task as the send left it (version ``start``: its
    submission or its turn), then every update after it; the task as it is now
    when that version is no longer kept."""
    first = None if start is None else view.updates.task_at(fold.task.id, start)
    if first is None:
        return SSEResponse(_events(view, fold, version, id))
    return SSEResponse(_events(view, fold, version, id, after=start, first=first))


def subscription(
    view: TaskView, fold: TaskFold, version: Version, id: Any, resume: int | None
) -> Response:
    """``SubscribeToTask``: the task, then its updates as they come, to its end;
    with ``Last-Event-ID`` (``resume``), the updates after that one (the task again
    when they are no longer kept)."""
    task = fold.task
    if resume is not None and resume > fold.version:
        resume = None  # no update of this task had it: the client gets the task as it is
    if task.state.terminal and (resume is None or resume >= fold.version):
        raise A2AError(
            A2ACode.UNSUPPORTED_OPERATION,
            f"task {task.id!r} is {task.state.value}: nothing more will come (GetTask returns it)",
            {"taskId": task.id, "state": task.state.value},
        )
    if resume is not None and view.updates.after(task.id, resume) is not None:
        return SSEResponse(_events(view, fold, version, id, after=resume))
    return SSEResponse(_events(view, fold, version, id))


def last_event_id(header: str | None) -> int | None:
    """The version a resuming SSE client saw last (``Last-Event-ID``), if readable."""
    return whole_number(header)


async def _events(
    view: TaskView,
    fold: TaskFold,
    version: Version,
    id: Any,
    *,
    after: int | None = None,
    first: Task | None = None,
) -> AsyncGenerator[bytes, None]:
    """The task (``first``, as it was at version ``after``; as it is now when
    ``after`` is None; none when resuming after a version), then each update after
    it (``id:`` its version), to the one that ends the task or asks for input."""
    task = fold.task

    def event(result: Any, event_id: int) -> bytes:
        return frame(result_response(result, id), "message", event_id)

    if after is None:
        after = fold.version  # read with the task: no update is in both
        yield event(task_result(task, version), after)
    elif first is not None:
        yield event(task_result(first, version), after)
    try:
        async for versioned in view.updates.follow(task.id, after):
            yield event(_render(task, versioned, version), versioned.version)
    except LookupError:  # fell behind what is kept: the task as it is now
        current = view.get(task.id) or fold
        yield event(task_result(current.task, version), current.version)


def _render(task: Task, versioned: Versioned, version: Version) -> Any:
    update = versioned.update
    if isinstance(update, StatusChanged):
        return status_update(update.snapshot, version)
    assert isinstance(update, ArtifactChunk)
    return artifact_update(
        task, update.artifact, version, append=update.append, last_chunk=update.last_chunk
    )
