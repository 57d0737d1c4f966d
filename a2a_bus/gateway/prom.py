"""Prometheus metrics of the gateway and ``GET /metrics``.

Bus counters (requests, errors, dead letters, in-flight requests...) live in
:mod:`a2a_bus.core.metrics`; this module adds the HTTP side and serves them all.
"""

from __future__ import annotations

import re
import time
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

HTTP_REQUESTS = Counter(
    "a2a_gateway_http_requests", "HTTP requests answered by the gateway", ["route", "status"]
)
HTTP_LATENCY = Histogram(
    "a2a_gateway_http_request_seconds",
    "Time to answer an HTTP request (streams: until the stream ends)",
    ["route"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
HTTP_IN_FLIGHT = Gauge("a2a_gateway_http_in_flight", "HTTP requests being answered", ["route"])
RPC_ERRORS = Counter(
    "a2a_gateway_rpc_errors", "JSON-RPC error responses sent by the gateway", ["code"]
)


def code_label(code: Any) -> str:
    """An error code as a label value: a code of JSON-RPC's reserved range (the
    spec's, the bus's, an agent's -32000 to -32099) as is, any other ``other``, so
    that handlers raising codes of their own cannot make series without bound."""
    return str(code) if type(code) is int and -32768 <= code <= -32000 else "other"


NOTIFICATIONS_REFUSED = Counter(
    "a2a_gateway_notifications_refused",
    "JSON-RPC notifications the bus refused (an unknown agent): unanswered, per the spec",
    ["code"],
)
EVENTS_PUBLISHED = Counter("a2a_gateway_events_published", "CloudEvents accepted on /events")
DENIED = Counter("a2a_gateway_denied", "Requests refused by authentication or allow-lists", ["why"])
PUSH_DELIVERIES = Counter(
    "a2a_push_deliveries",
    "Push-notification deliveries, by outcome (delivered, failed after every attempt, "
    "rejected by the receiver with a 4xx, refused by the URL policy, dropped)",
    ["outcome"],
)
PUSH_RETRIES = Counter(
    "a2a_push_retries", "Push-notification POSTs tried again (connection error, 408, 429, 5xx)"
)
INGRESS_RECORDS = Counter("a2a_ingress_records", "Kafka ingress messages, by outcome", ["outcome"])

if TYPE_CHECKING:
    from a2a_bus.transport.base import Transport

_ROUTES = ("/", "/rpc", "/events", "/agents", "/a2a", "/healthz", "/readyz", "/metrics")
#: The consumer group of one live view (``<prefix>.tail.<event id>``, made per
#: ``GET /topics/{subject}/events`` by :func:`a2a_bus.core.watch.watch`).
_VIEW_GROUP = re.compile(r"(.+\.tail)\.[0-9a-f]{20}-[0-9]+")


def route_label(path: str) -> str:
    """A bounded label for a request path (no ids in labels)."""
    if path.startswith("/agents/"):
        return "/agents/{id}"
    if path.startswith("/topics/"):
        return (
            "/topics/{subject}/history" if path.endswith("/history") else "/topics/{subject}/events"
        )
    if path.startswith("/a2a/"):
        return "/a2a/{id}/card" if path.endswith(".json") else "/a2a/{id}"
    return path if path in _ROUTES else "other"


def group_label(group: str) -> str:
    """A bounded label for a consumer group: the groups of live views, one per
    request, are counted together as ``<prefix>.tail``."""
    view = _VIEW_GROUP.fullmatch(group)
    return view.group(1) if view is not None else group


class MetricsMiddleware:
    """Counts requests by route and status, their latency and how many are in flight."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = route_label(scope["path"])
        status = 500

        async def record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        in_flight = HTTP_IN_FLIGHT.labels(route)
        in_flight.inc()
        start = time.perf_counter()
        try:
            await self.app(scope, receive, record_status)
        finally:
            in_flight.dec()
            HTTP_LATENCY.labels(route).observe(time.perf_counter() - start)
            HTTP_REQUESTS.labels(route, str(status)).inc()


class TransportCollector(Collector):
    """Consumer lag, dead-letter and skipped-copy totals of the transports behind the
    gateways of this process, read at scrape time."""

    def __init__(self) -> None:
        self._transports: weakref.WeakSet[Transport] = weakref.WeakSet()

    def watch(self, transport: Transport) -> None:
        self._transports.add(transport)

    def collect(self) -> Iterator[Metric]:
        lag = GaugeMetricFamily(
            "a2a_consumer_lag", "Records not handled yet, per consumer group", labels=["group"]
        )
        dead = GaugeMetricFamily(
            "a2a_transport_dead_letters", "Records the transport wrote to the dead-letter topic"
        )
        skipped = CounterMetricFamily(
            "a2a_duplicates_skipped", "Copies of an event its subscribers skipped (dedup)"
        )
        again = CounterMetricFamily(
            "a2a_transport_redelivered",
            "Records handled again after the consumer that had them went away",
        )
        lags: dict[str, int] = {}
        total = copies = redelivered = 0
        for transport in list(self._transports):
            for group, records in transport.lag().items():
                label = group_label(group)
                lags[label] = lags.get(label, 0) + records
            total += transport.dead_lettered
            copies += transport.duplicates_skipped
            redelivered += transport.redelivered
        for label, records in sorted(lags.items()):  # one sample per label set
            lag.add_metric([label], records)
        dead.add_metric([], total)
        skipped.add_metric([], copies)
        again.add_metric([], redelivered)
        yield lag
        yield dead
        yield skipped
        yield again


TRANSPORTS = TransportCollector()
REGISTRY.register(TRANSPORTS)


async def metrics(request: Request) -> Response:
    """Every metric of this process in the Prometheus text format."""
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
