"""Adaptor throughput: JSON-RPC bytes to CloudEvents, beside ``orjson.loads`` of the same bytes."""

from __future__ import annotations

from functools import partial

import orjson
from cloudevents.core.v1.event import CloudEvent

from a2a_bus.bench.report import Report, Row, per_call_us
from a2a_bus.protocol import Adaptor

#: Seed 002, section 5.1.1.
TOOLS_CALL = orjson.dumps(
    {
        "jsonrpc": "2.0",
        "method": "tools/call",
        "params": {"name": "weather", "city": "Shanghai", "_agentId": "weather-agent"},
        "id": "req-101",
    }
)
BATCH = b"[" + b",".join([TOOLS_CALL] * 100) + b"]"
TARGET = 8.0


def _naive_sdk(body: bytes) -> CloudEvent:
    """What a first attempt does: parse, then build a fully validated SDK event."""
    message = orjson.loads(body)
    attributes = {
        "id": message["id"],
        "source": "a2a-bus",
        "type": "org.apache.eventmesh.a2a.tools.call.req",
        "targetagent": message["params"]["_agentId"],
        "mcptype": "request",
        "a2amethod": message["method"],
        "protocol": "A2A",
    }
    return CloudEvent(attributes, message)


def run(quick: bool = False) -> Report:
    seconds = 0.05 if quick else 0.3
    adaptor = Adaptor()
    report = Report("Adaptor: JSON-RPC -> CloudEvents (lower is better)")
    for name, body in (("tools/call, single", TOOLS_CALL), ("tools/call, batch of 100", BATCH)):
        baseline = per_call_us(partial(orjson.loads, body), seconds)
        mapped = per_call_us(partial(adaptor.from_bytes, body), seconds)
        report.add(Row(name, mapped, "us", baseline, "orjson.loads", TARGET))
    naive = per_call_us(lambda: _naive_sdk(TOOLS_CALL), seconds)
    baseline = per_call_us(lambda: orjson.loads(TOOLS_CALL), seconds)
    report.add(Row("naive: loads + validated SDK event", naive, "us", baseline, "orjson.loads"))
    return report


if __name__ == "__main__":
    run().print()
