"""CPU overheads (the papers' T1-T5) and launch maps measured from a recorded trace.

For every top-level CPU op (see :class:`~predictors.traces.ops.CpuOps`):

- T1: the gap since the previous top-level item of the rank ended (all threads merged,
  as the simulator runs them on one clock);
- T2: op start to its first runtime call (the launch);
- T3: the end of its last runtime call to the op's end;
- T4: the duration of its launch calls;
- T5: the mean gap between consecutive runtime calls inside it, or, for an op that makes
  none, its whole CPU time.

Per op name these are averaged into :class:`~predictors.profiles.OpOverheads` (seconds),
the form that device profiles store, with a pooled default.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..profiles import OpOverheads, OverheadTable
from .kineto import Kind, KinetoTrace
from .ops import CpuOps, cpu_ops, runtime_flags

__all__ = ["ItemTimes", "item_times", "TraceStats", "overhead_stats"]


@dataclass
class ItemTimes:
    """Per top-level item (aligned with ``CpuOps.items``), microseconds."""

    t1: np.ndarray
    t2: np.ndarray       # NaN where the item makes no runtime call
    t3: np.ndarray
    t4: np.ndarray       # mean launch-call duration, NaN without launches
    t5_gap: np.ndarray   # mean gap between calls, NaN with fewer than two calls
    n_calls: np.ndarray
    is_op: np.ndarray    # a cpu_op (False: a bare runtime call)


def item_times(trace: KinetoTrace, ops: CpuOps) -> ItemTimes:
    """T1-T5 of every top-level item of ``trace``."""
    it = ops.items
    n = len(it)
    s, d = trace.ts[it], trace.dur[it]
    e = s + d
    prev_end = np.empty(n)
    if n:
        prev_end[0] = s[0]
        prev_end[1:] = np.maximum.accumulate(e)[:-1]
    t1 = np.clip(s - prev_end, 0.0, None)
    is_op = trace.kind[it] == Kind.CPU_OP
    rt = np.flatnonzero((trace.kind == Kind.RUNTIME) & (ops.owner >= 0))
    rt = rt[is_op[ops.owner[rt]]]
    own = ops.owner[rt]
    first = np.full(n, np.inf)
    last = np.full(n, -np.inf)
    np.minimum.at(first, own, trace.ts[rt])
    np.maximum.at(last, own, trace.ts[rt] + trace.dur[rt])
    calls = np.bincount(own, minlength=n)
    call_dur = np.bincount(own, weights=trace.dur[rt], minlength=n)
    launch, _ = runtime_flags(trace)
    is_launch = launch[trace.name_id[rt]]
    nl = np.bincount(own[is_launch], minlength=n)
    ld = np.bincount(own[is_launch], weights=trace.dur[rt][is_launch], minlength=n)
    has = calls > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        t2 = np.where(has, first - s, np.nan)
        t3 = np.where(has, e - last, np.nan)
        t4 = np.where(nl > 0, ld / nl, np.nan)
        t5 = np.where(calls > 1, (last - first - call_dur) / (calls - 1), np.nan)
    return ItemTimes(t1, np.clip(t2, 0, None), np.clip(t3, 0, None), t4,
                     np.clip(t5, 0, None), calls, is_op)


@dataclass
class TraceStats:
    """What a trace teaches about the CPU side of its platform."""

    overheads: OverheadTable
    launch_map: dict[str, list[str]] = field(default_factory=dict)
    api_us: dict[str, float] = field(default_factory=dict)  # mean duration per runtime call
    launch_latency_us: float = 0.0  # launch-call start to kernel start on an idle stream
    ops: int = 0


def _mean(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    return float(x.mean()) if len(x) else 0.0


def overhead_stats(traces: KinetoTrace | list[KinetoTrace],
                   ops: list[CpuOps] | None = None) -> TraceStats:
    """Measure :class:`TraceStats` over one trace or the ranks of one job (pooled)."""
    traces = [traces] if isinstance(traces, KinetoTrace) else list(traces)
    ops = ops or [cpu_ops(t) for t in traces]
    per: dict[str, list[np.ndarray]] = defaultdict(list)
    cols = {k: [] for k in ("name", "t1", "t2", "t3", "t4", "t5g", "calls", "dur")}
    launch_seqs: dict[str, Counter] = defaultdict(Counter)
    api_sum: Counter = Counter()
    api_n: Counter = Counter()
    lat = []
    for tr, op in zip(traces, ops):
        times = item_times(tr, op)
        sel = times.is_op
        it = op.items[sel]
        cols["name"].append(np.array([tr.names[i] for i in tr.name_id[it]], object))
        for k, v in (("t1", times.t1), ("t2", times.t2), ("t3", times.t3),
                     ("t4", times.t4), ("t5g", times.t5_gap),
                     ("calls", times.n_calls.astype(float)), ("dur", tr.dur[op.items])):
            cols[k].append(v[sel])
        _, sync = runtime_flags(tr)
        rt = np.flatnonzero(tr.kind == Kind.RUNTIME)
        keep = rt[~sync[tr.name_id[rt]]]
        for nid, total, cnt in zip(*_sum_by(tr.name_id[keep], tr.dur[keep])):
            api_sum[tr.names[nid]] += total
            api_n[tr.names[nid]] += cnt
        # Launch map: the kernels each top-level op launched, in order.
        dev = np.flatnonzero(op.launcher >= 0)
        if len(dev):
            item_of = op.owner[op.launcher[dev]]
            ok = item_of >= 0
            dev, item_of = dev[ok], item_of[ok]
            order = np.lexsort((tr.ts[op.launcher[dev]], item_of))
            seqs: dict[int, list[str]] = defaultdict(list)
            for j in order:
                seqs[int(item_of[j])].append(tr.names[tr.name_id[dev[j]]])
            for item, seq in seqs.items():
                i = op.items[item]
                if tr.kind[i] == Kind.CPU_OP:
                    launch_seqs[tr.names[tr.name_id[i]]][tuple(seq)] += 1
            # Launch latency: kernels whose stream was idle when they were launched.
            lat.extend(_idle_launch_latency(tr, op))
    name = np.concatenate(cols["name"]) if cols["name"] else np.zeros(0, object)
    c = {k: np.concatenate(v) if v else np.zeros(0) for k, v in cols.items() if k != "name"}
    per_op = {}
    for nm in np.unique(name) if len(name) else []:
        m = name == nm
        calls = c["calls"][m]
        no_call = calls == 0
        t5 = _mean(c["dur"][m][no_call]) if no_call.mean() >= 0.5 else _mean(c["t5g"][m])
        per_op[str(nm)] = OpOverheads(_mean(c["t1"][m]) * 1e-6, _mean(c["t2"][m]) * 1e-6,
                                      _mean(c["t3"][m]) * 1e-6, _mean(c["t4"][m]) * 1e-6,
                                      t5 * 1e-6, int(m.sum()))
    no_call = c["calls"] == 0 if len(name) else np.zeros(0, bool)
    default = OpOverheads(_mean(c["t1"]) * 1e-6, _mean(c["t2"]) * 1e-6,
                          _mean(c["t3"]) * 1e-6, _mean(c["t4"]) * 1e-6,
                          _mean(c["dur"][no_call]) * 1e-6 if len(name) else 0.0,
                          int(len(name)))
    files = ", ".join(t.file for t in traces[:3]) + (" …" if len(traces) > 3 else "")
    table = OverheadTable(default, per_op, 0.0, source=f"measured from {files}")
    lmap = {k: list(v.most_common(1)[0][0]) for k, v in launch_seqs.items()}
    api = {k: api_sum[k] / api_n[k] for k in api_n}
    return TraceStats(table, lmap, api, float(np.median(lat)) if lat else 0.0, len(name))


def _sum_by(keys: np.ndarray, values: np.ndarray):
    """``(unique keys, sums, counts)``."""
    if not len(keys):
        return [], [], []
    u, inv, cnt = np.unique(keys, return_inverse=True, return_counts=True)
    return u.tolist(), np.bincount(inv, weights=values).tolist(), cnt.tolist()


def _idle_launch_latency(tr: KinetoTrace, op: CpuOps) -> list[float]:
    # Collectives are left out: they start on launch but their peers may hold them later.
    from .recording import kernel_category
    comm = np.array([kernel_category(n) == "communication" for n in tr.names], bool)
    dev = np.flatnonzero((op.launcher >= 0) & ~comm[tr.name_id])
    out = []
    for t in np.unique(tr.thread[dev]):
        d = dev[tr.thread[dev] == t]
        d = d[np.argsort(tr.ts[d], kind="stable")]
        call = op.launcher[d]
        prev_end = np.concatenate([[-np.inf], (tr.ts[d] + tr.dur[d])[:-1]])
        idle = prev_end < tr.ts[call]
        gap = tr.ts[d] - tr.ts[call]
        out.extend(gap[idle & (gap >= 0)].tolist())
    return out
