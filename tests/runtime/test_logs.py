"""Log records name the message they were written for: its trace, the agent, the
method (or the subject of a subscribed event). Real buses on both transports, no
OpenTelemetry SDK: the trace is the handled event's ``traceparent``."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from a2a_bus import Agent, Bus, method, subscribe
from a2a_bus.protocol import parse_traceparent
from tests.buses import eventually, make_bus
from tests.log_records import Records

__all__ = ["make_bus"]  # the fixture

log = logging.getLogger("tests.runtime.logs")


class Writer(Agent):
    agent_id = "writer"

    @method
    def note(self) -> str:
        log.warning("a request")
        return str(self.event.get_attributes()["traceparent"])

    @method
    def total(self, values: Iterator[int]) -> int:
        log.warning("a stream in")
        return sum(values)

    @subscribe("news.*")
    def on_news(self, event: Any) -> None:
        log.warning("an event %s", event.get_attributes()["traceparent"])


@pytest.fixture
def records() -> Iterator[Records]:
    handler = Records()
    log.addHandler(handler)
    yield handler
    log.removeHandler(handler)


def _fields(record: logging.LogRecord) -> tuple[Any, ...]:
    return tuple(getattr(record, name) for name in ("trace_id", "span_id", "agent_id", "method"))


async def test_a_record_names_the_method_or_subject_and_the_trace_it_was_written_for(
    make_bus: Callable[..., Awaitable[Bus]], records: Records
) -> None:
    bus = await make_bus(Writer)
    client = bus.async_client()
    sent = parse_traceparent(await client.request("writer", "note"))
    assert sent is not None
    record = records.written("a request")
    assert record is not None
    assert _fields(record) == (sent.trace_id, sent.parent_id, "writer", "note")

    assert await client.stream_to("writer", "total", [1, 2]) == 3
    record = records.written("a stream in")
    assert record is not None and _fields(record)[2:] == ("writer", "total")

    await client.publish("news.sport", {"goal": 1})
    record = await eventually(lambda: records.written("an event"), "the subscriber's record")
    heard = parse_traceparent(record.getMessage().removeprefix("an event "))
    assert heard is not None
    assert _fields(record) == (heard.trace_id, heard.parent_id, "writer", "news.sport")
