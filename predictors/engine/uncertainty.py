"""The stated range of a prediction: where 80 % of measured steps fall, from validations.

A prediction is as good as its profile was on steps it never saw.  The range comes from
the errors (``predicted / measured - 1``) of held-out measured steps of the same regime:

- **calibrated**: the profile's own end-to-end validation (``validation.end_to_end``:
  random scenarios measured on the profile's device and predicted by it, held out of its
  fit; ``calibrate`` records them), and on a GPU the H200's measured steps of the machine
  starts its overheads do not come from, predicted with its measured profile;
- **public-data GPU profile** (fitted, or a datasheet profile): the errors of the
  project's measured H200 steps (every machine start) predicted with the H200 profile
  fitted on public data, which holds nothing of the H200 (an unseen GPU), per verdict
  (host-, device-bound or mixed), from ``resources/uncertainty/gpu_public.json``
  (``python benchmarks/uncertainty.py --fit`` writes it, per machine start).

With ``n`` errors, the range lies between their order statistics at ``0.1 (n + 1)`` and
``0.9 (n + 1)`` (interpolated; NumPy's ``weibull`` quantiles), whose expected coverage
of a new step of the same regime is 80 %.  Where the errors come from several machine
starts, a start's host moves its steps together, and a new start may move them further
than the starts seen: each error is its start's shift (the start's median) plus a
residual, and the range is that of a new start's shift (normal, with the shifts' mean
and the spread of one more draw from them) plus a residual (:func:`start_quantiles`).  ``python benchmarks/uncertainty.py`` checks the
coverage on each machine start with the range built from the others.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from statistics import NormalDist

import numpy as np

__all__ = ["stated_range", "error_quantiles", "start_quantiles", "range_remark",
           "PUBLIC_GPU_ERRORS", "COVERAGE"]

COVERAGE = 0.8
MIN_ERRORS = 6
PUBLIC_GPU_ERRORS = (Path(__file__).resolve().parents[2] / "resources" / "uncertainty"
                     / "gpu_public.json")


def error_quantiles(errors) -> tuple[float, float]:
    """The 10th and 90th percentiles of ``errors`` (predicted / measured - 1) whose
    expected coverage of a new error is 80 %."""
    e = np.asarray(list(errors), dtype=float)
    tail = (1.0 - COVERAGE) / 2
    lo, hi = np.quantile(e, [tail, 1.0 - tail], method="weibull")
    return float(lo), float(hi)


SHIFT_GRID = 64   # points of a new start's shift distribution


def start_quantiles(starts) -> tuple[float, float]:
    """:func:`error_quantiles` of errors grouped by machine start (each group one start):
    a new start's shift is normal around the ``k`` starts' median errors, with their
    standard deviation times ``sqrt(1 + 1/k)`` (one more draw, its mean estimated), and
    each residual (an error less its start's median) is added to it.  With fewer than
    two starts, the errors' own quantiles."""
    groups = [np.asarray(list(g), dtype=float) for g in starts if len(g)]
    if len(groups) < 2:
        return error_quantiles(np.concatenate(groups) if groups else [])
    shifts = np.array([np.median(g) for g in groups])
    residuals = np.concatenate([g - m for g, m in zip(groups, shifts)])
    k = len(shifts)
    scale = shifts.std(ddof=1) * np.sqrt(1.0 + 1.0 / k)
    grid = np.array([NormalDist().inv_cdf((i + 0.5) / SHIFT_GRID) for i in range(SHIFT_GRID)])
    return error_quantiles(((shifts.mean() + scale * grid)[:, None]
                            + residuals[None, :]).ravel())


@lru_cache(maxsize=4)
def _public_errors(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _calibrated_errors(profile) -> list[float]:
    rows = ((profile.validation or {}).get("end_to_end") or {}).get("rows") or []
    return [float(r["error"]) for r in rows if r.get("error") is not None]


def stated_range(iteration_ms: float, profile, device: str, bound: str,
                 table: Path = PUBLIC_GPU_ERRORS) -> dict | None:
    """``{"iteration_ms_low", "iteration_ms_high", "basis"}`` for a prediction of
    ``iteration_ms`` made with ``profile`` (None: the datasheet roofline) on ``device``
    whose verdict is ``bound``; None where no validation speaks for it."""
    own = _calibrated_errors(profile) if profile is not None else []
    same_device = profile is not None and (device == "cpu" or profile.device.name == device)
    known = _public_errors(table) if device != "cpu" else {}
    regime = "calibrated" if len(own) >= MIN_ERRORS and same_device else "public"
    by_bound = known.get("errors", {}).get(regime, {})
    # per machine start, its errors of this verdict (all of its errors where too few
    # starts have steps of it)
    per_start = list((known.get("errors_per_start") or {}).get(regime, {}).values())
    groups = [v.get(bound) or [] for v in per_start]
    kind = bound if bound in by_bound else "all"
    if sum(1 for g in groups if g) < 2:
        groups, kind = [[e for g in v.values() for e in g] for v in per_start], "all"
    runs = [e for g in groups for e in g]
    if not per_start:   # a table without starts: its pooled errors
        runs = by_bound.get(bound) or [e for v in by_bound.values() for e in v]
        groups = [runs]
    own_group = own if regime == "calibrated" else []
    errors = own_group + runs
    parts = []
    if regime == "calibrated":
        parts.append(f"{len(own)} held-out steps of the profile's own validation")
    if runs:
        starts = sum(1 for g in groups if g)
        parts.append(f"{len(runs)} measured {known.get('device', 'GPU')} steps ({kind}) of "
                     + (f"{starts} machine starts" if starts > 1 else "other runs")
                     + " predicted "
                     + ("with that GPU's measured profile" if regime == "calibrated" else
                        "with a profile fitted on public data, which has none of that GPU"))
    basis = " and ".join(parts)
    if len(errors) < MIN_ERRORS:
        return None
    lo, hi = start_quantiles([own_group] + groups)
    # measured = predicted / (1 + error): the largest error gives the lowest measurement
    return {"iteration_ms_low": iteration_ms / (1.0 + hi),
            "iteration_ms_high": iteration_ms / (1.0 + lo), "basis": basis}


def range_remark(iteration_ms: float, low: float | None, high: float | None) -> str:
    """What to say when the range leaves out the prediction itself (its validation's
    steps all ran faster, or all slower, than predicted), else ``""``."""
    if low is None or high is None:
        return ""
    if high < iteration_ms:
        return "steps like it ran faster than predicted"
    if low > iteration_ms:
        return "steps like it ran slower than predicted"
    return ""
