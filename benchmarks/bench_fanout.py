"""Pub/sub fan-out in memory by number of subscribers; same as ``a2a-bus bench fanout``."""

from a2a_bus.bench.fanout import run

if __name__ == "__main__":
    report = run()
    report.print()
    raise SystemExit(0 if report.all_met else 1)
