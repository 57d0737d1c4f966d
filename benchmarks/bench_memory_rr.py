"""In-memory request/response beside a raw pykka ``ask``; same as ``a2a-bus bench memory``.

python benchmarks/bench_memory_rr.py [--quick]
"""

import sys

from a2a_bus.bench.memory import run

if __name__ == "__main__":
    report = run(quick="--quick" in sys.argv)
    report.print()
    raise SystemExit(0 if report.all_met else 1)
