"""Prediction error, one way everywhere.

The headline figure is the geometric mean of the absolute relative errors
``|predicted / measured - 1|`` (GMAE, as the DLRM performance-model papers and
ml_perf_model report it).  An error below :data:`ERROR_FLOOR` (0.01 %) counts as the
floor, so that one exact prediction does not pull the geomean to zero.  A geomean hides
the tail, so every report prints it beside the mean and the worst error
(:func:`summarize`, :func:`format_summary`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

import numpy as np

__all__ = ["ERROR_FLOOR", "relative_errors", "geomean_abs", "gmae", "ErrorSummary",
           "summarize", "format_summary"]

ERROR_FLOOR = 1e-4


def relative_errors(predicted, measured) -> np.ndarray:
    """``predicted / measured - 1`` for every pair whose measurement is positive."""
    p, m = np.asarray(predicted, dtype=float), np.asarray(measured, dtype=float)
    ok = m > 0
    return p[ok] / m[ok] - 1.0


def geomean_abs(errors: Iterable[float | None], floor: float = ERROR_FLOOR) -> float:
    """The geometric mean of ``|error|`` (fractions; None skipped; NaN when empty)."""
    e = np.abs(np.asarray([x for x in errors if x is not None], dtype=float))
    if e.size == 0:
        return math.nan
    return float(np.exp(np.mean(np.log(np.maximum(e, floor)))))


def gmae(predicted, measured) -> float:
    """The geomean absolute relative error of paired predictions and measurements."""
    return geomean_abs(relative_errors(predicted, measured))


@dataclass(frozen=True)
class ErrorSummary:
    """Relative errors, summarized: fractions (0.05 is 5 %); ``worst`` keeps its sign."""

    n: int
    geomean: float
    mean: float
    worst: float

    def to_json(self) -> dict:
        return {"n": self.n, "geomean": self.geomean, "mean": self.mean, "worst": self.worst}


def summarize(errors: Iterable[float | None]) -> ErrorSummary:
    """Geomean and mean of ``|error|``, and the error of largest magnitude, signed."""
    e = np.asarray([x for x in errors if x is not None], dtype=float)
    if e.size == 0:
        return ErrorSummary(0, math.nan, math.nan, math.nan)
    return ErrorSummary(int(e.size), geomean_abs(e), float(np.mean(np.abs(e))),
                        float(e[np.argmax(np.abs(e))]))


def format_summary(s: ErrorSummary) -> str:
    """``geomean 5.1 %, mean 6.0 %, worst +47.0 % (10 cases)``."""
    if s.n == 0:
        return "no cases"
    return (f"geomean {100 * s.geomean:.1f} %, mean {100 * s.mean:.1f} %, "
            f"worst {100 * s.worst:+.1f} % ({s.n} case{'s' if s.n != 1 else ''})")
