"""OpenTelemetry for ``a2a-bus serve``: OTLP over HTTP when the standard variables ask.

With ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) set,
the process installs the SDK's tracer provider (its resource from
``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``) with a batch processor
exporting over OTLP/HTTP; every other ``OTEL_*`` setting of the SDK and the
exporter applies. The SDK and the exporter come with the ``otel`` extra. An
endpoint that is no http(s) URL is refused at once: the exporter would only log,
at each export, that it lost the spans.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
MISSING = (
    "{name} is set but the OpenTelemetry SDK or its OTLP exporter is not installed: "
    "pip install 'a2a-bus[otel]'"
)
NOT_A_URL = (
    "{name}={value!r}: expected an http:// or https:// URL of an OTLP/HTTP receiver "
    "(http://localhost:4318, say)"
)


class TelemetryUnavailable(RuntimeError):
    """Export was asked for, but cannot be done: no SDK, or an endpoint that is no URL."""


def start_export(env: Mapping[str, str] | None = None) -> Callable[[], None] | None:
    """Install the exporting tracer provider if the environment asks for one; the
    function that flushes and stops it (None: nothing was installed)."""
    env = os.environ if env is None else env
    asked = next((name for name in ENDPOINTS if env.get(name, "").strip()), None)
    if asked is None:
        return None
    for name in ENDPOINTS:
        value = env.get(name, "").strip()
        if value and not _http_url(value):
            raise TelemetryUnavailable(NOT_A_URL.format(name=name, value=value))
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise TelemetryUnavailable(MISSING.format(name=asked)) from None
    provider = TracerProvider(resource=Resource.create())
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider.shutdown


def _http_url(value: str) -> bool:
    """Whether ``value`` is an http(s) URL with a host (and a numeric port, if any)."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (raises ValueError for a port that is no number)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)
