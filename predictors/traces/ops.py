"""The CPU structure of a recorded trace: top-level ops, the runtime calls inside them,
the device work each call launched.  All vectorized over the columns of a KinetoTrace."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .kineto import Kind, KinetoTrace

__all__ = ["CpuOps", "cpu_ops", "runtime_flags", "blocking_copies", "copy_holds"]


def runtime_flags(trace: KinetoTrace) -> tuple[np.ndarray, np.ndarray]:
    """Per name id: ``(is_launch_api, is_sync_api)`` from the runtime call names
    (CUDA runtime and driver, HIP)."""
    launch = np.zeros(len(trace.names), bool)
    sync = np.zeros(len(trace.names), bool)
    for i, n in enumerate(trace.names):
        low = n.lower()
        if "launch" in low or ("memcpy" in low or "memset" in low):
            launch[i] = True
        if "synchronize" in low or low in ("cudamemcpy", "hipmemcpy", "cumemcpy",
                                           "cudamemcpy2d", "hipmemcpy2d"):
            sync[i] = True
    return launch, sync


@dataclass
class CpuOps:
    """Top-level CPU items of one trace in recorded start order (all threads merged).

    An item is a ``cpu_op`` that no other ``cpu_op`` of its thread encloses, or a runtime
    call outside every op (e.g. a bare ``cudaDeviceSynchronize``).  User annotations and
    Python functions are not items: they only group ops.  Neither are *ranges*: ``cpu_op``
    events that group ops rather than being one: ``ProfilerStep#N`` (a ``cpu_op`` in 2021
    traces, a user annotation since) and a ``cpu_op`` holding ops of its own thread inside
    which its thread sat idle while two or more top-level ``cpu_op`` of another thread ran
    (a ``record_function`` around ``backward()``: the thread was blocked while the autograd
    thread worked).  The ops inside a range are the items.

    Attributes
    ----------
    items : event index of each item, sorted by start
    owner : per event, the item (position in ``items``) whose span holds it, -1 if none
    leaf : per event, True for ``cpu_op`` events that enclose no other ``cpu_op``
    launcher : per event, the runtime event that launched this device event, -1 if none
    ranges : event indices of the ranges (see above), sorted
    """

    items: np.ndarray
    owner: np.ndarray
    leaf: np.ndarray
    launcher: np.ndarray
    ranges: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


def _nesting(trace: KinetoTrace, sel: np.ndarray):
    """For events ``sel`` (indices): sorted order, top-level and leaf flags per thread."""
    ts, dur, thr = trace.ts[sel], trace.dur[sel], trace.thread[sel]
    order = np.lexsort((-dur, ts, thr))
    idx = sel[order]
    s, e, t = ts[order], ts[order] + dur[order], thr[order]
    span = float(max(e.max() if len(e) else 0.0, 1.0)) * 2 + 10.0
    # Offsetting each thread by a large constant lets one running maximum serve all threads.
    so, eo = s + t * span, e + t * span
    prev_max = np.empty(len(idx))
    if len(idx):
        prev_max[0] = -np.inf
        prev_max[1:] = np.maximum.accumulate(eo)[:-1]
    top = so >= prev_max
    leaf = np.ones(len(idx), bool)
    if len(idx) > 1:
        # Sorted by (start, -dur): the next event starting inside this one is its child.
        leaf[:-1] = ~((t[1:] == t[:-1]) & (s[1:] < e[:-1]))
    return idx, top, leaf


def _blocking(trace: KinetoTrace, tops: np.ndarray, is_range: np.ndarray) -> np.ndarray:
    """Of the top-level ops ``tops``, those whose thread sat idle inside them while whole
    top-level ops of another thread ran (at least two in one stretch without nested ops or
    calls of its own)."""
    if len(tops) < 2:
        return tops[:0]
    o = np.argsort(trace.ts[tops], kind="stable")
    t = tops[o]
    s, e, th = trace.ts[t], trace.ts[t] + trace.dur[t], trace.thread[t]
    lo = np.arange(len(t)) + 1
    hi = np.searchsorted(s, e, side="left")
    cand = np.flatnonzero(hi > lo)  # something starts inside: mostly another thread's op
    if not len(cand):
        return tops[:0]
    # Per thread, the work nested in top-level ops (ops and runtime calls), by start, with
    # the running maximum of their ends: what of it overlaps [a, b] is one lookup.
    work = np.flatnonzero((trace.kind == Kind.CPU_OP) | (trace.kind == Kind.RUNTIME))
    is_top = is_range.copy()  # ranges found so far enclose everything: not nested work
    is_top[tops] = True
    work = work[~is_top[work]]
    nested = {}
    out = []
    for k in cand.tolist():
        inner = np.arange(lo[k], hi[k])
        inner = inner[(th[inner] != th[k]) & (e[inner] <= e[k])]
        if not len(inner):
            continue
        if th[k] not in nested:
            w = work[trace.thread[work] == th[k]]
            w = w[np.argsort(trace.ts[w], kind="stable")]
            nested[th[k]] = (trace.ts[w], np.maximum.accumulate(trace.ts[w] + trace.dur[w]))
        ws, wmax = nested[th[k]]
        if not len(ws):
            continue  # nothing nested: not a range
        j = np.searchsorted(ws, e[inner], side="left") - 1
        busy = (j >= 0) & (wmax[np.clip(j, 0, None)] > s[inner])
        # Blocked: two or more of them in one idle stretch (a lone one is mostly a
        # coincidence, e.g. the engine's unrecorded work before a node's first op).
        if len(j[~busy]) > len(np.unique(j[~busy])):
            out.append(t[k])
    return np.array(out, np.int64)


def cpu_ops(trace: KinetoTrace) -> CpuOps:
    """Compute :class:`CpuOps` for ``trace``."""
    n = len(trace)
    all_ops = np.flatnonzero(trace.kind == Kind.CPU_OP)
    idx, top, leafs = _nesting(trace, all_ops)
    leaf = np.zeros(n, bool)
    leaf[idx] = leafs
    # Ranges are peeled off (outermost first) until no top-level op is one.
    is_range = np.zeros(n, bool)
    is_range[all_ops] = trace._step_name_mask()[all_ops] if len(all_ops) else False
    ops = all_ops
    tops = idx[top]
    while True:
        if is_range[all_ops].any():
            ops = all_ops[~is_range[all_ops]]
            idx, top, _ = _nesting(trace, ops)
            tops = idx[top]
        more = _blocking(trace, tops, is_range)
        more = more[~leaf[more]] if len(more) else more
        if not len(more):
            break
        is_range[more] = True
    rt = np.flatnonzero(trace.kind == Kind.RUNTIME)
    span = float(max((trace.ts + trace.dur).max(), 1.0)) * 2 + 10.0
    # Runtime calls inside a top-level op of their thread belong to it; others are items.
    key_top = trace.ts[tops] + trace.thread[tops] * span
    o = np.argsort(key_top, kind="stable")
    tops_sorted, key_sorted = tops[o], key_top[o]
    end_sorted = key_sorted + trace.dur[tops_sorted]
    key_rt = trace.ts[rt] + trace.thread[rt] * span
    j = np.searchsorted(key_sorted, key_rt, side="right") - 1
    inside = (j >= 0)
    jj = np.clip(j, 0, None)
    inside &= key_rt <= end_sorted[jj] if len(end_sorted) else False
    bare = rt[~inside] if len(end_sorted) else rt
    items = np.concatenate([tops, bare])
    items = items[np.lexsort((-trace.dur[items], trace.ts[items]))]
    pos = np.full(n, -1, np.int64)
    pos[items] = np.arange(len(items))
    owner = np.full(n, -1, np.int64)
    owner[items] = pos[items]
    if len(end_sorted):
        owner[rt[inside]] = pos[tops_sorted[jj[inside]]]
        # Nested ops belong to the top-level op of their thread that holds them.
        key_op = trace.ts[ops] + trace.thread[ops] * span
        jo = np.clip(np.searchsorted(key_sorted, key_op, side="right") - 1, 0, None)
        hold = key_op <= end_sorted[jo]
        owner[ops[hold]] = pos[tops_sorted[jo[hold]]]
        owner[items] = np.arange(len(items))
    # Device events -> the runtime call with the same correlation id.
    launcher = np.full(n, -1, np.int64)
    dev = np.flatnonzero(trace.thread_is_device[trace.thread] & (trace.corr >= 0))
    rt_c = rt[trace.corr[rt] >= 0]
    if len(dev) and len(rt_c):
        oc = np.argsort(trace.corr[rt_c], kind="stable")
        corr_sorted = trace.corr[rt_c][oc]
        k = np.searchsorted(corr_sorted, trace.corr[dev])
        kk = np.clip(k, 0, len(corr_sorted) - 1)
        hit = corr_sorted[kk] == trace.corr[dev]
        launcher[dev[hit]] = rt_c[oc][kk[hit]]
    elif len(dev) and trace.flow_starts:
        # No correlation ids on the CPU side: a flow's start names the launching call.
        for i in dev:
            fs = trace.flow_starts.get(int(trace.corr[i]))
            if fs is None:
                continue
            cand = rt[(trace.thread[rt] == fs[0]) & (np.abs(trace.ts[rt] - fs[1]) < 1e-3)]
            if len(cand):
                launcher[i] = cand[0]
    return CpuOps(items, owner, leaf, launcher, np.flatnonzero(is_range))


def copy_holds(trace: KinetoTrace, ops: CpuOps) -> np.ndarray:
    """Per event: for a copy call (``cudaMemcpyAsync`` ...) that waited for its copy, how
    long before the copy's end it returned (us); NaN for every other event.

    A copy to or from pageable host memory goes through the driver's pinned staging
    buffers: device to host, the call returns once the copy has ended; host to device, a
    large copy holds the call while its chunks are staged and returns with the last chunk
    in flight (a ResNet batch of 1.9 ms: 80 us before the copy ends), while a small one is
    staged at once and returns before its copy runs.  So a copy call waits when it
    returned after its copy had started (or, for any copy, after it had ended)."""
    out = np.full(len(trace), np.nan)
    dev = np.flatnonzero((ops.launcher >= 0) & (trace.kind == Kind.MEMCPY))
    if not len(dev):
        return out
    call = ops.launcher[dev]
    call_end = trace.ts[call] + trace.dur[call]
    copy_end = trace.ts[dev] + trace.dur[dev]
    pageable = np.array(["pageable" in n.lower() for n in trace.names])[trace.name_id[dev]]
    done = call_end >= copy_end - 1.0
    staged = pageable & (call_end > trace.ts[dev] + 1.0)
    hold = done | staged
    out[call[hold]] = np.maximum(0.0, copy_end - call_end)[hold]
    return out


def blocking_copies(trace: KinetoTrace, ops: CpuOps) -> np.ndarray:
    """Per event: True for a copy call that waited for its copy (:func:`copy_holds`)."""
    return ~np.isnan(copy_holds(trace, ops))
