"""``ListTasks``: one caller's tasks, newest status first, in pages; its params
(filters, page) and its answer.

The order is the status timestamp, newest first, then the task id; a page token
names the last task of the page before (its timestamp and id), so it stays valid
when tasks change or go between two pages (a task updated meanwhile may move
above the cursor: it is then on no later page).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import orjson

from a2a_bus.gateway.a2a.errors import invalid_params
from a2a_bus.gateway.a2a.fold import TaskFold
from a2a_bus.gateway.a2a.model import TaskState
from a2a_bus.gateway.a2a.params import as_object, history_length, optional_str
from a2a_bus.gateway.a2a.wire import Version, task_json
from a2a_bus.protocol import ProtocolError
from a2a_bus.protocol.events import parse_time

#: ``ListTasks`` page sizes (as the a2a-sdk's own server: 50 unless asked, at most 100).
DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 50, 100


@dataclass(frozen=True)
class ListQuery:
    context_id: str | None
    state: TaskState | None
    page_size: int
    page_token: str | None
    history_length: int | None
    #: Only tasks whose status changed at or after this instant.
    updated_after: datetime | None
    include_artifacts: bool


def _task_state(value: Any) -> TaskState | None:
    if value is None or value in ("", "TASK_STATE_UNSPECIFIED"):
        return None
    if isinstance(value, str):
        name = value.removeprefix("TASK_STATE_")
        for state in TaskState:
            if name in (state.name, state.value):
                return state
    raise invalid_params(f"status {value!r} is not a task state")


def parse_timestamp(value: Any, what: str) -> datetime | None:
    """An RFC 3339 timestamp (protobuf's JSON form of a Timestamp), or None.

    Its offset is required (``Z`` or ``+hh:mm``), as protobuf's parser requires it:
    a time without one names no instant. Other ISO 8601 forms (``20261205``,
    ``2026-W49``) are refused."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            return parse_time(value)
        except ProtocolError:
            pass
    raise invalid_params(
        f"{what} must be an RFC 3339 timestamp with its offset "
        f"(2026-12-05T10:00:00Z, 2026-12-05T11:00:00+01:00), not {value!r:.80}",
        field=what,
    )


def parse_list(params: Any) -> ListQuery:
    """The filters and page of ``ListTasks``."""
    body = as_object(params if params is not None else {}, "params")
    size = body.get("pageSize")
    if size is None:
        page_size = DEFAULT_PAGE_SIZE
    elif (
        isinstance(size, bool)
        or not isinstance(size, int | float)
        or size != int(size)
        or not 1 <= size <= MAX_PAGE_SIZE
    ):
        raise invalid_params(f"pageSize must be a whole number from 1 to {MAX_PAGE_SIZE}")
    else:
        page_size = int(size)
    include = body.get("includeArtifacts", False)
    if not isinstance(include, bool):
        raise invalid_params("includeArtifacts must be a boolean")
    return ListQuery(
        context_id=optional_str(body.get("contextId"), "params.contextId"),
        state=_task_state(body.get("status")),
        page_size=page_size,
        page_token=optional_str(body.get("pageToken"), "params.pageToken"),
        history_length=history_length(body.get("historyLength")),
        updated_after=parse_timestamp(body.get("statusTimestampAfter"), "statusTimestampAfter"),
        include_artifacts=include,
    )


class Page(NamedTuple):
    tasks: list[TaskFold]
    #: The token of the next page ("" when this is the last).
    next_token: str
    #: How many tasks match the filters, all pages together.
    total: int


def _order(fold: TaskFold) -> tuple[str, str]:
    return fold.task.timestamp, fold.task.id


def _token(fold: TaskFold) -> str:
    raw = orjson.dumps(list(_order(fold)))
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _cursor(token: str) -> tuple[str, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        timestamp, task_id = orjson.loads(raw)
    except (ValueError, TypeError, orjson.JSONDecodeError):
        raise invalid_params("pageToken is not a token of this endpoint's ListTasks") from None
    if not isinstance(timestamp, str) or not isinstance(task_id, str):
        raise invalid_params("pageToken is not a token of this endpoint's ListTasks")
    return timestamp, task_id


def page(folds: Iterable[TaskFold], query: ListQuery) -> Page:
    """The page of ``folds`` (one caller's, on one endpoint) the query asks for."""
    after = query.updated_after
    matching = [
        fold
        for fold in folds
        if (query.context_id is None or fold.task.context_id == query.context_id)
        and (query.state is None or fold.task.state is query.state)
        and (after is None or _moment(fold) >= after)
    ]
    matching.sort(key=_order, reverse=True)
    start = 0
    if query.page_token is not None:
        cursor = _cursor(query.page_token)
        start = next((i for i, f in enumerate(matching) if _order(f) < cursor), len(matching))
    end = start + query.page_size
    tasks = matching[start:end]
    next_token = _token(tasks[-1]) if end < len(matching) and tasks else ""
    return Page(tasks, next_token, len(matching))


def _moment(fold: TaskFold) -> datetime:
    moment = parse_timestamp(fold.task.timestamp, "timestamp")
    assert moment is not None
    return moment


def list_result(found: Page, query: ListQuery, version: Version) -> dict[str, Any]:
    """The answer to ``ListTasks``: the page's tasks, the next page's token, the sizes."""
    return {
        "tasks": [
            task_json(f.task, version, query.history_length, artifacts=query.include_artifacts)
            for f in found.tasks
        ],
        "nextPageToken": found.next_token,
        "pageSize": len(found.tasks),
        "totalSize": found.total,
    }
