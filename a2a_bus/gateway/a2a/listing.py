"""``ListTasks``: one caller's tasks, newest status first, in pages.

The order is the status timestamp, newest first, then the task id; a page token
names the last task of the page before (its timestamp and id), so it stays valid
when tasks change or go between two pages (a task updated meanwhile may move
above the cursor: it is then on no later page).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from datetime import datetime
from typing import NamedTuple

import orjson

from a2a_bus.gateway.a2a.errors import invalid_params
from a2a_bus.gateway.a2a.fold import TaskFold
from a2a_bus.gateway.a2a.wire import ListQuery, parse_timestamp


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
