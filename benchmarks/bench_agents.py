"""Spawn time, memory, idle CPU, Kafka consumers and connections at 10 to 10,000 agents;
same as ``a2a-bus bench agents``.

python benchmarks/bench_agents.py [bootstrap]    # Kafka too: bootstrap or $KAFKA_BOOTSTRAP_SERVERS
"""

import sys

from a2a_bus.bench.agents import run

if __name__ == "__main__":
    report = run(bootstrap=sys.argv[1] if len(sys.argv) > 1 else None)
    report.print()
    raise SystemExit(0 if report.all_met else 1)
