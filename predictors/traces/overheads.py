"""CPU overheads (the papers' T1-T5) and launch maps measured from a recorded trace.

For every top-level CPU op (see :class:`~predictors.traces.ops.CpuOps`):

- T1: the gap since the previous top-level item of the same thread ended, or, where the
  item waited for another thread (see :func:`thread_waits`), since that thread's item
  ended;
- T2: op start to its first runtime call (the launch);
- T3: the end of its last runtime call to the op's end;
- T4: the duration of its launch calls (not counting copies that waited for their copy to
  end: :func:`~predictors.traces.ops.blocking_copies`);
- T5: the mean gap between consecutive runtime calls inside it, or, for an op that makes
  none, its whole CPU time.

Per op name these are averaged into :class:`~predictors.profiles.OpOverheads` (seconds),
the form that device profiles store, with a pooled default.  T4 is the mean over all
launch calls and T5 the mean over all gaps between calls and call-free ops together (not
the mean of per-op means),
so that an op name replayed with its mean overheads takes its recorded total time even
when its calls per op vary (a ``conv2d`` that makes 2 calls here and 11 there).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..engine.timeline import CATEGORIES
from ..profiles import OpOverheads, OverheadTable
from .kineto import Kind, KinetoTrace
from .ops import CpuOps, blocking_copies, cpu_ops, runtime_flags
from .recording import kernel_categories

__all__ = ["ItemTimes", "item_times", "thread_waits", "TraceStats", "overhead_stats"]

# An idle stretch of a thread is a wait when it is this many times the thread's median gap
# between items, and at least WAIT_MIN_US.
WAIT_FACTOR = 5.0
WAIT_MIN_US = 50.0


@dataclass
class ItemTimes:
    """Per top-level item (aligned with ``CpuOps.items``), microseconds."""

    t1: np.ndarray       # NaN for a thread's first item that waited for nothing
    t2: np.ndarray       # NaN where the item makes no runtime call
    t3: np.ndarray
    t4: np.ndarray       # mean launch-call duration, NaN without launches
    t5_gap: np.ndarray   # mean gap between calls, NaN with fewer than two calls
    n_calls: np.ndarray
    is_op: np.ndarray    # a cpu_op (False: a bare runtime call)
    prev: np.ndarray = None  # the previous item of the same thread, -1 if none
    wait: np.ndarray = None  # the item of another thread it waited for, -1 if none
    n_launches: np.ndarray = None  # launch calls counted in t4


def thread_waits(trace: KinetoTrace, ops: CpuOps) -> tuple[np.ndarray, np.ndarray]:
    """Per top-level item: ``(prev, wait)``, positions in ``ops.items`` (-1: none).

    ``prev`` is the previous item of the same thread.  ``wait`` is the item of another
    thread that this one waited for: where the thread sat idle before the item for longer
    than its own gaps explain (``WAIT_FACTOR`` times its median gap, at least
    ``WAIT_MIN_US``; a thread's first item always qualifies) and items of other threads
    ended meanwhile, the last item of the thread that worked most in that stretch (so a
    thread that only polls now and then is not mistaken for the one waited for).
    Examples: the autograd thread starting ``backward`` when the main thread's loss op
    ended; the main thread resuming after the autograd thread's last node.  Threads that
    run side by side with ordinary gaps do not wait for each other."""
    it = ops.items
    n = len(it)
    prev = np.full(n, -1, np.int64)
    wait = np.full(n, -1, np.int64)
    if not n:
        return prev, wait
    s = trace.ts[it]
    e = s + trace.dur[it]
    th = trace.thread[it]
    by_thread = np.lexsort((np.arange(n), th))  # items are sorted by start already
    same = np.zeros(n, bool)
    same[1:] = th[by_thread[1:]] == th[by_thread[:-1]]
    prev[by_thread[same]] = by_thread[np.flatnonzero(same) - 1]
    has = prev >= 0
    gap = np.full(n, np.inf)
    gap[has] = s[has] - e[prev[has]]
    limit = np.full(n, WAIT_MIN_US)
    for t in np.unique(th).tolist():
        m = th == t
        g = gap[m & has]
        if len(g):
            limit[m] = max(WAIT_MIN_US, WAIT_FACTOR * float(np.median(np.clip(g, 0, None))))
    waiting = np.flatnonzero(gap > limit)
    threads = np.unique(th).tolist()
    if len(waiting) and len(threads) > 1:
        # Per thread: its items' starts and ends (they do not overlap, so both are sorted)
        # and the running sum of their durations, to weigh how busy it was in a stretch.
        per = {}
        for t in threads:
            k = np.flatnonzero(th == t)
            per[t] = (k, s[k], e[k], np.concatenate([[0.0], np.cumsum(e[k] - s[k])]))
        for i in waiting.tolist():
            idle_from = e[prev[i]] if prev[i] >= 0 else -np.inf
            best = None
            for t in threads:
                if t == th[i]:
                    continue
                k, ts_, te_, cum = per[t]
                hi = int(np.searchsorted(te_, s[i], side="right"))  # items ended by s_i
                while hi > 0 and k[hi - 1] >= i:
                    hi -= 1
                if hi == 0 or te_[hi - 1] <= idle_from:
                    continue  # nothing of this thread ended while i's thread sat idle
                lo = int(np.searchsorted(ts_, idle_from, side="left"))
                busy = cum[hi] - cum[min(lo, hi)]
                key = (busy, te_[hi - 1])
                if best is None or key > best[0]:
                    best = (key, int(k[hi - 1]))
            if best is not None:
                wait[i] = best[1]
    return prev, wait


def item_times(trace: KinetoTrace, ops: CpuOps) -> ItemTimes:
    """T1-T5 of every top-level item of ``trace``."""
    it = ops.items
    n = len(it)
    s, d = trace.ts[it], trace.dur[it]
    e = s + d
    prev, wait = thread_waits(trace, ops)
    ref = np.full(n, np.nan)
    ref[prev >= 0] = e[prev[prev >= 0]]
    ref[wait >= 0] = np.fmax(ref[wait >= 0], e[wait[wait >= 0]])
    with np.errstate(invalid="ignore"):
        t1 = np.clip(s - ref, 0.0, None)
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
    is_launch = launch[trace.name_id[rt]] & ~blocking_copies(trace, ops)[rt]
    nl = np.bincount(own[is_launch], minlength=n)
    ld = np.bincount(own[is_launch], weights=trace.dur[rt][is_launch], minlength=n)
    has = calls > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        t2 = np.where(has, first - s, np.nan)
        t3 = np.where(has, e - last, np.nan)
        t4 = np.where(nl > 0, ld / nl, np.nan)
        t5 = np.where(calls > 1, (last - first - call_dur) / (calls - 1), np.nan)
    return ItemTimes(t1, np.clip(t2, 0, None), np.clip(t3, 0, None), t4,
                     np.clip(t5, 0, None), calls, is_op, prev, wait, nl)


@dataclass
class TraceStats:
    """What a trace teaches about the CPU side of its platform."""

    overheads: OverheadTable
    launch_map: dict[str, list[str]] = field(default_factory=dict)
    api_us: dict[str, float] = field(default_factory=dict)  # mean duration per runtime call
    # (blocking ones left out: synchronizations, copies that waited for the copy)
    launch_latency_us: float = 0.0  # launch-call start to kernel start on an idle stream
    ops: int = 0


def _mean(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    return float(x.mean()) if len(x) else 0.0


def _wmean(x: np.ndarray, w: np.ndarray) -> float:
    ok = np.isfinite(x) & (w > 0)
    return float(np.average(x[ok], weights=w[ok])) if ok.any() else 0.0


def overhead_stats(traces: KinetoTrace | list[KinetoTrace],
                   ops: list[CpuOps] | None = None) -> TraceStats:
    """Measure :class:`TraceStats` over one trace or the ranks of one job (pooled)."""
    traces = [traces] if isinstance(traces, KinetoTrace) else list(traces)
    ops = ops or [cpu_ops(t) for t in traces]
    cols = {k: [] for k in ("name", "t1", "t2", "t3", "t4", "t5g", "calls", "dur", "nl")}
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
                     ("calls", times.n_calls.astype(float)), ("dur", tr.dur[op.items]),
                     ("nl", times.n_launches.astype(float))):
            cols[k].append(v[sel])
        _, sync = runtime_flags(tr)
        rt = np.flatnonzero(tr.kind == Kind.RUNTIME)
        keep = rt[~sync[tr.name_id[rt]] & ~blocking_copies(tr, op)[rt]]
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
        t5 = _t5(c["dur"][m], c["t5g"][m], calls)
        per_op[str(nm)] = OpOverheads(_mean(c["t1"][m]) * 1e-6, _mean(c["t2"][m]) * 1e-6,
                                      _mean(c["t3"][m]) * 1e-6,
                                      _wmean(c["t4"][m], c["nl"][m]) * 1e-6,
                                      t5 * 1e-6, int(m.sum()))
    no_call = c["calls"] == 0 if len(name) else np.zeros(0, bool)
    default = OpOverheads(_mean(c["t1"]) * 1e-6, _mean(c["t2"]) * 1e-6,
                          _mean(c["t3"]) * 1e-6, _wmean(c["t4"], c["nl"]) * 1e-6,
                          _mean(c["dur"][no_call]) * 1e-6 if len(name) else 0.0,
                          int(len(name)))
    files = ", ".join(t.file for t in traces[:3]) + (" …" if len(traces) > 3 else "")
    table = OverheadTable(default, per_op, 0.0, source=f"measured from {files}")
    lmap = {k: list(v.most_common(1)[0][0]) for k, v in launch_seqs.items()}
    api = {k: api_sum[k] / api_n[k] for k in api_n}
    return TraceStats(table, lmap, api, float(np.median(lat)) if lat else 0.0, len(name))


def _t5(dur: np.ndarray, gap: np.ndarray, calls: np.ndarray) -> float:
    """One T5 for ops of one name: the CPU time per gap between calls, where a call-free
    op counts as one gap of its whole duration.  Pooled this way the name's ops keep their
    recorded total when some make calls and some none (a ``ViewBackward0`` that copies once
    beside ones that only reshape)."""
    no_call = calls == 0
    many = (calls > 1) & np.isfinite(gap)
    n = no_call.sum() + (calls[many] - 1).sum()
    total = dur[no_call].sum() + (gap[many] * (calls[many] - 1)).sum()
    return float(total / n) if n else 0.0


def _sum_by(keys: np.ndarray, values: np.ndarray):
    """``(unique keys, sums, counts)``."""
    if not len(keys):
        return [], [], []
    u, inv, cnt = np.unique(keys, return_inverse=True, return_counts=True)
    return u.tolist(), np.bincount(inv, weights=values).tolist(), cnt.tolist()


def _idle_launch_latency(tr: KinetoTrace, op: CpuOps) -> list[float]:
    # Collectives are left out: they start on launch but their peers may hold them later.
    comm = kernel_categories(tr) == CATEGORIES.index("communication")
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
