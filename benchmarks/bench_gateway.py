"""Gateway throughput beside a bare Starlette endpoint; same as ``a2a-bus bench gateway``."""

from a2a_bus.bench.gateway import run

if __name__ == "__main__":
    report = run()
    report.print()
    raise SystemExit(0 if report.all_met else 1)
