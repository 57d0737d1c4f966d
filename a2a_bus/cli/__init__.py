"""The ``a2a-bus`` command line: :func:`main` is its console-script entry point.

This module imports nothing of the bus at import time, so that Ctrl-C while the
command's modules load (about half a second) ends it quietly; the command itself
is :mod:`a2a_bus.cli.console`.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Console-script entry point: load the command, then run it."""
    try:
        from a2a_bus.cli.console import run  # the load Ctrl-C may cut short
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        raise SystemExit(130) from None
    run()
