"""Agent -> caller streams: chunks per second by stream length, beside a same-run
baseline, in memory and on Kafka; same as ``a2a-bus bench streams``.

python benchmarks/bench_streams.py [bootstrap]    # Kafka too: bootstrap or $KAFKA_BOOTSTRAP_SERVERS
"""

import sys

from a2a_bus.bench.streams import run

if __name__ == "__main__":
    report = run(bootstrap=sys.argv[1] if len(sys.argv) > 1 else None)
    report.print()
    raise SystemExit(0 if report.all_met else 1)
