"""Sweep one setting of a scenario: the predicted step for each value, side by side.

What a capacity planner asks next after one prediction: how does throughput move with the
batch size, on which platform is it fastest, what does bf16 buy, what do Adam's moments
cost in time and memory?  Each value is a full
prediction (all ranks and collectives on multi-GPU platforms); a value that cannot run
(tables that do not fit, a wiring error) is reported in its row instead of stopping the
sweep.  Captured graphs are reused where the values share them (:func:`predictors.
predict.predict` keeps recent captures).
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Callable

from ..engine.predict import predict
from ..profiles import ProfileError
from ..scenario.format import ScenarioError, validate_scenario
from ..utils.progress import check_cancelled

__all__ = ["SWEEPABLE", "SweepRow", "SweepResult", "sweep", "parse_values"]

# name -> (section, key, how a value is read from text, what it means)
SWEEPABLE = {
    "batch_size": ("training", "batch_size", int, "global batch size"),
    "platform": ("platform", "preset", str, "platform preset"),
    "dtype": ("training", "dtype", str, "training dtype"),
    "optimizer": ("training", "optimizer", str, "optimizer"),
    "input_pipeline": ("training", "input_pipeline", str,
                       "input pipeline (resident, or TorchRec's copy and input distribution)"),
}


@dataclass
class SweepRow:
    """One value's prediction, or why there is none."""

    value: object
    iteration_ms: float | None = None
    records_per_s: float | None = None
    device_active_ms: float | None = None
    exposed_comm_ms: float | None = None
    ranks: int = 0
    peak_memory_bytes: int | None = None   # the highest rank's
    fits: bool | None = None               # None: the device's memory is unknown
    error: str = ""
    prediction: object = None  # the Prediction (not in JSON)

    def to_json(self) -> dict:
        return {"value": self.value, "iteration_ms": self.iteration_ms,
                "records_per_s": self.records_per_s,
                "device_active_ms": self.device_active_ms,
                "exposed_comm_ms": self.exposed_comm_ms, "ranks": self.ranks,
                "peak_memory_bytes": self.peak_memory_bytes, "fits": self.fits,
                "error": self.error}


@dataclass
class SweepResult:
    scenario_name: str
    param: str
    rows: list[SweepRow] = field(default_factory=list)
    elapsed_s: float = 0.0

    def best(self) -> SweepRow | None:
        """The value with the highest throughput among those that fit in memory."""
        ok = [r for r in self.rows if r.records_per_s and r.fits is not False]
        return max(ok, key=lambda r: r.records_per_s) if ok else None

    def to_json(self) -> dict:
        best = self.best()
        return {"scenario": self.scenario_name, "param": self.param,
                "rows": [r.to_json() for r in self.rows],
                "best": best.value if best is not None else None,
                "elapsed_s": round(self.elapsed_s, 4)}


def parse_values(param: str, text: str) -> list:
    """``"256, 512,1024"`` -> ``[256, 512, 1024]`` for ``param``; a ValueError names the
    value that is not one."""
    if param not in SWEEPABLE:
        raise ValueError(f"cannot sweep {param!r} (choose from {', '.join(SWEEPABLE)})")
    kind = SWEEPABLE[param][2]
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            out.append(kind(part))
        except ValueError:
            what = "a whole number" if kind is int else kind.__name__
            raise ValueError(f"{param}: {part!r} is not {what}") from None
    if not out:
        raise ValueError(f"{param}: no values given")
    return out


def sweep(scenario: dict, param: str, values: list, *, profile=None, overheads=None,
          progress: Callable[[float, str], None] | None = None,
          cancelled: Callable[[], bool] | None = None) -> SweepResult:
    """Predict ``scenario`` with ``param`` set to each of ``values`` (in order).

    ``profile``/``overheads`` as for :func:`~predictors.engine.predict.predict`; a sweep over
    platforms ignores ``profile`` (each platform takes its own device's profile)."""

    if param not in SWEEPABLE:
        raise ValueError(f"cannot sweep {param!r} (choose from {', '.join(SWEEPABLE)})")
    section, key, _, _ = SWEEPABLE[param]
    base = validate_scenario(scenario)
    t0 = time.perf_counter()
    result = SweepResult(base["name"], param)
    n = len(values)
    for i, value in enumerate(values):
        check_cancelled(cancelled, "sweep")
        doc = copy.deepcopy(base)
        if section == "platform":
            threads = doc["platform"].get("threads")
            doc["platform"] = {"preset": value}
            if value == "local-cpu" and threads:
                doc["platform"]["threads"] = threads
        else:
            doc[section][key] = value
        if progress is not None:
            progress(i / n, f"{param} = {value} ({i + 1} of {n})")

        def inner(f, stage, i=i):
            if progress is not None:
                progress((i + f) / n, f"{param} = {value} ({i + 1} of {n}): {stage}")

        row = SweepRow(value)
        try:
            pred = predict(doc, profile=None if section == "platform" else profile,
                           overheads=overheads, progress=inner, cancelled=cancelled)
        except (ScenarioError, ProfileError) as exc:
            row.error = str(exc)
        else:
            slowest = max(pred.per_rank, key=lambda r: r["iteration_ms"])
            row.iteration_ms = pred.iteration_ms
            row.records_per_s = doc["training"]["batch_size"] / (pred.iteration_ms / 1e3)
            row.device_active_ms = slowest["device_active_ms"]
            row.exposed_comm_ms = slowest.get("exposed_comm_ms", 0.0)
            row.ranks = len(pred.per_rank)
            peaks = [r["peak_memory_bytes"] for r in pred.per_rank if "peak_memory_bytes" in r]
            row.peak_memory_bytes = max(peaks) if peaks else None
            fits = [r["memory"]["fits"] for r in pred.per_rank if "fits" in r.get("memory", {})]
            row.fits = all(fits) if fits else None
            row.prediction = pred
        result.rows.append(row)
    result.elapsed_s = time.perf_counter() - t0
    if progress is not None:
        progress(1.0, "done")
    return result
