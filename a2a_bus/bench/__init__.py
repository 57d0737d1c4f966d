"""Benchmarks that measure a2a-bus against a baseline run in the same process.

Each module has ``run(quick: bool = False, **options) -> Report``. Figures are ratios
to the baseline, because absolute timings say more about the machine than the code.
"""
