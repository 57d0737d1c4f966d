"""Agent-loop cost per turn beside tools called by hand; same as ``a2a-bus bench llm``.

python benchmarks/bench_llm_loop.py [--quick]
"""

import sys

from a2a_bus.bench.llm import run

if __name__ == "__main__":
    report = run(quick="--quick" in sys.argv)
    report.print()
    raise SystemExit(0 if report.all_met else 1)
