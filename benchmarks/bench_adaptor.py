"""Adaptor throughput beside orjson.loads; same as ``a2a-bus bench adaptor``."""

from a2a_bus.bench.adaptor import run

if __name__ == "__main__":
    report = run()
    report.print()
    raise SystemExit(0 if report.all_met else 1)
