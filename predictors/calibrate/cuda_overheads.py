"""CPU overheads of GPU training steps, measured per *captured* op.

The public traces behind the bundled GPU profiles come without their models, so their
overheads are read per dispatch-level op (:mod:`predictors.traces.overhead_tables`).  A calibration on the
device knows each traced step's scenario, and so does better: it captures the scenario as
a prediction would (:func:`~predictors.model.capture.capture_training_step` with ``gpu=True``)
and pairs each captured compute op with its recorded twin, as the CPU calibration does
(:mod:`predictors.traces.dispatch`).  Per aligned op:

- T1: the CPU time since the previous aligned op ended: Python, views, composite
  wrappers (``aten::linear`` around ``aten::addmm``), the autograd engine;
- T2: op start to its first kernel launch; T4: the mean launch call; T3: the rest of the
  op (its other launches, allocator calls), less any synchronizing call's wait;

so that the simulator, which walks exactly the captured ops, adds up what the trace
recorded.  Leaf-level figures did not: a leaf is whatever op encloses no other
(``aten::empty`` inside ``aten::native_layer_norm``), so the names the table knew were
not the names the simulator asked for, and measured on an H200 the launch-bound LMs came
out 60 % slow.

The profiler's cost per recorded event is removed as on the CPU
(:func:`~predictors.calibrate.calibrate.pooled_profiler_cost`), estimated from the
launch-bound scenarios only: there the unprofiled iteration is the CPU's time, while a
GPU-bound one waits for its kernels.
"""
from __future__ import annotations

import bisect
import difflib
import statistics
from dataclasses import replace

import numpy as np

from ..costs.roofline import kernel_cost
from ..hardware.specs import local_cpu_spec
from ..model.capture import capture_training_step
from ..model.op_classes import classify
from ..model.workload import build_workload
from ..profiles import OpOverheads, OverheadTable
from ..scenario.format import validate_scenario
from ..traces.dispatch import (
    dispatch_level_ops,
    fused_token,
    nest,
    runtime_calls_per_op,
)
from ..traces.kineto import Kind
from ..traces.ops import runtime_flags
from .calibrate import gap_overheads
from .profiling import StepProfile

__all__ = ["aligned_step", "aligned_overheads", "fit_profiler_cost", "dispatch_us",
           "launch_bound", "DEFAULT_PROFILER_US",
           "MAX_OP_US"]

# The profiler's cost per event when too few launch-bound scenarios estimate it (the
# H200 host's traces give 1.4-3 us per event; CPU hosts ~1 us).
DEFAULT_PROFILER_US = 1.0
# A single op longer than this is a one-off (cuBLAS's first call under the profiler ran
# 2.8 ms), not dispatch: its duration is left out of T2-T4.
MAX_OP_US = 1000.0
# A scenario is launch-bound when its kernels keep the GPU busy less than this share of
# its unprofiled iteration.
LAUNCH_BOUND_BUSY = 0.5


def aligned_step(doc: dict, rec, iteration_ms: float, *, gpu: bool = True) -> StepProfile:
    """The traced steps of ``doc`` in ``rec`` (one ``ProfilerStep#k`` span each), aligned
    with its capture (``gpu``: as a GPU runs it): a :class:`StepProfile` whose records
    hold, per captured compute op, the medians over the traced steps of the raw T1 gap,
    the op's CPU duration, for launching ops ``launch_raw`` = (T2, T4), and the device
    time of what it launched (``kernel_us``), in microseconds.  ``iteration_ms``: the
    scenario's unprofiled iteration (``step_us``)."""

    doc = validate_scenario(doc)
    graph = capture_training_step(build_workload(doc), gpu=gpu)
    compute = [graph.nodes[i] for i in sorted(graph.nodes)
               if classify(graph.nodes[i]["name"]) != "view"]
    tr = rec.traces[0]
    spans = [(s, s + d) for _, s, d in tr.steps()] or [(-np.inf, np.inf)]
    per_step = [_align_span(tr, compute, s0, s1) for s0, s1 in spans]
    spec = local_cpu_spec(1)  # roofline bytes (the T1 line's x) are device independent
    records = []
    for a in sorted({a for found, _, _ in per_step for a in found}):
        got = [found[a] for found, _, _ in per_step if a in found]
        launches = [g["launch_raw"] for g in got if g["launch_raw"] is not None]
        records.append({
            "node": compute[a], "bytes": kernel_cost(compute[a], spec).bytes,
            "dur_raw": _median_pair([g["dur_raw"] for g in got]),
            "gap_raw": _median_pair([g["gap_raw"] for g in got]),
            "launch_raw": (tuple(statistics.median(x[j] for x in launches) for j in (0, 1))
                           if launches else None),
            "kernel_us": statistics.median(g["kernel_us"] for g in got)})
    step = StepProfile(doc["name"], 1, iteration_ms * 1e3,
                       statistics.median(s1 - s0 for s0, s1 in spans), DEFAULT_PROFILER_US,
                       records, unaligned=len(compute) - len(records))
    step.profiled_steps = len(spans)
    step.events = int(statistics.median(n for _, _, n in per_step))
    tails = [t for _, t, _ in per_step if t is not None]
    step.tail_raw = _median_pair(tails) if tails and np.isfinite(spans[0][0]) else None
    kernels = np.flatnonzero((tr.kind == Kind.KERNEL) | (tr.kind == Kind.MEMCPY) |
                             (tr.kind == Kind.MEMSET))
    step.device_busy_us = float(tr.dur[kernels].sum()) / len(spans)  # per step
    return step


def _median_pair(samples: list[tuple[float, int]]) -> tuple[float, int]:
    """Median duration and median event count of several steps' ``(us, events)``."""
    return (float(statistics.median(s[0] for s in samples)),
            int(statistics.median(s[1] for s in samples)))


def _align_span(tr, compute: list[dict], s0: float, s1: float) -> tuple[dict, tuple, int]:
    """One traced step (the host events in ``[s0, s1)``) aligned with ``compute``:
    ``({compute index: raw figures}, tail (us, events) or None, events in the step)``."""
    host = ~tr.thread_is_device[tr.thread]
    inside = host & (tr.ts >= s0) & (tr.ts < s1)
    cpu = np.flatnonzero(inside & (tr.kind == Kind.CPU_OP))
    order, parent = nest(tr, cpu)
    recorded = dispatch_level_ops(tr, order, parent, {n["name"] for n in compute})
    matcher = difflib.SequenceMatcher(a=[fused_token(n["name"]) for n in compute],
                                      b=[fused_token(tr.names[tr.name_id[i]]) for i in recorded],
                                      autojunk=False)
    pairs = [(blk.a + k, blk.b + k) for blk in matcher.get_matching_blocks()
             for k in range(blk.size)]
    # every recorded host event costs the profiler's time (ops, runtime calls, the
    # autograd engine's spans): counted by start
    starts = np.sort(tr.ts[inside & (tr.kind != Kind.ANNOTATION)])

    def events(lo: float, hi: float) -> int:
        return int(bisect.bisect_left(starts, hi) - bisect.bisect_left(starts, lo))

    launch_api, sync_api = runtime_flags(tr)
    calls = runtime_calls_per_op(tr, np.flatnonzero(inside & (tr.kind == Kind.RUNTIME)),
                                 parent, {recorded[b] for _, b in pairs})
    device_us = _device_us_by_correlation(tr)
    found, prev_end = {}, None
    for a, b in pairs:
        e = recorded[b]
        start, end = float(tr.ts[e]), float(tr.ts[e] + tr.dur[e])
        own = calls.get(e, [])
        wait = sum(float(tr.dur[c]) for c in own if sync_api[tr.name_id[c]])
        launches = [c for c in own if launch_api[tr.name_id[c]]]
        found[a] = {"dur_raw": (end - start - wait, events(start, end)),
                    "gap_raw": (start - prev_end, events(prev_end, start))
                    if prev_end is not None else (0.0, 0),
                    "launch_raw": ((float(tr.ts[launches[0]]) - start,
                                    float(np.mean([tr.dur[c] for c in launches])))
                                   if launches else None),
                    # the device time of the kernels, copies and memsets it launched
                    "kernel_us": sum(device_us.get(int(tr.corr[c]), 0.0) for c in own)}
        prev_end = end
    tail = None
    if pairs:
        first, last = recorded[pairs[0][1]], recorded[pairs[-1][1]]
        last_end = float(tr.ts[last] + tr.dur[last])
        tail = ((float(tr.ts[first]) - s0) + (s1 - last_end),
                events(s0, float(tr.ts[first])) + events(last_end, s1))
    return found, tail, int(len(starts))


def _device_us_by_correlation(tr) -> dict[int, float]:
    """Device time (us) of the kernels, copies and memsets of each CUDA correlation id."""
    dev = np.flatnonzero(tr.thread_is_device[tr.thread] &
                         np.isin(tr.kind, (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)))
    out: dict[int, float] = {}
    for k in dev:
        out[int(tr.corr[k])] = out.get(int(tr.corr[k]), 0.0) + float(tr.dur[k])
    return out


def launch_bound(step: StepProfile) -> bool:
    """Whether the unprofiled iteration is the CPU's time (the GPU idles most of it)."""
    busy = step.device_busy_us
    return busy is not None and step.step_us > 0 and busy < LAUNCH_BOUND_BUSY * step.step_us


def aligned_overheads(steps: list[StepProfile], source: str) -> tuple[OverheadTable, dict]:
    """The overhead table of aligned GPU steps: T1 per ``phase:name<previous``,
    ``phase:name`` and name (linear in bytes where sizes vary, as on the CPU), T2-T4 per
    ``phase:name`` and name, the training loop's own time, with the profiler's cost per
    event (:func:`fit_profiler_cost`) taken out.  Returns ``(table, info)``."""
    bound = [s for s in steps if launch_bound(s)]
    per_event = fit_profiler_cost(steps) if bound else DEFAULT_PROFILER_US
    table = _table(steps, per_event, source)
    info = {"profiler_us_per_event": per_event, "launch_bound_steps": len(bound),
            "aligned_ops": sum(len(s.records) for s in steps),
            "unaligned_ops": sum(s.unaligned for s in steps)}
    return table, info


def _table(steps: list[StepProfile], per_event: float, source: str = "") -> OverheadTable:

    for s in steps:
        s.remove_profiler_cost(per_event)
    table = gap_overheads(steps)
    split = _launch_split(steps)
    default = split.get("", (0.0, 0.0, 0.0))

    def with_launch(key: str, oh: OpOverheads) -> OpOverheads:
        name = key.split("<")[0]
        t2, t4, t3 = split.get(name) or split.get(name.split(":", 1)[-1]) or default
        return replace(oh, t2=t2, t3=t3, t4=t4)

    per_op = {k: (v if classify(k.split("<")[0].split(":", 1)[-1]) == "view"
                  else with_launch(k, v)) for k, v in table.per_op.items()}
    return OverheadTable(with_launch("", table.default), per_op, 0.0, source, table.step_s)


def dispatch_us(table: OverheadTable, step: StepProfile) -> float:
    """The CPU time ``table`` gives the aligned ops of ``step`` (gaps, launches, the
    training loop), as :func:`predictors.costs.op_costs.cost_op_graph` looks them up."""
    total, previous, previous_bytes = table.step_s, None, 0.0
    for r in step.records:
        node, nbytes = r["node"], r["bytes"]
        oh = table.for_op(node["name"], node["phase"], previous)
        total += oh.t1 + oh.t1_per_byte * (nbytes + previous_bytes) + oh.t2 + oh.t4 + oh.t3
        previous, previous_bytes = node["name"], nbytes
    return total * 1e6


def fit_profiler_cost(steps: list[StepProfile], hi: float = 8.0) -> float:
    """The profiler's cost per recorded event (us, at most ``hi``) that makes the table
    built from ``steps`` give their launch-bound steps, in the median, their unprofiled
    time.

    A traced step is not a sum to subtract from: its one-offs (cuBLAS's first call under
    the profiler ran 2.8 ms) inflate ``(profiled - unprofiled) / events`` to 4+ us,
    while the table's per-op medians leave them out.  So the cost is found through the
    table itself."""
    bound = [s for s in steps if launch_bound(s)]

    def excess(c: float) -> float:
        table = _table(steps, c)
        return statistics.median(dispatch_us(table, s) / s.step_us for s in bound) - 1.0

    # Nearly linear in the cost: the secant method, kept inside [0, hi].
    a, b = 0.0, DEFAULT_PROFILER_US
    fa, fb = excess(a), excess(b)
    for _ in range(8):
        if abs(fb) < 1e-3 or fa == fb:
            break
        a, fa, b = b, fb, min(hi, max(0.0, b - fb * (b - a) / (fb - fa)))
        fb = excess(b)
    return b


def _launch_split(steps: list[StepProfile]) -> dict[str, tuple]:
    """``phase:name``, name and "" (every op) -> (T2, T4, T3) in seconds: medians over the
    aligned launching ops of their CPU time split at the first launch, the profiler's
    cost taken out of T2 and T3 in proportion."""
    samples: dict[str, list[tuple[float, float, float]]] = {}
    for s in steps:
        for r in s.records:
            raw, _ = r["dur_raw"]
            if r.get("launch_raw") is None or raw > MAX_OP_US:
                continue
            t2_raw, t4 = r["launch_raw"]
            rest = max(0.0, r["dur_us"] - t4)
            rest_raw = max(raw - t4, 1e-9)
            t2 = rest * min(1.0, max(0.0, t2_raw) / rest_raw)
            node = r["node"]
            for key in (f"{node['phase']}:{node['name']}", node["name"], ""):
                samples.setdefault(key, []).append((t2, t4, rest - t2))
    return {k: tuple(statistics.median(x[j] for x in v) * 1e-6 for j in range(3))
            for k, v in samples.items() if len(v) >= 3 or k == ""}
