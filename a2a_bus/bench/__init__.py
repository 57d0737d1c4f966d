"""Benchmarks that measure a2a-bus against a baseline run in the same process.

Each module has ``run(quick: bool = False, **options) -> Report``. Figures are ratios
to the baseline, because absolute timings say more about the machine than the code.
"""

from __future__ import annotations

import os


def given_broker(bootstrap: str | None) -> str | None:
    """``bootstrap``, else ``KAFKA_BOOTSTRAP_SERVERS``; None (also for an empty one)
    when neither names a broker: the Kafka figures are then not measured."""
    return bootstrap or os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or None
