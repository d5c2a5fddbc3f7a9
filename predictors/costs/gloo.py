"""Collectives among CPU processes of one host (gloo), for ranks of ``local-cpu``.

With a profile that measured them (``calibrate --device cpu``: all-reduce, all-to-all
and all-gather among 2-4 processes, 1 KiB-16 MiB), a collective's time is read off
those points, linearly in the message size between them and beyond the largest (the
bandwidth term).  Without one, a latency-bandwidth model with gloo-over-loopback
figures stands in, and the prediction's notes say so.  A reduce-scatter runs as an
all-reduce of the whole buffer (gloo has none), as the measured runs do.
"""
from __future__ import annotations

import numpy as np

__all__ = ["gloo_time_us", "DEFAULT_LATENCY_US", "DEFAULT_BYTES_PER_US"]

# gloo over loopback TCP, one host: a few hundred microseconds per call and about
# 1 GB/s per rank (what measure_collectives reports on the project's 2-core VM)
DEFAULT_LATENCY_US = 250.0
DEFAULT_BYTES_PER_US = 1000.0

_AS_MEASURED = {"all_reduce": "all_reduce", "reduce_scatter": "all_reduce",
                "all_to_all": "all_to_all", "all_gather": "all_gather"}
# the share of the message each rank moves in a ring (all-reduce: reduce-scatter then
# all-gather)
_RING = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
         "all_gather": lambda n: (n - 1) / n}


def gloo_time_us(kind: str, nbytes: float, ranks: int, measured: dict | None = None
                 ) -> tuple[float, str]:
    """``(microseconds, how)`` of one ``kind`` collective of ``nbytes`` among ``ranks``
    processes; ``measured``: a profile's ``collectives["gloo"]``."""
    base = _AS_MEASURED.get(kind)
    if base is None:
        raise ValueError(f"no CPU model of the {kind} collective")
    points = ((measured or {}).get(str(ranks)) or {}).get(base)
    if points and len(points) >= 2:
        x = np.array([p[0] for p in points], float)
        y = np.array([p[1] for p in points], float)
        order = np.argsort(x)
        x, y = x[order], y[order]
        if nbytes <= x[-1]:
            us = float(np.interp(nbytes, x, y))
        else:   # beyond the largest message: its bandwidth goes on
            slope = (y[-1] - y[-2]) / (x[-1] - x[-2]) if x[-1] > x[-2] else 0.0
            us = float(y[-1] + max(slope, 0.0) * (nbytes - x[-1]))
        return us, f"gloo {base.replace('_', '-')}, measured on this host ({ranks} ranks)"
    steps = {"all_reduce": 2 * (ranks - 1)}.get(base, ranks - 1)
    us = (DEFAULT_LATENCY_US * max(1, steps) / max(1, ranks - 1)
          + _RING[base](ranks) * nbytes / DEFAULT_BYTES_PER_US)
    return us, f"gloo {base.replace('_', '-')}, default model (not measured on this host)"
