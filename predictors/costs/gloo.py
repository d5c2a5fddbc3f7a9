"""Collectives among CPU processes of one host (gloo), for ranks of ``local-cpu``.

With a profile that measured them (``calibrate --device cpu``: all-reduce, all-to-all,
all-gather and reduce-scatter among 2-4 processes, 1 KiB-16 MiB), a collective's time
is read off those points made monotone in the message size, linearly between them, and
beyond the largest at its rate.  Without one, a latency-bandwidth model with gloo-over-loopback
figures stands in, and the prediction's notes say so.  A reduce-scatter runs as an
all-reduce of the whole buffer (gloo has none), as the measured runs do; profiles that
time it as the ranks run it (its copies included) price it so.
"""
from __future__ import annotations

import functools

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


@functools.lru_cache(maxsize=64)
def _monotone(points: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Measured (bytes, us) points, sorted, as a time that never falls as the message
    grows (isotonic regression): on loopback TCP a few sizes catch a stall of a few
    milliseconds in one sweep and not in the next, and a larger message never takes
    less time."""
    from sklearn.isotonic import IsotonicRegression

    x = np.array([p[0] for p in points])
    y = np.array([p[1] for p in points])
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    return x, IsotonicRegression().fit(x, y).predict(x)


def gloo_time_us(kind: str, nbytes: float, ranks: int, measured: dict | None = None
                 ) -> tuple[float, str]:
    """``(microseconds, how)`` of one ``kind`` collective of ``nbytes`` among ``ranks``
    processes; ``measured``: a profile's ``collectives["gloo"]``."""
    base = _AS_MEASURED.get(kind)
    if base is None:
        raise ValueError(f"no CPU model of the {kind} collective")
    table = (measured or {}).get(str(ranks)) or {}
    if table.get(kind):   # measured as itself (a reduce-scatter: its all-reduce and copies)
        base = kind
    points = table.get(base)
    if points and len(points) >= 2:
        x, y = _monotone(tuple((float(p[0]), float(p[1])) for p in points))
        if nbytes <= x[-1]:
            us = float(np.interp(nbytes, x, y))
        else:   # beyond the largest message: at its rate
            us = float(y[-1] * nbytes / x[-1])
        return us, f"gloo {base.replace('_', '-')}, measured on this host ({ranks} ranks)"
    steps = {"all_reduce": 2 * (ranks - 1)}.get(base, ranks - 1)
    us = (DEFAULT_LATENCY_US * max(1, steps) / max(1, ranks - 1)
          + _RING[base](ranks) * nbytes / DEFAULT_BYTES_PER_US)
    return us, f"gloo {base.replace('_', '-')}, default model (not measured on this host)"
