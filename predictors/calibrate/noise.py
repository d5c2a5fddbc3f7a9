"""The measurement noise floor of each kernel class, in the held-out metric (GMAE).

A held-out sample's target is itself a noisy measurement, so even a perfect model has an
error: the noise floor, ``geomean |measured / true - 1|``.  It is estimated from repeated
measurements of the same thing, assuming errors independent and of equal spread:

* microbenchmarks (``isolated``): every few cases one is measured a second time, two
  cases later (a GEMM on newly allocated inputs: the allocation moves its time too); two
  independent measurements differ by sqrt(2) times one's error, so the floor is
  ``GMAE(first, second) / sqrt(2)``.
* in-context samples: the target is the median of the profiled steps' durations.  The
  floor is the pairwise spread between steps ``GMAE(step i, step j) / sqrt(2)`` (one step's
  error) times the median's shrink factor (0.67 for three normal draws).  Checked on this
  VM against two independent medians of three (six profiled steps, split in halves): the
  estimate from three steps is 0-25 % above the direct figure (docs/models/calibration.md).

The class's floor is the geometric mean over its samples (each isolated or in context),
like the GMAE it sits beside.  It is a lower bound: differences between processes and
scenarios that every step of one run shares do not show in the step-to-step spread.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ..utils.metrics import gmae

__all__ = ["median_shrink", "pair_floor", "steps_floor", "class_floor"]


@lru_cache(maxsize=16)
def median_shrink(n: int) -> float:
    """Spread of the median of ``n`` normal draws relative to one draw's (1 for n <= 2:
    a median of two is their mean, 0.71, but the profiler keeps medians of 3 here)."""
    if n <= 1:
        return 1.0
    draws = np.random.default_rng(0).standard_normal((200_000, n))
    return float(np.median(draws, axis=1).std())


def pair_floor(pairs) -> float | None:
    """Floor of one measurement from ``(first, second)`` independent measurements."""
    if len(pairs) < 3:
        return None
    a, b = np.array(pairs, np.float64).T
    return gmae(a, b) / math.sqrt(2.0)


def steps_floor(per_step) -> float | None:
    """Floor of a median over steps, from each sample's per-step durations (lists of
    equal length >= 2; others are skipped)."""
    rows = [s for s in per_step if s is not None and len(s) >= 2]
    if not rows:
        return None
    n = max(len(s) for s in rows)
    rows = np.array([s for s in rows if len(s) == n], np.float64)
    i, j = np.triu_indices(n, 1)
    return gmae(rows[:, i].ravel(), rows[:, j].ravel()) / math.sqrt(2.0) * median_shrink(n)


def class_floor(n_isolated: int, isolated: float | None, n_context: int,
                in_context: float | None) -> dict:
    """The class's floor (geomean over its samples) and its two parts.  A part without
    repeated measurements leaves the combined figure out (None)."""
    parts = [(n, f) for n, f in ((n_isolated, isolated), (n_context, in_context)) if n]
    total = None
    if parts and all(f is not None and f > 0 for _, f in parts):
        total = math.exp(sum(n * math.log(f) for n, f in parts) / sum(n for n, _ in parts))
    return {"gmae": total, "gmae_isolated": isolated, "gmae_in_context": in_context,
            "samples_isolated": int(n_isolated), "samples_in_context": int(n_context)}
