"""Kafka request/response and publish cost beside raw aiokafka; same as ``a2a-bus bench kafka``.

python benchmarks/bench_kafka.py [bootstrap]    # default: $KAFKA_BOOTSTRAP_SERVERS
"""

import sys

from a2a_bus.bench.kafka import run

if __name__ == "__main__":
    report = run(bootstrap=sys.argv[1] if len(sys.argv) > 1 else None)
    report.print()
    raise SystemExit(0 if report.all_met else 1)
