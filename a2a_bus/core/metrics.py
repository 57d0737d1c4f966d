"""Bus counters: per-bus numbers for tests, and process-wide Prometheus metrics.

Counting is a plain attribute increment (it happens several times per
request); the Prometheus side adds up every bus's counters only when scraped.
Counters of buses that were garbage-collected are kept, so the process-wide
totals never go down.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, fields

from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

#: Bus counter -> (Prometheus name, help); exported as ``<name>_total``.
PROMETHEUS_COUNTERS = {
    "requests": ("a2a_requests", "Requests sent by this process's callers"),
    "errors": (
        "a2a_errors",
        "Requests answered with a JSON-RPC error, also those refused before they were "
        "sent (which a2a_requests does not count)",
    ),
    "late_replies": ("a2a_late_replies", "Replies that came after their deadline"),
    "duplicate_replies": ("a2a_duplicate_replies", "Second replies to one request"),
    "dead_letters": ("a2a_dead_letters", "Records written to the dead-letter topic"),
    "redeliveries": ("a2a_redeliveries", "Messages given to an agent again after it crashed"),
    "restarts": ("a2a_agent_restarts", "Agent actors restarted after a crash"),
    "pauses": ("a2a_backpressure_pauses", "Inboxes paused because a mailbox was full"),
    "handled": ("a2a_messages_handled", "Messages handled by agents"),
    "stream_gaps": ("a2a_stream_gaps", "Stream chunks that arrived out of order"),
    "stream_duplicates": ("a2a_stream_duplicates", "Stream chunks dropped as repeats"),
}


@dataclass(eq=False)
class Metrics:
    """Counters of one bus; every instance feeds the process-wide Prometheus metrics."""

    requests: int = 0
    errors: int = 0
    late_replies: int = 0
    duplicate_replies: int = 0
    dead_letters: int = 0
    redeliveries: int = 0
    restarts: int = 0
    pauses: int = 0
    handled: int = 0
    stream_gaps: int = 0
    stream_duplicates: int = 0
    #: Requests waiting for their answer (a gauge).
    in_flight: int = 0
    #: Highest number of messages one replica held at once (queued + running).
    peak_mailbox: int = 0

    def __post_init__(self) -> None:
        _COLLECTOR.add(self)
        # The finalizer holds the counters (the instance dict), not the instance:
        # when the bus is collected its last counts move to the retired totals.
        weakref.finalize(self, _COLLECTOR.retire, self.__dict__).atexit = False

    def snapshot(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class _BusCollector(Collector):
    """Sums the counters of every live bus, plus those of buses gone."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # RLock: a bus may be collected during a scrape
        self._live: weakref.WeakSet[Metrics] = weakref.WeakSet()
        self._retired = dict.fromkeys(PROMETHEUS_COUNTERS, 0)

    def add(self, metrics: Metrics) -> None:
        with self._lock:
            self._live.add(metrics)

    def retire(self, counters: dict[str, int]) -> None:
        with self._lock:
            for name in PROMETHEUS_COUNTERS:
                self._retired[name] += counters.get(name, 0)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            totals = dict(self._retired)
            in_flight = 0
            for metrics in list(self._live):
                for name in PROMETHEUS_COUNTERS:
                    totals[name] += getattr(metrics, name)
                in_flight += metrics.in_flight
        for name, (metric, documentation) in PROMETHEUS_COUNTERS.items():
            yield CounterMetricFamily(metric, documentation, value=totals[name])
        yield GaugeMetricFamily("a2a_in_flight", "Requests waiting for their answer", in_flight)


_COLLECTOR = _BusCollector()
REGISTRY.register(_COLLECTOR)
