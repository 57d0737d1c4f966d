"""Trace context and spans per request; same as ``a2a-bus bench tracing``."""

import os

from a2a_bus.bench.tracing import run

if __name__ == "__main__":
    report = run(bootstrap=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    report.print()
    raise SystemExit(0 if report.all_met else 1)
