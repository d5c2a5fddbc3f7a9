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
of a new step of the same regime is 80 %.  ``python benchmarks/uncertainty.py`` checks the
coverage on each machine start with the range built from the others.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

__all__ = ["stated_range", "error_quantiles", "range_remark", "PUBLIC_GPU_ERRORS",
           "COVERAGE"]

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
    runs = by_bound.get(bound) or [e for v in by_bound.values() for e in v]
    errors = (own if regime == "calibrated" else []) + runs
    parts = []
    if regime == "calibrated":
        parts.append(f"{len(own)} held-out steps of the profile's own validation")
    if runs:
        parts.append(f"{len(runs)} measured {known.get('device', 'GPU')} steps "
                     f"({bound if bound in by_bound else 'all'}) of other runs predicted "
                     + ("with that GPU's measured profile" if regime == "calibrated" else
                        "with a profile fitted on public data, which has none of that GPU"))
    basis = " and ".join(parts)
    if len(errors) < MIN_ERRORS:
        return None
    lo, hi = error_quantiles(errors)
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
