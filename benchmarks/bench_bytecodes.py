"""Python bytecodes per Kafka request, counted by package for raw aiokafka, the floor,
the bare transport and the bus; same as ``a2a-bus bench bytecodes``.

python benchmarks/bench_bytecodes.py [bootstrap]    # or $KAFKA_BOOTSTRAP_SERVERS
"""

import sys

from a2a_bus.bench.bytecodes import run

if __name__ == "__main__":
    report = run(bootstrap=sys.argv[1] if len(sys.argv) > 1 else None)
    report.print()
    raise SystemExit(0 if report.all_met else 1)
