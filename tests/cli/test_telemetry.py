"""OTLP export of ``a2a-bus serve``: an endpoint that is no http(s) URL ends the
command before anything starts (one line naming the variable, exit 2) rather
than losing every span at each export."""

from __future__ import annotations

import pytest

from a2a_bus.cli.telemetry import TelemetryUnavailable, start_export

from .test_failures import one_error_line
from .test_serve_call import run

pytestmark = pytest.mark.timeout(180)

NOT_URLS = ["localhost:4318", "ftp://collector:4318", "http://", "http://collector:port"]


@pytest.mark.parametrize(
    "name", ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
)
@pytest.mark.parametrize("value", NOT_URLS)
def test_an_endpoint_that_is_no_http_url_is_refused(name: str, value: str) -> None:
    with pytest.raises(TelemetryUnavailable) as refused:
        start_export({name: value})
    assert str(refused.value).startswith(f"{name}={value!r}: expected an http:// or https:// URL")


def test_serve_with_an_endpoint_that_is_no_http_url_is_one_line() -> None:
    done = run(
        "serve",
        "a2a_bus.examples.echo:Echo",
        "--http",
        "127.0.0.1:0",
        extra={"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"},
    )
    assert one_error_line(done, 2).startswith(
        "error: OTEL_EXPORTER_OTLP_ENDPOINT='localhost:4318': expected an http:// or https:// URL"
    )
