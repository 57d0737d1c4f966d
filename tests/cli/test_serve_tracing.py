"""Traces across processes: two ``a2a-bus serve`` on Kafka export to one OTLP receiver.

Each process exports over OTLP/HTTP (``OTEL_EXPORTER_OTLP_ENDPOINT``) to a
receiver the test runs on 127.0.0.1 (decoding ``ExportTraceServiceRequest`` with
``opentelemetry-proto``). A ``POST /rpc`` with a ``traceparent`` to ``front``,
whose handler calls ``back`` in the other process: the spans of both processes
join the caller's trace. ``--log-format json`` writes the handler's log line with
its trace.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.cli.test_serve_call import ROOT, WAIT, Lines
from tests.ports import free_ports

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

AGENTS = ROOT / "tests" / "cli" / "trace_agents.py"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


class Receiver:
    """An OTLP/HTTP trace receiver: every span it is sent, with its service's name."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver.take(ExportTraceServiceRequest.FromString(body), self.path)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def take(self, request: ExportTraceServiceRequest, path: str) -> None:
        for resource_spans in request.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    with self.lock:
                        self.spans.append(
                            {
                                "path": path,
                                "service": resource.get("service.name"),
                                "name": span.name,
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_id": span.parent_span_id.hex(),
                            }
                        )

    def of(self, service: str) -> list[dict[str, Any]]:
        with self.lock:
            return [s for s in self.spans if s["service"] == service]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.close()


def _serve(name: str, kafka: str, prefix: str, receiver: Receiver, *extra: str) -> Lines:
    return Lines(
        "serve",
        f"{AGENTS}:{name.capitalize()}",
        "--kafka",
        kafka,
        "--prefix",
        prefix,
        *extra,
        extra={
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
            "OTEL_SERVICE_NAME": name,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        },
    )


def test_spans_of_two_serve_processes_on_kafka_join_one_trace(
    kafka_bootstrap: str, receiver: Receiver, tmp_path: Path
) -> None:
    prefix = f"t{uuid.uuid4().hex[:10]}"
    port = free_ports(1)[0]
    back = _serve(
        "back", kafka_bootstrap, prefix, receiver, "--http", "127.0.0.1:0", "--log-format", "json"
    )
    front = _serve("front", kafka_bootstrap, prefix, receiver, "--http", f"127.0.0.1:{port}")
    try:
        back.wait_for("listening on")
        front.wait_for("listening on")
        body = {"jsonrpc": "2.0", "method": "ask", "params": {"_agentId": "front"}, "id": 1}
        deadline = time.monotonic() + WAIT
        while True:  # until front's process has seen back's card
            reply = httpx.post(
                f"http://127.0.0.1:{port}/rpc",
                json=body,
                headers={"traceparent": TRACEPARENT},
                timeout=WAIT,
            ).json()
            if "result" in reply or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert reply == {"jsonrpc": "2.0", "result": "42", "id": 1}
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            if any(s["name"] == "answer" for s in receiver.of("back")) and any(
                s["name"] == "POST /rpc" for s in receiver.of("front")
            ):
                break
            time.sleep(0.1)
    finally:
        assert front.stop() == 0
        assert back.stop() == 0

    traced = [s for s in receiver.spans if s["trace_id"] == TRACE_ID]
    assert {s["path"] for s in traced} == {"/v1/traces"}
    by_id = {s["span_id"]: s for s in traced}
    [gateway] = [s for s in traced if s["name"] == "POST /rpc"]
    assert (gateway["service"], gateway["parent_id"]) == ("front", "00f067aa0ba902b7")
    [handled] = [s for s in traced if s["name"] == "answer" and s["service"] == "back"]
    # back's span is the child of front's sending of the call, in the other process.
    sent = by_id[handled["parent_id"]]
    assert (sent["service"], sent["name"]) == ("front", "answer")
    # ... which is the child of front's handling of ask, the child of the gateway's.
    asked = by_id[sent["parent_id"]]
    assert (asked["service"], asked["name"]) == ("front", "ask")
    assert by_id[by_id[asked["parent_id"]]["parent_id"]] is gateway

    assert back.process.stderr is not None
    lines = [json.loads(line) for line in back.process.stderr.read().decode().splitlines()]
    [logged] = [line for line in lines if line.get("message") == "answering"]
    assert logged["trace_id"] == TRACE_ID
    assert logged["span_id"] == handled["span_id"]
    assert (logged["agent_id"], logged["method"], logged["level"]) == ("back", "answer", "WARNING")
