"""CPU overheads of GPU training, measured per aten op from real recorded traces and
pooled into the table that GPU profiles store (the papers' T1-T5, per op name).

The simulator walks *captured* ops: the aten ops that reach the dispatcher, one CPU
interval each.  In a recording of an unknown model those are the *dispatch-level* ops
(:mod:`predictors.traces.dispatch`: the outermost aten compute ops that torch does not
decompose before the dispatcher; ``aten::native_layer_norm``, not the ``aten::empty``
inside it nor the ``aten::layer_norm`` around it), so the overheads are measured on them:

- T1: the gap since the previous such op of the same thread ended.  It holds the time of
  views, of the wrappers around the op (``aten::linear`` around ``aten::addmm``), the
  autograd engine between backward ops, Python between modules; views therefore cost
  nothing of their own.  Gaps longer than :data:`MAX_GAP_US` are left out: the CPU was
  waiting (data loading, a synchronization) rather than dispatching (and ops running
  longer than that without a launch work on CPU tensors: they are left out too);
- T2: op start to its first runtime call; T4: the mean kernel-launch call duration; T3:
  the rest of the op's CPU time (its other calls, allocations); T5: the whole CPU time of
  an op that launches nothing.  Ops that block in a synchronizing call are left out of T3,
  and any sample over :data:`MAX_GAP_US` is a wait or a one-off (autotuning, an
  allocation), not per-op dispatch, and is left out.

The overheads are read on the ops the capture sees, not on leaf ops (those enclosing no
other op), whose names are not the ones the simulator asks for: on the H200's own traces
leaf-op overheads predict launch-bound LMs 60 % too slow.

Jobs are grouped by host (for the public traces: the folder they came from) and every
host weighs the same in the pool: one host's four jobs must not outvote three others.
Backward ops (those on a thread other than the one running the steps, or under the
autograd engine) also get ``backward:<name>`` entries.  The launch map lists the kernels
each op name launched most often.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import replace

import numpy as np

from ..model.op_classes import VIEW_OPS
from ..profiles import OpOverheads, OverheadTable
from .dispatch import (
    dispatch_level_ops,
    dispatched_names,
    innermost_ops,
    nest,
    runtime_calls_per_op,
)
from .kineto import Kind, TraceError
from .ops import runtime_flags
from .recording import Recording

__all__ = ["trace_overheads", "overheads_from_recording", "overhead_check", "innermost_ops", "MAX_GAP_US", "MIN_SAMPLES"]

MAX_GAP_US = 1000.0
MIN_SAMPLES = 3  # entries with fewer samples fall back to the name or the pooled default


class _Acc:
    """T1-T5 samples (us) of one key."""

    __slots__ = ("samples",)

    def __init__(self):
        self.samples: tuple[list[float], ...] = ([], [], [], [], [])

    def add(self, values) -> None:
        for col, v in zip(self.samples, values):
            if v is not None and v == v and v <= MAX_GAP_US:
                col.append(v)

    def count(self) -> int:
        return max(len(c) for c in self.samples)



def _op_samples(tr, op):
    """Yield ``(name, backward, (t1, t2, t3, t4, t5), (duration, launches, blocked),
    launched kernel names)`` per dispatch-level op of one trace (times in us): the ops a
    capture records (:mod:`predictors.traces.dispatch`), with the runtime calls and
    kernels of the ops nested inside them."""
    cpu = np.flatnonzero(tr.kind == Kind.CPU_OP)
    if not len(cpu):
        return
    order, parent = nest(tr, cpu)
    captured = dispatched_names({tr.names[j] for j in np.unique(tr.name_id[cpu]).tolist()})
    chosen = dispatch_level_ops(tr, order, parent, captured)
    if not chosen:
        return
    _, sync = runtime_flags(tr)
    kernel_launch = np.array(["launch" in n.lower() for n in tr.names], bool)
    calls = runtime_calls_per_op(tr, np.flatnonzero(tr.kind == Kind.RUNTIME), parent,
                                 set(chosen))
    owner = {c: e for e, cs in calls.items() for c in cs}
    kernels: dict[int, list[str]] = defaultdict(list)
    dev = np.flatnonzero(op.launcher >= 0)
    for k in dev[np.argsort(tr.ts[dev], kind="stable")].tolist():
        holder = owner.get(int(op.launcher[k]))
        if holder is not None:
            kernels[holder].append(tr.names[tr.name_id[k]])
    is_step = np.array([n.startswith("ProfilerStep") for n in tr.names], bool)
    step_threads = {int(t) for t in tr.thread[is_step[tr.name_id]]}
    engine = np.array(["autograd::engine" in n for n in tr.names], bool)
    bwd_spans = np.flatnonzero((tr.kind == Kind.CPU_OP) & engine[tr.name_id])
    bwd_threads = {int(t) for t in tr.thread[bwd_spans]}
    chosen = np.array(chosen, np.int64)
    chosen = chosen[np.lexsort((tr.ts[chosen], tr.thread[chosen]))]
    prev_end, prev_thread = None, None
    for i in chosen.tolist():
        thread = int(tr.thread[i])
        start, end = float(tr.ts[i]), float(tr.ts[i] + tr.dur[i])
        t1 = None
        if prev_thread == thread:
            gap = start - prev_end
            t1 = gap if 0.0 <= gap <= MAX_GAP_US else None
        prev_end, prev_thread = end, thread
        cs = calls.get(i, [])
        name = tr.names[tr.name_id[i]]
        backward = (thread in bwd_threads and thread not in step_threads) or \
            name.endswith("Backward0")
        if not cs:
            # An op that runs for milliseconds without launching works on CPU tensors
            # (data preparation): not dispatch overhead.
            t5 = end - start if end - start <= MAX_GAP_US else None
            yield name, backward, (t1, None, None, None, t5), (end - start, 0, t5 is None), []
            continue
        first, last = cs[0], cs[-1]
        t2 = float(tr.ts[first]) - start
        blocked = any(sync[tr.name_id[c]] for c in cs)
        t3 = None if blocked else end - float(tr.ts[last] + tr.dur[last])
        # T4: kernel launches only (a cudaMemcpyAsync from pageable memory is a copy).
        lds = [float(tr.dur[c]) for c in cs if kernel_launch[tr.name_id[c]]]
        t4 = float(np.mean(lds)) if lds else None
        # T3 spans the op's other launches and calls: the op's CPU time is T2 + T4 + T3
        if t3 is not None and t4 is not None:
            t3 = end - start - max(t2, 0.0) - t4
        yield (name, backward, (t1, max(t2, 0.0), None if t3 is None else max(t3, 0.0), t4, None),
               (end - start, len(lds), blocked), kernels.get(i, []))


def _pool(hosts: list[dict[str, _Acc]], key: str, fallback: OpOverheads | None) -> OpOverheads:
    """Each host's mean (the simulator adds these up, so means, with the waits left out as
    described above), then the least of those means over the hosts that have samples:
    every host counts once, however many ops it recorded.  A recorded op's overhead is its
    dispatch cost plus what the profiler and an older host add, so the fastest host is the
    nearest to a current host running without the profiler.  Leaving one host out of
    the public recordings, the least predicts the left-out host's dispatch time 21.7 %
    off (geomean), the median 47.3 % (``kernels build-profiles --overheads-only``)."""
    fb = ((fallback.t1, fallback.t2, fallback.t3, fallback.t4, fallback.t5)
          if fallback is not None else (0.0,) * 5)
    vals = []
    for kind in range(5):
        means = [float(np.mean(h[key].samples[kind])) for h in hosts
                 if key in h and h[key].samples[kind]]
        vals.append(float(np.min(means)) * 1e-6 if means else fb[kind])
    return OpOverheads(*vals, n=sum(h[key].count() for h in hosts if key in h))


def trace_overheads(recordings: list[Recording], hosts: list[str] | None = None
                    ) -> tuple[OverheadTable, dict, dict]:
    """Pool leaf-op overheads over ``recordings`` (each one job), every host weighing the
    same (see :func:`_pool`): ``hosts`` names the host (or source) of each recording, and
    the jobs of one host are pooled first (default: every job its own host).

    Returns ``(table, launch map, info)``; ``info`` says how many ops of which devices and
    files went in."""
    hosts = hosts or [str(i) for i in range(len(recordings))]
    by_host: dict[str, dict[str, _Acc]] = {}
    launches: dict[str, Counter] = defaultdict(Counter)
    files, devices, n_ops, n_launching = [], Counter(), 0, 0
    for rec, host in zip(recordings, hosts):
        per = by_host.setdefault(host, defaultdict(_Acc))
        for tr, op in zip(rec.traces, rec.ops):
            files.append(tr.file)
            count = 0
            for name, backward, t, _, kernels in _op_samples(tr, op):
                per[name].add(t)
                if backward:
                    per[f"backward:{name}"].add(t)
                per[""].add(t)  # every op: the pooled default
                if kernels:
                    launches[name][tuple(kernels)] += 1
                n_launching += bool(t[3] is not None)
                count += 1
            n_ops += count
            devices[tr.device_name or "CPU"] += count
    jobs = list(by_host.values())
    default = _pool(jobs, "", None)
    keys = {k for j in jobs for k, acc in j.items() if k and acc.count() >= MIN_SAMPLES}
    # views run inside the gaps measured before the ops around them
    table = {f"aten::{v}": OpOverheads(0.0, 0.0, 0.0, 0.0, 0.0) for v in VIEW_OPS}
    table.update({k: _pool(jobs, k, default) for k in sorted(keys)})
    src = (f"measured from {len(recordings)} recorded GPU job(s) of {len(jobs)} host(s), "
           f"{len(files)} file(s) ({', '.join(sorted(devices))}): per aten op, the least "
           "over hosts of each host's mean")
    lmap = {k: list(v.most_common(1)[0][0]) for k, v in launches.items()}
    info = {"files": files, "ops": n_ops, "launches": n_launching,
            "ops_per_device": dict(devices), "op_names": len(table)}
    return OverheadTable(default, table, 0.0, src), lmap, info


def overheads_from_recording(rec: Recording, label: str) -> tuple[OverheadTable, dict]:
    """T1-T5 of the user's own recording (the ranks of one job) for ``predict(overheads=)``;
    the table's source names ``label``.  Raises :class:`TraceError` with one line for a
    CPU-only trace (its op times include the kernels) or one without ops or launches."""
    if not any(tr.device_name for tr in rec.traces):
        raise TraceError(f"{label}: records no GPU: a CPU-only trace's op times include "
                         "the kernels (on the CPU, calibrate this device instead)")
    table, _, info = trace_overheads([rec])
    if not info["ops"] or not info["launches"]:
        raise TraceError(f"{label}: records no "
                         f"{'CPU ops' if not info['ops'] else 'kernel launches'} "
                         "to measure T1-T5 on")
    info["devices"] = sorted({tr.device_name for tr in rec.traces if tr.device_name})
    source = f"measured from {label} ({info['ops']:,} ops on {', '.join(info['devices'])})"
    return replace(table, source=source), info


def overhead_check(jobs: dict[str, Recording], hosts: dict[str, str] | None = None
                   ) -> dict[str, dict]:
    """Leave one host out (``hosts``: job -> host; default every job its own): pool the
    overheads of the other hosts' jobs and predict each job's CPU dispatch time, the sum over its leaf ops of T1 + (T2 + launches x T4 + T3, or T5),
    against the recorded sum of their T1 gaps and durations.  Ops that block in a
    synchronizing call or run longer than :data:`MAX_GAP_US` are left out on both sides
    (their time is a wait)."""
    out = {}
    hosts = hosts or {k: k for k in jobs}
    for name, rec in jobs.items():
        others = [k for k in jobs if hosts[k] != hosts[name]]
        if not others:  # nothing to pool without this host
            out[name] = {"ops": 0, "recorded_ms": 0.0, "predicted_ms": 0.0, "error_pct": None}
            continue
        table, _, _ = trace_overheads([jobs[k] for k in others], [hosts[k] for k in others])
        recorded = predicted = 0.0
        ops = 0
        for tr, op in zip(rec.traces, rec.ops):
            for nm, backward, t, (dur, launches, blocked), _ in _op_samples(tr, op):
                if blocked or t[0] is None or dur > MAX_GAP_US:
                    continue  # waits, not dispatch (as in the pool)
                o = table.for_op(nm, "backward" if backward else None)
                cpu = (o.t2 + o.t4 + o.t3) if launches else o.t5  # as the simulator
                predicted += (o.t1 + cpu) * 1e6
                recorded += t[0] + dur
                ops += 1
        out[name] = {"ops": ops, "recorded_ms": recorded / 1e3, "predicted_ms": predicted / 1e3,
                     "error_pct": 100.0 * (predicted / recorded - 1.0) if recorded else None}
    return out
