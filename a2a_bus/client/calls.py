"""What callers hand to a client and get back as records: a batch's :class:`Call`
items (checked before anything is sent) and a page of a subject's events."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from cloudevents.core.v1.event import CloudEvent


class Call(NamedTuple):
    """One element of a batch: ``agent`` None routes by method."""

    agent: str | None
    method: str
    params: Any = None


class EventPage(NamedTuple):
    """Events retained on a subject, from :meth:`AsyncClient.read`."""

    events: list[CloudEvent]
    #: Pass it to the next ``read`` to go on after these events.
    cursor: str
    #: Records skipped because they could not be decoded.
    undecodable: int = 0


def check_calls(calls: Any) -> None:
    """TypeError, before anything is sent, unless ``calls`` is a sequence of Call."""
    if isinstance(calls, Call | str | Mapping) or not isinstance(calls, Sequence):
        raise TypeError(
            f"batch takes a list of Call(agent, method, params), not {calls!r:.60}"
            + (": pass [call]" if isinstance(calls, Call) else "")
        )
    for call in calls:
        if not isinstance(call, Call):
            raise TypeError(
                f"batch takes a list of Call(agent, method, params), and {call!r:.60} is "
                "no Call (from a2a_bus import Call)"
            )
