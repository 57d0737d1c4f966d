"""Optionally keep the bus's threads on one CPU.

The loop thread and the agents' actor threads take turns holding the GIL, so
they never run Python at the same time; spread over several CPUs, each
hand-off between them also moves the woken thread's working set from one
CPU's cache to another's. On a 2-CPU machine the in-memory round trip took
~90-110 us spread out and ~44 us with the bus's threads on one CPU (the pykka
``ask`` baseline: 22-30 us either way). Kafka throughput did not change.

Pinned threads are also scheduled as batch work (``SCHED_BATCH``), so a thread
woken by another does not preempt it. On one CPU the waker holds the GIL the
woken thread needs: preempted, it is switched out and back in for nothing (six
context switches per round trip instead of two, ~3.5 us of ~33 us).

Off by default: an agent that runs GIL-releasing native code (numpy,
compression) in several replicas at once would lose the other CPUs.
``A2A_PIN_CPU=auto`` (one of the allowed CPUs, spread by process id) or a CPU
number turns it on; so does ``Bus(..., pin_cpu=...)``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Callable

ENV = "A2A_PIN_CPU"
OFF = ("", "off", "no", "none")


def _cpu_reader() -> Callable[[], int] | None:
    # os has no sched_getcpu before Python 3.13; the C library has it on Linux.
    try:
        reader: Callable[[], int] = ctypes.CDLL(None).sched_getcpu
        return reader
    except (OSError, AttributeError):
        return None


_sched_getcpu = _cpu_reader()


def current_cpu() -> int | None:
    """The CPU the calling thread runs on now; None where that cannot be read."""
    if _sched_getcpu is None:
        return None
    cpu = _sched_getcpu()
    return cpu if cpu >= 0 else None


def choose_cpu(setting: int | str | None = None) -> int | None:
    """The CPU ``setting`` (or ``A2A_PIN_CPU`` when None) names, or None for off.

    ``"auto"`` picks one of the CPUs this process may use, by process id, so
    several bus processes on one machine spread out.
    """
    if setting is None:
        setting = os.environ.get(ENV, "")
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if isinstance(setting, str):
        text = setting.strip().lower()
        if text in OFF:
            return None
        if text == "auto":
            return allowed[os.getpid() % len(allowed)] if allowed else None
        try:
            setting = int(text)
        except ValueError:
            raise ValueError(
                f"{ENV}={setting!r}: expected auto, off or a CPU number in {allowed}"
            ) from None
    if setting not in allowed:
        raise ValueError(f"{ENV}={setting!r}: this process may run on CPUs {allowed} only")
    return setting


def pin_current_thread(setting: int | str | None = None) -> int | None:
    """Keep the calling thread, and the threads it starts from now on, on the CPU
    :func:`choose_cpu` names, scheduled as batch work (see the module docstring);
    that CPU, or None when pinning is off (or the platform cannot pin threads)."""
    cpu = choose_cpu(setting)
    if cpu is None or not hasattr(os, "sched_setaffinity"):
        return None
    os.sched_setaffinity(0, {cpu})  # 0: the calling thread, on Linux
    _wake_without_preempting()
    return cpu


def _wake_without_preempting() -> None:
    """Make the calling thread (and those it starts) ``SCHED_BATCH``: woken, it
    waits for the running thread to block rather than preempting it. Only from
    the normal policy: a real-time thread keeps its priority."""
    if not hasattr(os, "SCHED_BATCH") or os.sched_getscheduler(0) != os.SCHED_OTHER:
        return
    with contextlib.suppress(OSError):  # refused by a sandbox: pinned all the same
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
