"""``calibrate``: build a measured device profile of the local CPU within a time budget.

1. The profiler's own per-event cost (so it can be removed from every sample).
2. Profiled training steps of random DLRM and transformer scenarios: every op's measured
   duration beside its captured shapes, and the CPU gaps between ops (overheads).
3. Microbenchmark sweeps for GEMM (addmm, mm, bmm) and EmbeddingBag forward/backward with
   uniform and Zipf indices.
4. One learned model per op class (MLP or boosted trees, whichever validates better),
   overheads per op name and phase, provenance, and the held-out error figures.
"""
from __future__ import annotations

import datetime
import platform as _platform
import socket
import statistics
import time
from collections import defaultdict
from typing import Callable

import numpy as np
import torch

from . import CalibrationCancelled
from ..devices.roofline import VIEW_OPS
from ..devices.specs import local_cpu_spec
from ..profiles import DeviceProfile, OpOverheads, OverheadTable
from .features import MODEL_CLASSES, model_class
from .microbench import embedding_cases, gemm_cases, profiler_overhead_us, run_case
from .models import fit_class_model
from .profiling import profile_step
from .samples import random_dlrm, random_transformer

__all__ = ["calibrate_cpu", "CalibrationCancelled"]


def _overheads(steps) -> OverheadTable:
    """Median CPU gap before each op, per ``phase:name`` and per name; the views and the
    Python between compute ops are inside these gaps, so views themselves cost nothing."""
    by_ctx, by_key, by_name, everything = (defaultdict(list), defaultdict(list),
                                           defaultdict(list), [])
    for step in steps:
        for prev, r in zip(step.records, step.records[1:]):
            node, gap = r["node"], r["gap_us"]
            key = f"{node['phase']}:{node['name']}"
            by_ctx[f"{key}<{prev['node']['name']}"].append(gap)
            by_key[key].append(gap)
            by_name[node["name"]].append(gap)
            everything.append(gap)

    def entry(gaps):
        return OpOverheads(statistics.median(gaps) * 1e-6, 0.0, 0.0, 0.0, 0.0, len(gaps))

    # Views and metadata ops run inside the gaps measured before compute ops.
    per_op = {f"aten::{name}": OpOverheads(0.0, 0.0, 0.0, 0.0, 0.0) for name in VIEW_OPS}
    for table in (by_name, by_key, by_ctx):
        per_op.update({k: entry(v) for k, v in table.items() if len(v) >= 3})
    default = entry(everything) if everything else OpOverheads(2e-6, 0, 0, 0, 0)
    tails = [s.tail_us for s in steps]
    return OverheadTable(default, per_op, 0.0, "measured: gaps between ops in profiled "
                         "training steps", statistics.median(tails) * 1e-6 if tails else 0.0)


def calibrate_cpu(threads: int = 1, budget_s: float = 600.0, seed: int = 0,
                  progress: Callable[[float, str], None] | None = None,
                  cancelled: Callable[[], bool] | None = None) -> DeviceProfile:
    """Measure this CPU with ``threads`` intra-op threads; return its profile."""
    t_start = time.perf_counter()
    deadline = t_start + budget_s
    rng = np.random.default_rng(seed)
    old_threads = torch.get_num_threads()

    def tick(stage: str):
        if cancelled is not None and cancelled():
            raise CalibrationCancelled(stage)
        if progress is not None:
            used = (time.perf_counter() - t_start) / budget_s
            progress(min(0.99, used), stage)

    def left() -> float:
        return deadline - time.perf_counter()

    torch.set_num_threads(threads)
    try:
        tick("profiler overhead")
        per_event = profiler_overhead_us()
        # Budget split: training steps first (they cover every op class), then sweeps.
        steps, samples = [], defaultdict(list)
        makers = [random_dlrm, random_transformer]
        i = 0
        while left() > 0.55 * budget_s or i < 2:
            doc = makers[i % 2](rng, threads)
            tick(f"profiling {doc['name']}")
            step = profile_step(doc, seed=i, per_event_us=per_event)
            steps.append(step)
            for r in step.records:
                cls = model_class(r["node"])
                if cls:
                    samples[cls].append((r["node"], r["dur_us"] / 1e3))
            i += 1
        sweeps = [("gemm", gemm_cases(rng)), ("embedding", embedding_cases(rng))]
        j = 0
        while left() > 0.12 * budget_s:
            kind, cases = sweeps[j % 2]
            node, fn = next(cases)
            j += 1
            if j % 10 == 0:
                tick(f"microbenchmarks ({kind})")
            us = run_case(fn)
            if us == us:
                samples[model_class(node)].append((node, us / 1e3))
    finally:
        torch.set_num_threads(old_threads)

    spec = local_cpu_spec(threads)
    models, validation = {}, {"classes": {}}
    for cls in MODEL_CLASSES:
        data = samples.get(cls, [])
        if len(data) < 8:
            continue
        tick(f"fitting {cls} ({len(data)} samples)")
        model = fit_class_model(cls, [d[0] for d in data], np.array([d[1] for d in data]),
                                spec, seed=seed)
        models[cls] = model
        validation["classes"][cls] = model.metrics
    elapsed = time.perf_counter() - t_start
    provenance = {
        "source": "calibrated on this machine by `python -m predictors calibrate`",
        "host": socket.gethostname(), "cpu_model": spec.name.rsplit(" (", 1)[0],
        "threads": threads, "torch": torch.__version__, "python": _platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "budget_s": budget_s, "elapsed_s": round(elapsed, 1), "seed": seed,
        "profiled_steps": len(steps), "microbenchmarks": j,
        "profiler_overhead_us_per_event": round(per_event, 3),
        "samples": {k: len(v) for k, v in samples.items()},
    }
    return DeviceProfile(f"local CPU, {threads} thread{'s' if threads > 1 else ''}",
                         "measured", spec, _overheads(steps), {}, models, provenance,
                         validation)
