"""The CPUs this process may run on: what a default count of parallel work (compiles, LightGBM's
threads) is taken from."""

from __future__ import annotations

import os


def available_cpus() -> int:
    """The CPUs this process may run on: its affinity mask, not the machine's core count (a
    container, ``taskset`` or a batch scheduler gives fewer). ``os.process_cpu_count`` where Python
    has it (3.13: it also honours ``PYTHON_CPU_COUNT``), else the affinity mask, else the cores."""
    counted = getattr(os, "process_cpu_count", None)
    if counted is not None:
        return max(1, counted() or 1)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity on this platform
        return os.cpu_count() or 1
