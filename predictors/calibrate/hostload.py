"""How busy other processes kept the machine while something was measured.

On a shared VM the neighbours' load changes a measured step by tens of percent (two
vCPUs that share a core, caches and memory bandwidth), so calibration and validation
record it beside their figures.  Linux only (``/proc/stat``); None elsewhere.
"""
from __future__ import annotations

import os
import time

__all__ = ["OtherProcesses"]


def _busy_s() -> float | None:
    """CPU seconds every process on the machine has used so far, or None."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # less idle and iowait
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class OtherProcesses:
    """``with OtherProcesses() as load: ...`` then ``load.cpus``: the CPUs other processes
    kept busy on average during the block (this process's own CPU time excluded)."""

    cpus: float | None = None

    def __enter__(self) -> "OtherProcesses":
        self._busy, self._own, self._t = _busy_s(), time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        busy, span = _busy_s(), time.perf_counter() - self._t
        if busy is None or self._busy is None or span <= 0:
            self.cpus = None
            return
        own = time.process_time() - self._own
        self.cpus = round(max(0.0, (busy - self._busy) - own) / span, 2)
