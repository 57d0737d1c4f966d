"""A logging handler that keeps records as the bus's trace filter leaves them."""

from __future__ import annotations

import logging

from a2a_bus.runtime.logs import TraceContextFilter


class Records(logging.Handler):
    """Records with the trace fields :class:`TraceContextFilter` adds to them."""

    def __init__(self) -> None:
        super().__init__()
        self.addFilter(TraceContextFilter())
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)  # under the handler's own lock

    def written(self, prefix: str) -> logging.LogRecord | None:
        """The first record whose message begins with ``prefix``."""
        with self.lock:  # type: ignore[union-attr]
            return next((r for r in self.records if r.getMessage().startswith(prefix)), None)
