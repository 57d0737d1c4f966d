"""Bus counters: per-bus numbers for tests and the process-wide Prometheus metrics."""

from __future__ import annotations

from dataclasses import dataclass, fields

from prometheus_client import Counter, Gauge

_PROM_COUNTERS = {
    "requests": Counter("a2a_requests", "Requests sent by this process's callers"),
    "errors": Counter("a2a_errors", "Requests answered with a JSON-RPC error"),
    "late_replies": Counter("a2a_late_replies", "Replies that came after their deadline"),
    "duplicate_replies": Counter("a2a_duplicate_replies", "Second replies to one request"),
    "dead_letters": Counter("a2a_dead_letters", "Records written to the dead-letter topic"),
    "redeliveries": Counter("a2a_redeliveries", "Messages handled again (crash or redelivery)"),
    "duplicates_skipped": Counter("a2a_duplicates_skipped", "Redeliveries skipped by dedup"),
    "restarts": Counter("a2a_agent_restarts", "Agent actors restarted after a crash"),
    "pauses": Counter("a2a_backpressure_pauses", "Inboxes paused because a mailbox was full"),
    "handled": Counter("a2a_messages_handled", "Messages handled by agents"),
    "stream_gaps": Counter("a2a_stream_gaps", "Stream chunks that arrived out of order"),
    "stream_duplicates": Counter("a2a_stream_duplicates", "Stream chunks dropped as repeats"),
}
IN_FLIGHT = Gauge("a2a_in_flight", "Requests waiting for their answer")


@dataclass
class Metrics:
    """Counters of one bus. ``inc`` also feeds the Prometheus counter of the same name."""

    requests: int = 0
    errors: int = 0
    late_replies: int = 0
    duplicate_replies: int = 0
    dead_letters: int = 0
    redeliveries: int = 0
    duplicates_skipped: int = 0
    restarts: int = 0
    pauses: int = 0
    handled: int = 0
    stream_gaps: int = 0
    stream_duplicates: int = 0
    in_flight: int = 0
    #: Highest number of messages one replica held at once (queued + running).
    peak_mailbox: int = 0

    def inc(self, name: str, amount: int = 1) -> None:
        setattr(self, name, getattr(self, name) + amount)
        _PROM_COUNTERS[name].inc(amount)

    def in_flight_delta(self, amount: int) -> None:
        self.in_flight += amount
        IN_FLIGHT.inc(amount)

    def snapshot(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}
