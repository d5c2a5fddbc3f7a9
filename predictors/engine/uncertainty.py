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
residual, and the range is that of a new start's shift (Student's t over the starts
seen: the spread of one more draw) plus a residual (:func:`start_quantiles`).  A
calibrated profile's own validation counts as one more start.
``python benchmarks/uncertainty.py`` checks the coverage on each machine start with the
range built from the others.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

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
    """:func:`error_quantiles` of errors grouped by machine start (each group one start).

    On ``log(1 + error)`` (so the range stays positive): each error is its start's shift
    (the start's median) plus a residual; a new start's shift follows Student's t with
    ``k - 1`` degrees of freedom around the ``k`` starts' mean shift, scaled by their
    standard deviation times ``sqrt(1 + 1/k)`` (the predictive spread of one more start),
    and each residual is added to it.  With one start, its errors' own quantiles.
    ValueError when there are no errors."""
    groups = [np.log1p(np.asarray(g, dtype=float)) for g in map(list, starts) if g]
    if not groups:
        raise ValueError("start_quantiles: no errors")
    if len(groups) == 1:
        lo, hi = error_quantiles(groups[0])
    else:
        from scipy.stats import t  # deferred: scipy

        shifts = np.array([np.median(g) for g in groups])
        residuals = np.concatenate([g - m for g, m in zip(groups, shifts)])
        k = len(shifts)
        scale = shifts.std(ddof=1) * np.sqrt(1.0 + 1.0 / k)
        grid = t.ppf((np.arange(SHIFT_GRID) + 0.5) / SHIFT_GRID, df=k - 1)
        lo, hi = error_quantiles(((shifts.mean() + scale * grid)[:, None]
                                  + residuals[None, :]).ravel())
    return float(np.expm1(lo)), float(np.expm1(hi))


def _public_errors(path: Path) -> dict:
    """The errors file at ``path`` ({} when it is missing or unreadable), read again
    when it changes."""
    try:
        st = path.stat()
    except OSError:
        return {}
    return _read_errors(path, st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=8)
def _read_errors(path: Path, _mtime_ns: int, _size: int) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _calibrated_errors(profile) -> list[float]:
    rows = ((profile.validation or {}).get("end_to_end") or {}).get("rows") or []
    return [float(r["error"]) for r in rows
            if r.get("error") is not None and np.isfinite(r["error"])]


def _table_groups(known: dict, regime: str, bound: str) -> tuple[list[list[float]], str]:
    """The table's errors of ``regime``, one group per machine start: those of verdict
    ``bound`` where at least two starts have steps of it, else all; and which verdict
    they are (``bound`` or ``"all"``)."""
    per_start = list((known.get("errors_per_start") or {}).get(regime, {}).values())
    groups = [list(v.get(bound) or []) for v in per_start]
    if sum(1 for g in groups if g) >= 2:
        return groups, bound
    return [[e for g in v.values() for e in g] for v in per_start], "all"


def stated_range(iteration_ms: float, profile, device: str, bound: str,
                 table: Path = PUBLIC_GPU_ERRORS) -> dict | None:
    """``{"iteration_ms_low", "iteration_ms_high", "basis"}`` for a prediction of
    ``iteration_ms`` made with ``profile`` (None: the datasheet roofline) on ``device``
    whose verdict is ``bound``; None where no validation speaks for it."""
    own = _calibrated_errors(profile) if profile is not None else []
    same_device = profile is not None and (device == "cpu" or profile.device.name == device)
    regime = "calibrated" if len(own) >= MIN_ERRORS and same_device else "public"
    known = _public_errors(table) if device != "cpu" else {}
    if regime == "calibrated" and known.get("device") != device:
        known = {}   # other runs of this very GPU, or none
    groups, kind = _table_groups(known, regime, bound)
    runs = [e for g in groups for e in g]
    mine = own if regime == "calibrated" else []
    if len(mine) + len(runs) < MIN_ERRORS:
        return None
    parts = []
    if mine:
        parts.append(f"{len(mine)} held-out steps of the profile's own validation")
    if runs:
        starts = sum(1 for g in groups if g)
        parts.append(f"{len(runs)} measured {known.get('device', 'GPU')} steps ({kind}) of "
                     + (f"{starts} machine starts" if starts > 1 else "other runs")
                     + " predicted "
                     + ("with that GPU's measured profile" if regime == "calibrated" else
                        "with a profile fitted on public data, which has none of that GPU"))
    lo, hi = start_quantiles([mine] + groups)
    # measured = predicted / (1 + error): the largest error gives the lowest measurement
    return {"iteration_ms_low": iteration_ms / (1.0 + hi),
            "iteration_ms_high": iteration_ms / (1.0 + lo), "basis": " and ".join(parts)}


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
