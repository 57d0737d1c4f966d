"""OpenTelemetry for ``a2a-bus serve``: OTLP over HTTP when the standard variables ask.

With ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) set,
the process installs the SDK's tracer provider (its resource from
``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``) with a batch processor
exporting over OTLP/HTTP; every other ``OTEL_*`` setting of the SDK and the
exporter applies. The SDK and the exporter come with the ``otel`` extra.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
MISSING = (
    "{name} is set but the OpenTelemetry SDK or its OTLP exporter is not installed: "
    "pip install 'a2a-bus[otel]'"
)


class TelemetryUnavailable(RuntimeError):
    """Export was asked for, but the SDK is not installed."""


def start_export(env: Mapping[str, str] | None = None) -> Callable[[], None] | None:
    """Install the exporting tracer provider if the environment asks for one; the
    function that flushes and stops it (None: nothing was installed)."""
    env = os.environ if env is None else env
    asked = next((name for name in ENDPOINTS if env.get(name, "").strip()), None)
    if asked is None:
        return None
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
