"""``calibrate``: build a measured device profile of the local CPU within a time budget.

1. The profiler's own per-event cost (so it can be removed from every sample).
2. Profiled training steps of random DLRM and transformer scenarios, each warmed up to a
   steady state and profiled several times: every op's median duration beside its
   captured shapes, and the CPU gaps between ops (overheads).
3. Microbenchmark sweeps for GEMM (addmm, mm, bmm) and EmbeddingBag forward/backward with
   uniform and Zipf indices.
4. One learned model per op class (MLP or boosted trees, whichever validates better),
   overheads per op name and phase, provenance, and the held-out error figures.
5. The step-footprint curve (``devices.footprint``): each profiled step predicted by
   models fitted without it (two folds), against the bytes the step writes.
"""
from __future__ import annotations

import dataclasses
import datetime
import os
import platform as _platform
import socket
import statistics
import time
from collections import defaultdict, deque
from typing import Callable

import numpy as np
import torch

from ..costs.large_ops import first_touch_s
from ..costs.learned_models import fit_class_model
from ..costs.op_costs import cost_op_graph
from ..costs.op_features import MODEL_CLASSES, model_class
from ..costs.roofline import kernel_cost
from ..hardware.platforms import resolve_platform
from ..hardware.specs import cpu_signature, local_cpu_spec
from ..model.footprint import FootprintScale, fit_footprint_scale, step_footprint
from ..model.op_classes import VIEW_OPS
from ..profiles import DeviceProfile, OpOverheads, OverheadTable
from ..utils.metrics import gmae
from ..utils.progress import check_cancelled
from .host_check import measure_host
from .hostload import OtherProcesses
from .microbench import (
    embedding_cases,
    gemm_cases,
    page_fault_ns,
    profiler_overhead_us,
    run_case,
    sort_ns,
    stream_bw,
)
from .noise import class_floor, pair_floor, steps_floor
from .profiling import profile_step
from .samples import MAX_GFLOP, random_dlrm, random_transformer
from .speed import combine, probe

__all__ = ["calibrate_cpu", "gap_overheads", "pooled_profiler_cost"]

# ~14 % of the microbenchmark time buys their noise floor.  Odd, so that both sweeps get
# repeats, and not a multiple of 3, so that all three embedding cases of a table do.
REPEAT_EVERY = 7


def _robust_line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """``y ~ a + b x`` with ``a, b >= 0``, fitted by reweighted least squares (between
    the median's and the mean's fit: one preempted sample must not tilt it)."""
    A = np.c_[np.ones(len(x)), x]
    w = np.ones(len(y))
    coef = np.array([float(np.median(y)), 0.0])
    for _ in range(20):
        coef, *_ = np.linalg.lstsq(A * w[:, None], y * w, rcond=None)
        if coef[1] < 0:
            coef = np.array([float(np.average(y, weights=w * w)), 0.0])
        coef = np.maximum(coef, 0.0)
        w = 1.0 / np.sqrt(np.maximum(np.abs(y - A @ coef), 1.0))
    return float(coef[0]), float(coef[1])


def saturating_line(x: np.ndarray, y: np.ndarray, knots: int = 8
                    ) -> tuple[float, float, float]:
    """``y ~ a + b min(x, cap)`` (``cap`` 0: a plain line), the cap among log-spaced
    candidates over ``x``'s range that leaves the smallest mean absolute residual.

    The gap before an op grows with the data around it only until that data has evicted
    the caches Python and the dispatcher run from (the project's Xeon VM: 29 us before a
    dropout beside 0.2 MB, 83 us beside 1 MB, 190-220 us from 7 MB on).  A straight line
    through such samples lifts its intercept, and every small step's gaps with it."""
    best = (*_robust_line(x, y), 0.0)
    err = float(np.mean(np.abs(y - best[0] - best[1] * x)))
    lo, hi = max(float(x.min()), 1e-6), float(x.max())
    for cap in np.geomspace(lo, hi, knots + 2)[1:-1] if hi > 4 * lo else ():
        xc = np.minimum(x, cap)
        a, b = _robust_line(xc, y)
        e = float(np.mean(np.abs(y - a - b * xc)))
        if e < 0.97 * err:   # a knee must earn its parameter
            best, err = (a, b, float(cap)), e
    return best


def gap_samples(steps, with_step: bool = False) -> list[tuple[str, str, str, float, float]]:
    """``(phase:name<previous, phase:name, name, gap us, bytes)`` for every aligned op
    after the first of each step; bytes = roofline bytes of the op and the op before
    (``with_step``: plus the bytes the step writes, its footprint)."""
    spec = local_cpu_spec(1)
    out = []
    for step in steps:
        extra = (step_footprint(step.graph) or 0.0) if with_step and step.graph is not None \
            else 0.0
        sizes = [r["bytes"] if "bytes" in r else kernel_cost(r["node"], spec).bytes
                 for r in step.records]
        for k in range(1, len(step.records)):
            node, prev = step.records[k]["node"], step.records[k - 1]["node"]
            key = f"{node['phase']}:{node['name']}"
            out.append((f"{key}<{prev['name']}", key, node["name"],
                        step.records[k]["gap_us"], sizes[k] + sizes[k - 1] + extra))
    return out


def gap_overheads(steps, with_step: bool = True) -> OverheadTable:
    """The CPU gap before each op, per ``phase:name<previous``, ``phase:name`` and name
    (each level needs 3 samples), the pooled default, and the training loop's own time.

    The views and the Python between compute ops are inside these gaps, so views cost
    nothing of their own.  A gap grows with the data around it (freeing the previous
    op's temporaries, autograd releasing saved tensors) and with the step's own
    footprint (``with_step``: a small step's data leave Python and the dispatcher in the
    caches; 11 us a gap in a 1-layer LM writing 11 MB a step, 15-36 us in LMs writing
    30-300 MB, here): where a key has samples from models of different sizes, T1 is a
    line in the bytes of the op, the op before it and (``with_step``) the step's writes,
    that stops growing at a knee when that fits better (:func:`saturating_line`,
    ``t1 + t1_per_byte * min(bytes, t1_bytes_cap)``); elsewhere the median."""
    rows = gap_samples(steps, with_step)
    tables: list[dict] = [defaultdict(list), defaultdict(list), defaultdict(list)]
    for ctx, key, name, gap, nbytes in rows:
        for table, k in zip(tables, (ctx, key, name)):
            table[k].append((gap, nbytes))

    def entry(samples) -> OpOverheads:
        gaps = np.array([g for g, _ in samples])
        sizes = np.array([b for _, b in samples])
        if len(samples) >= 8 and sizes.max() >= 4 * max(sizes.min(), 1.0):
            a, b, cap = saturating_line(sizes / 1e6, gaps)  # per MB: well-conditioned
            return OpOverheads(a * 1e-6, 0.0, 0.0, 0.0, 0.0, len(samples), b * 1e-12,
                               cap * 1e6)
        return OpOverheads(float(np.median(gaps)) * 1e-6, 0.0, 0.0, 0.0, 0.0, len(samples))

    # Views and metadata ops run inside the gaps measured before compute ops.
    per_op = {f"aten::{name}": OpOverheads(0.0, 0.0, 0.0, 0.0, 0.0) for name in VIEW_OPS}
    for table in reversed(tables):  # names, then phase:name, then with the previous op
        per_op.update({k: entry(v) for k, v in table.items() if len(v) >= 3})
    default = (OpOverheads(float(np.median([r[3] for r in rows])) * 1e-6, 0, 0, 0, 0,
                           len(rows)) if rows else OpOverheads(2e-6, 0, 0, 0, 0))
    tails = [s.tail_us for s in steps]
    # the tail walks the parameters (zero_grad, the optimizer's loop): a line in the
    # step's optimizer ops where they vary (150 us at 15 updates, 350-600 at 51, here)
    updates = np.array([_updates(s) for s in steps], dtype=float)
    tail_s, per_update = (statistics.median(tails) * 1e-6 if tails else 0.0), 0.0
    if len(steps) >= 4 and updates.min() > 0 and updates.max() >= 2 * updates.min():
        a, b = _robust_line(updates, np.array(tails, dtype=float))
        tail_s, per_update = a * 1e-6, b * 1e-6
    return OverheadTable(default, per_op, 0.0, "measured: gaps between ops in profiled "
                         "training steps (medians of several steady-state steps; "
                         "linear in the bytes around the op"
                         f"{' and the step' if with_step else ''} where sizes vary)",
                         tail_s, "op+step" if with_step else "op", per_update)


def _updates(step) -> int:
    """The step's optimizer ops (one or more per parameter tensor)."""
    return sum(1 for r in step.records if r["node"].get("phase") == "optimizer")


def pooled_profiler_cost(steps, fallback: float) -> float:
    """The profiler's cost per event that makes the profiled steps, as their ops, gaps and
    tails account for them, add up to the unprofiled steps measured between them: a
    weighted median over scenarios of ``(raw - unprofiled) / events``.  Beside the
    profiler's own cost it absorbs what per-op medians drop (a step's time is the sum of
    its ops' means).  ``fallback`` (the microbenchmark's) with fewer than 6 steps."""
    est, weights = [], []
    for s in steps:
        raw, events = s.raw_us()
        if events and s.step_us > 0:
            est.append((raw - s.step_us) / events)
            weights.append(events / s.step_us)  # the estimate's precision ~ events / time
    if len(est) < 6:
        return fallback
    order = np.argsort(est)
    cum = np.cumsum(np.asarray(weights)[order])
    value = float(np.asarray(est)[order][np.searchsorted(cum, cum[-1] / 2)])
    return min(max(value, 0.0), 4.0 * max(fallback, 0.5))


GLOO_MIN_BUDGET_S = 60.0   # shorter calibrations leave gloo's collectives to the default


def calibrate_cpu(threads: int = 1, budget_s: float = 600.0, seed: int = 0,
                  progress: Callable[[float, str], None] | None = None,
                  cancelled: Callable[[], bool] | None = None,
                  keep_samples: dict | None = None, ranges: str = "wide") -> DeviceProfile:
    """Measure this CPU with ``threads`` intra-op threads; return its profile.

    ``ranges``: the sizes of the random scenarios it profiles (``samples.RANGES``).

    ``keep_samples``: a dict that receives each class's training samples, ``{class:
    [(node, ms), ...]}`` (``kept_samples.save_samples`` writes them)."""
    t_start = time.perf_counter()
    deadline = t_start + budget_s
    rng = np.random.default_rng(seed)
    old_threads = torch.get_num_threads()

    def tick(stage: str):
        check_cancelled(cancelled, stage)
        if progress is not None:
            used = (time.perf_counter() - t_start) / budget_s
            progress(min(0.99, used), stage)

    def left() -> float:
        return deadline - time.perf_counter()

    torch.set_num_threads(threads)
    # CPUs that other processes keep busy meanwhile: a calibration on a busy machine
    # learns that machine's slower, noisier kernels (provenance says so).
    load = OtherProcesses().__enter__()
    try:
        tick("profiler overhead")
        per_event_bench = profiler_overhead_us()
        sorting = sort_ns(seed)
        tick("page faults and DRAM bandwidth")
        faulting, streaming = page_fault_ns(), stream_bw()
        tick("host check (GEMM, streaming, dispatch)")
        # the figures `host-check` takes on another host, so that a prediction there can
        # scale this profile, dispatch costs included (profiles.host_ratios)
        host = measure_host(threads)
        # Budget split: training steps first (they cover every op class), then sweeps.
        steps, samples = [], defaultdict(list)
        # The largest LM step it draws takes ~gflop / 100 s on one core, ~20 of them
        # per scenario: a quarter of the budget in GFLOP keeps any one within it.
        gflop = min(MAX_GFLOP, 0.25 * budget_s)
        makers = [lambda: random_dlrm(rng, threads, ranges),
                  lambda: random_transformer(rng, threads, ranges, max_gflop=gflop)]
        speeds = []  # the machine's speed through the calibration (validate compares)
        i = 0
        while left() > 0.55 * budget_s or i < 2:
            doc = makers[i % 2]()
            tick(f"profiling {doc['name']}")
            speeds.append(probe(threads=threads))
            # A step of the largest models takes ~1.5 s: bound the warm-up's extra windows.
            steps.append(profile_step(doc, seed=i, per_event_us=per_event_bench,
                                      max_warmup_s=max(2.0, 0.02 * budget_s)))
            i += 1
        per_event = pooled_profiler_cost(steps, per_event_bench)
        per_step = defaultdict(list)  # each op's per-step durations: the noise floor
        for step in steps:
            step.remove_profiler_cost(per_event)
            for r in step.records:
                cls = model_class(r["node"])
                if cls:
                    samples[cls].append((r["node"], r["dur_us"] / 1e3))
                    per_step[cls].append(r.get("dur_steps_us"))
        in_step = {cls: len(rows) for cls, rows in samples.items()}
        sweeps = [("gemm", gemm_cases(rng)), ("embedding", embedding_cases(rng))]
        j = 0
        # Every REPEAT_EVERY-th case, the case measured two cases before is measured
        # again (other work in between; a GEMM on freshly allocated inputs, whose
        # placement changes its time too): the pairs give the microbenchmarks' noise
        # floor.
        recent, repeats = deque(maxlen=3), defaultdict(list)
        # Keep time for fitting: ~10 s on two busy cores, whatever the budget.
        while left() > max(0.12 * budget_s, min(10.0, 0.25 * budget_s)):
            kind, cases = sweeps[j % 2]
            node, fn = next(cases)
            j += 1
            if j % 10 == 0:
                tick(f"microbenchmarks ({kind})")
            if j % 100 == 0:
                speeds.append(probe(threads=threads))
            us = run_case(fn)
            if us == us:
                samples[model_class(node)].append((node, us / 1e3))
                recent.append((node, fn, us))
            if j % REPEAT_EVERY == 0 and len(recent) == recent.maxlen:
                node0, fn0, us0 = recent[0]
                if hasattr(fn0, "renew"):
                    fn0.renew()
                again = run_case(fn0)
                if again == again:
                    repeats[model_class(node0)].append((us0, again))
        collectives = {}
        if budget_s >= GLOO_MIN_BUDGET_S:
            # CPU ranks (local-cpu with ranks) exchange through gloo: its collectives
            # among 2..4 processes of this host, against message size
            from .ranks import measure_collectives
            gloo = {}
            for n in range(2, min(4, os.cpu_count() or 2) + 1):
                tick(f"gloo collectives among {n} processes")
                gloo[str(n)] = measure_collectives(n, threads=threads)
            collectives = {"gloo": gloo}
    finally:
        torch.set_num_threads(old_threads)
    load.__exit__(None, None, None)

    spec = dataclasses.replace(local_cpu_spec(threads), sort_ns=round(sorting, 3),
                               page_fault_ns=round(faulting, 1),
                               stream_bytes_per_s=round(streaming, -6))
    # The models learn kernels without the page faults of fresh large outputs: the
    # costing adds those per op (costs/large_ops.py), whatever sizes calibration saw.
    samples = {cls: [(node, fault_free_ms(node, ms, spec)) for node, ms in rows]
               for cls, rows in samples.items()}
    if keep_samples is not None:
        keep_samples.update({cls: list(rows) for cls, rows in samples.items()})
    models, validation = {}, {"classes": {}}
    for cls in MODEL_CLASSES:
        data = samples.get(cls, [])
        if len(data) < 8:
            continue
        tick(f"fitting {cls} ({len(data)} samples)")
        model = fit_class_model(cls, [d[0] for d in data], np.array([d[1] for d in data]),
                                spec, seed=seed)
        models[cls] = model
        n_iso = sum(1 for node, _ in data if node.get("isolated"))
        model.metrics["noise_floor"] = class_floor(
            n_iso, pair_floor(repeats.get(cls, [])), len(data) - n_iso,
            steps_floor(per_step.get(cls, [])))
        validation["classes"][cls] = model.metrics
    tick("fitting the step-footprint curve")
    footprint, validation["footprint"] = footprint_curve(steps, samples, in_step, models,
                                                        spec, seed)
    elapsed = time.perf_counter() - t_start
    provenance = {
        "source": "calibrated on this machine by `python -m predictors calibrate`",
        "host": socket.gethostname(), "cpu_model": spec.name.rsplit(" (", 1)[0],
        "cpu_signature": cpu_signature(),
        "threads": threads, "torch": torch.__version__, "python": _platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "budget_s": budget_s, "elapsed_s": round(elapsed, 1), "seed": seed,
        "ranges": ranges,
        "profiled_steps": len(steps), "microbenchmarks": j,
        "profiler_overhead_us_per_event": round(per_event, 3),
        "profiler_overhead_us_per_event_microbenchmark": round(per_event_bench, 3),
        "page_fault_ns": round(faulting, 1), "stream_gb_per_s": round(streaming / 1e9, 2),
        "profiled_steps_per_scenario": steps[0].profiled_steps if steps else 0,
        "other_processes_cpus": load.cpus,
        "speed_reference": combine(speeds),
        "host_check": host,
        "samples": {k: len(v) for k, v in samples.items()},
        "microbenchmarks_repeated": {k: len(v) for k, v in repeats.items()},
    }
    return DeviceProfile(f"local CPU, {threads} thread{'s' if threads > 1 else ''}",
                         "measured", spec, gap_overheads(steps), {}, models, provenance,
                         validation, footprint, collectives)


def fault_free_ms(node: dict, ms: float, spec) -> float:
    """A sample's time less the page faults of its fresh outputs (at most half of it:
    a sample faster than its modelled faults keeps the rest as its own noise)."""
    return max(0.5 * ms, ms - first_touch_s(node, spec) * 1e3)


def footprint_curve(steps, samples: dict, in_step: dict, models: dict, spec,
                    seed: int = 0) -> tuple[FootprintScale | None, dict]:
    """The step-footprint curve and its figures, from steps each predicted by models
    that never saw it: two folds of the profiled steps (pairs of a DLRM and an LM go
    together); each fold's models are refitted, with the kind the full fit chose, on the
    other fold's in-step samples and all microbenchmarks (``samples[cls]`` lists a
    class's ``in_step[cls]`` in-step samples, step by step, before the rest), and its
    gaps come from the other fold's steps."""
    usable = sum(1 for s in steps if s.graph is not None and s.records)
    if usable < 8:
        return None, {"steps": usable, "note": "too few profiled steps for a curve"}
    fold = [(i // 2) % 2 for i in range(len(steps))]
    # which step each in-step sample came from: every step's records in order (as
    # calibrate_cpu collected them), model classes only
    owner = defaultdict(list)
    for i, step in enumerate(steps):
        for r in step.records:
            cls = model_class(r["node"])
            if cls:
                owner[cls].append(i)
    platform = resolve_platform({"preset": "local-cpu", "threads": spec.threads})
    written, measured, predicted = [], [], []
    for k in (0, 1):
        fold_models = {}
        for cls, model in models.items():
            rows = samples[cls]
            keep = [j for j in range(len(rows))
                    if j >= in_step.get(cls, 0) or fold[owner[cls][j]] != k]
            fold_models[cls] = fit_class_model(
                cls, [rows[j][0] for j in keep], np.array([rows[j][1] for j in keep]),
                spec, seed=seed, holdout=0.0, kinds=(model.kind,))
        table = gap_overheads([s for s, f in zip(steps, fold) if f != k])
        profile = DeviceProfile("fold", "measured", spec, table, {}, fold_models)
        for step, f in zip(steps, fold):
            if f != k or step.graph is None or not step.records:
                continue
            costed = cost_op_graph(step.graph, platform, profile)
            predicted.append(sum(op.kernel_s + op.overheads.t1 for op in costed.ops))
            measured.append(max(1e-9, step.step_us * 1e-6
                                - table.step_tail_s(_updates(step))))
            written.append(step_footprint(step.graph))
    curve = fit_footprint_scale(written, measured, predicted)
    before = gmae(np.array(predicted), np.array(measured))
    after = (gmae(np.array([p * curve.at(w) for p, w in zip(predicted, written)]),
                  np.array(measured)) if curve else before)
    return curve, {"steps": len(measured), "step_gmae_without": before,
                   "step_gmae_with": after,
                   # the curve at a few sizes, for people reading the profile
                   "scale_at_mb_written": {f"{mb:g}": round(curve.at(mb * 1e6), 3)
                                           for mb in (2, 5, 10, 20, 50, 200)} if curve
                   else None,
                   "note": "each step predicted by models fitted on the other half of the "
                           "steps (two folds); 'with' applies the curve fitted on them all "
                           "(in sample)"}
