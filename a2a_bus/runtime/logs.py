"""Log records that say which message they were written for.

:class:`TraceContextFilter` gives every record it sees ``trace_id``, ``span_id``,
``agent_id`` and ``method``: those of the message being handled where it was
written (None elsewhere); ``method`` is the one the message calls, or for an
event without one the subject it was published on. The span is OpenTelemetry's
current one when an SDK records; without one, ``span_id`` is the span that sent
the message (the parent id of its ``traceparent``). :class:`JsonFormatter` writes
a record as one JSON object per line (``a2a-bus serve --log-format json``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson
from opentelemetry import trace

from a2a_bus.protocol import ext, parse_traceparent
from a2a_bus.runtime.tracing import ORIGIN

#: The attributes :class:`TraceContextFilter` sets on a record.
FIELDS = ("trace_id", "span_id", "agent_id", "method")


def trace_fields() -> dict[str, str | None]:
    """``trace_id``, ``span_id``, ``agent_id`` and ``method`` of the code running here."""
    origin = ORIGIN.get()
    fields: dict[str, str | None] = dict.fromkeys(FIELDS)
    span = trace.get_current_span().get_span_context()
    if span.is_valid:
        fields["trace_id"] = f"{span.trace_id:032x}"
        fields["span_id"] = f"{span.span_id:016x}"
    elif origin is not None:
        parent = parse_traceparent(origin.attributes.get(ext.TRACEPARENT))
        if parent is not None:
            fields["trace_id"], fields["span_id"] = parent.trace_id, parent.parent_id
    if origin is not None:
        fields["agent_id"], fields["method"] = origin.agent, _handled(origin.attributes)
    return fields


def _handled(attributes: Mapping[str, Any]) -> str | None:
    """The method a message calls, else the subject it was published on."""
    name = attributes.get(ext.METHOD)
    if not isinstance(name, str):
        name = attributes.get(ext.SUBJECT)
    return name if isinstance(name, str) else None


class TraceContextFilter(logging.Filter):
    """Sets :data:`FIELDS` on each record (add it to a handler); drops none."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in trace_fields().items():
            setattr(record, name, value)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the trace fields
    (when set) and the exception, if any."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


def json_handler(stream: Any = None) -> logging.Handler:
    """A handler writing JSON lines (to stderr by default), trace fields included."""
    handler = logging.StreamHandler(stream)
    handler.addFilter(TraceContextFilter())
    handler.setFormatter(JsonFormatter())
    return handler
