"""Replay a recorded job: re-simulate its op graph with the recorded kernel durations and
the overheads measured from it, and compare the step time with the recording.

The replay runs through the same simulator as every prediction
(:mod:`predictors.engine.simulator`), so a replay that matches its recording vouches for
the rules the predictions use.  What a recording gives the simulator:

- the CPU: each thread of a rank has its own clock and walks its top-level ops in recorded
  order (ranges such as a 2021 ``ProfilerStep#N`` op are not ops: their contents are,
  :class:`~predictors.traces.ops.CpuOps`); each op takes its name's mean T1 gap, T2 to
  its first runtime call, T5 between calls, T4 per launch and T3 after the last call
  (:mod:`~predictors.traces.overheads`);
- an op that waited for another thread in the recording (its thread sat idle longer than
  its gaps explain while that thread worked: the autograd thread starting ``backward``,
  the main thread resuming after it; :func:`~predictors.traces.overheads.thread_waits`)
  starts its T1 gap when the op it waited for ends, if that is later than its own
  thread's clock; a thread's first op that waited for nothing starts when it did in the
  recording.  Ops are visited in recorded start order, which is also the order their
  kernels queue on a stream;
- a kernel starts at ``max(launch call + launch latency, stream free, inputs ready)``;
  the kernels one call launches (a CUDA graph's nodes) keep the spacing they had on the
  device, which the GPU spends launching each node;
  cross-stream waits are the ones the recording shows: a device event that started later
  than its launch and its stream allowed waited for the event on another stream of its
  rank that ended last before it started, and starts as long after that one's end as it
  did in the recording (an event wait takes a few microseconds);
- a blocking call (``cudaStreamSynchronize``, ``cudaDeviceSynchronize``, a synchronous
  ``cudaMemcpy``) holds the CPU until the stream it waited for drains; a copy call that
  waited for its copy (pageable host memory, :func:`~predictors.traces.ops.copy_holds`)
  holds it until that copy ends, or, for an upload staged chunk by chunk, until as long
  before the copy's end as it returned in the recording;
- a collective (NCCL/RCCL kernel) starts on every rank when the last rank reaches it, and
  then runs for its transfer time: the shortest recorded duration of that collective over
  the ranks (the last rank to arrive did not wait).  The ranks' collectives meet in the
  order each rank issues them; ranks that issue them in different orders are an error.

Each rank enters the replay when it entered its recorded step (the skew between ranks is
an input, as in the recording).  By default every rank replays with the overheads measured
from its own trace (ranks of one job can run on CPUs of different speed).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..engine.simulator import ALL_STREAMS, Call, Item, Kernel, RankResult, simulate
from ..engine.timeline import CATEGORIES, Lane, Span, Timeline
from .kineto import Kind, KinetoTrace, TraceError, stream_label
from .ops import CpuOps, copy_holds, runtime_flags
from .overheads import TraceStats, item_times, overhead_stats
from .recording import Recording, kernel_categories, kernel_category

__all__ = ["ReplayResult", "replay"]

_COMM = CATEGORIES.index("communication")


@dataclass
class ReplayResult:
    """Replayed and recorded step times (ms) per rank, and the replayed Timeline."""

    iteration_ms: float
    recorded_ms: float
    per_rank: list[dict]
    timeline: Timeline
    notes: list[str] = field(default_factory=list)

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.iteration_ms - self.recorded_ms) / max(self.recorded_ms, 1e-12)

    def to_json(self) -> dict:
        return {"iteration_ms": self.iteration_ms, "recorded_ms": self.recorded_ms,
                "error_pct": self.error_pct, "per_rank": self.per_rank, "notes": self.notes}


class _Rank:
    """The replay inputs of one rank, prepared once: its items for the simulator, and its
    bars from the simulator's times."""

    def __init__(self, tr: KinetoTrace, op: CpuOps, stats: TraceStats,
                 durations: np.ndarray | None = None):
        self.tr, self.op = tr, op
        # Device-event durations to replay with: recorded, or modeled where given.
        self.dur = (tr.dur if durations is None
                    else np.where(np.isnan(durations), tr.dur, durations))
        steps = tr.steps()
        if steps:
            self.steps = [(n, s, d) for n, s, d in steps]
            w0, w1 = steps[0][1], steps[-1][1] + steps[-1][2]
        else:
            cpu = tr.kind[op.items] if len(op.items) else np.zeros(0)
            w0 = float(tr.ts[op.items].min()) if len(cpu) else 0.0
            w1 = float((tr.ts + tr.dur).max())
            self.steps = [("trace", w0, w1 - w0)]
        self.w0, self.w1 = w0, w1
        its = op.items
        sel = (tr.ts[its] >= w0) & (tr.ts[its] < w1)
        self.item_pos = np.flatnonzero(sel)
        self.items = its[sel]
        times = item_times(tr, op)
        self.rec_t1 = times.t1
        self.wait = times.wait
        launch, sync = runtime_flags(tr)
        self.is_launch, self.is_sync = launch, sync
        self.holds = copy_holds(tr, op)
        # Runtime calls per item, in time order.
        rt = np.flatnonzero((tr.kind == Kind.RUNTIME) & (op.owner >= 0))
        rt = rt[np.lexsort((tr.ts[rt], op.owner[rt]))]
        self.calls: dict[int, list[int]] = {}
        for i, o in zip(rt.tolist(), op.owner[rt].tolist()):
            if o != -1 and tr.kind[op.items[o]] == Kind.CPU_OP:
                self.calls.setdefault(o, []).append(i)
        # Device work per launching call.
        dev = np.flatnonzero(op.launcher >= 0)
        self.launched: dict[int, list[int]] = {}
        for k in dev[np.argsort(tr.ts[dev], kind="stable")].tolist():
            self.launched.setdefault(int(op.launcher[k]), []).append(k)
        self.is_comm = np.zeros(len(tr), bool)
        kern = np.flatnonzero(tr.kind == Kind.KERNEL)
        comm_names = kernel_categories(tr) == _COMM
        self.is_comm[kern] = comm_names[tr.name_id[kern]]
        # Collectives in recorded start order (matched across ranks by position).
        launched_all = np.array(sorted(k for ks in self.launched.values() for k in ks), int)
        in_window = launched_all[np.isin(op.owner[op.launcher[launched_all]],
                                         self.item_pos)] if len(launched_all) else launched_all
        comm = in_window[self.is_comm[in_window]] if len(in_window) else in_window
        self.comm = comm[np.argsort(tr.ts[comm], kind="stable")]
        self.comm_pos = {int(k): q for q, k in enumerate(self.comm.tolist())}
        self.deps = self._infer_deps(in_window, stats.launch_latency_us)
        self.sync_stream = self._infer_sync_streams()
        oh = stats.overheads
        self.oh = {}
        for i in self.items.tolist():
            nm = tr.names[tr.name_id[i]]
            if nm not in self.oh:
                o = oh.for_op(nm)
                self.oh[nm] = (o.t1 * 1e6, o.t2 * 1e6, o.t3 * 1e6, o.t4 * 1e6, o.t5 * 1e6)
        # Bare runtime calls: their name's mean gap before them.
        bare = ~(tr.kind[self.items] == Kind.CPU_OP)
        self.bare_t1 = {}
        for nid in np.unique(tr.name_id[self.items[bare]]).tolist():
            m = bare & (tr.name_id[self.items] == nid)
            t1 = self.rec_t1[self.item_pos[m]]
            t1 = t1[np.isfinite(t1)]
            self.bare_t1[nid] = float(t1.mean()) if len(t1) else 0.0

    def _infer_deps(self, dev: np.ndarray, lat: float) -> dict[int, int]:
        """Device event -> device event on another stream that it waited for: the one that
        ended last between when it could have started and when it did."""
        tr = self.tr
        deps: dict[int, int] = {}
        if not len(dev):
            return deps
        ends = tr.ts[dev] + tr.dur[dev]
        order = np.argsort(ends, kind="stable")
        ends_sorted, dev_sorted = ends[order], dev[order]
        prev_end: dict[int, float] = {}
        for k in dev[np.argsort(tr.ts[dev], kind="stable")].tolist():
            s = float(tr.ts[k])
            stream = int(tr.thread[k])
            call = int(self.op.launcher[k])
            earliest = max(float(tr.ts[call]) + lat, prev_end.get(stream, -np.inf))
            prev_end[stream] = s + float(tr.dur[k])
            if s <= earliest + 2.0:
                continue  # started as soon as it could: no hidden dependency
            j = int(np.searchsorted(ends_sorted, s + 1.0, side="right")) - 1
            while j >= 0 and ends_sorted[j] > earliest:
                cand = int(dev_sorted[j])
                if int(tr.thread[cand]) != stream:
                    deps[k] = cand
                    break
                j -= 1
        return deps

    def _infer_sync_streams(self) -> dict[int, int]:
        """Blocking call -> the stream whose last work ended as it returned (-1: all)."""
        tr = self.tr
        dev = np.flatnonzero(tr.thread_is_device[tr.thread] & (tr.kind != Kind.GPU_ANNOTATION))
        out = {}
        if not len(dev):
            return out
        ends = tr.ts[dev] + tr.dur[dev]
        order = np.argsort(ends, kind="stable")
        ends_sorted, dev_sorted = ends[order], dev[order]
        rt = np.flatnonzero((tr.kind == Kind.RUNTIME) & self.is_sync[tr.name_id])
        for i in rt.tolist():
            name = tr.names[tr.name_id[i]].lower()
            if "device" in name:
                out[i] = -1
                continue
            e = float(tr.ts[i] + tr.dur[i])
            j = int(np.searchsorted(ends_sorted, e + 2.0, side="right")) - 1
            out[i] = int(tr.thread[dev_sorted[j]]) if j >= 0 else -1
        return out

    # --- the simulator's program --------------------------------------------------------

    def program(self, lat: float, api_us: dict, n_sync: int) -> list[Item]:
        """The rank's items for :func:`~predictors.engine.simulator.simulate`: its first
        ``n_sync`` collectives meet the other ranks' (0: a lone rank's run as recorded)."""
        tr, names = self.tr, self.tr.names
        at = {pos: n for n, pos in enumerate(self.item_pos.tolist())}
        items = []
        for pos, i in zip(self.item_pos.tolist(), self.items.tolist()):
            nm = names[tr.name_id[i]]
            w = int(self.wait[pos])
            common = dict(thread=int(tr.thread[i]), waits_for=at.get(w, -1) if w >= 0 else -1,
                          start_at=float(tr.ts[i]), payload=(i, nm))
            if tr.kind[i] == Kind.CPU_OP:
                t1, t2, t3, t4, t5 = self.oh[nm]
                calls = tuple(self._call(c, t4 if self.is_launch[tr.name_id[c]] else None,
                                         lat, api_us, n_sync)
                              for c in self.calls.get(pos, []))
                items.append(Item(gap_us=t1, t2_us=t2, t5_us=t5, t3_us=t3, calls=calls,
                                  **common))
            else:  # a bare runtime call
                items.append(Item(gap_us=self.bare_t1.get(int(tr.name_id[i]), 0.0),
                                  calls=(self._call(i, None, lat, api_us, n_sync),), **common))
        return items

    def _call(self, c: int, launch_dur, lat: float, api_us: dict, n_sync: int) -> Call:
        tr = self.tr
        nid = tr.name_id[c]
        kernels = []
        before: dict[int, int] = {}  # stream -> this call's previous kernel on it
        for k in self.launched.get(c, ()):
            dep = self.deps.get(k)
            after = (() if dep is None else ((dep, self._lag(k, dep)),))
            prev = before.get(int(tr.thread[k]))
            if prev is not None:  # a CUDA graph's nodes keep their spacing on the device
                after += ((prev, self._lag(k, prev)),)
            before[int(tr.thread[k])] = k
            q = self.comm_pos.get(k)
            kernels.append(Kernel(int(tr.thread[k]), float(self.dur[k]), lat, after,
                                  collective=q is not None and q < n_sync, id=k,
                                  payload=(k, q)))
        if launch_dur is not None:
            dur = launch_dur
        else:
            dur = api_us.get(tr.names[nid], float(tr.dur[c]) if not self.is_sync[nid] else 0.0)
        sync = None
        if self.is_sync[nid]:
            stream = self.sync_stream.get(c, -1)
            sync = ALL_STREAMS if stream == -1 else stream
        hold = None if sync is not None or np.isnan(self.holds[c]) else float(self.holds[c])
        return Call(dur, tuple(kernels), sync, hold,
                    payload=c)

    def _lag(self, k: int, dep: int) -> float:
        """How long after device event ``dep`` ended ``k`` started, in the recording."""
        tr = self.tr
        return max(0.0, float(tr.ts[k] - tr.ts[dep] - tr.dur[dep]))

    def events(self, items: list[Item], res: RankResult):
        """The replayed bars ``(kind, thread or stream, start, dur, name, category)`` and
        the step boundaries."""
        tr = self.tr
        out, boundaries = [], []
        step_start_items = {int(np.searchsorted(tr.ts[self.items], s)): k
                            for k, (_, s, _) in reversed(list(enumerate(self.steps)))}
        calls, kernels = iter(res.calls), iter(res.kernels)
        t_end, rec_end = self.w0, self.w0
        for n, it in enumerate(items):
            i, nm = it.payload
            start, end = res.item_start[n], res.item_end[n]
            k = step_start_items.get(n)
            if k is not None:  # a step begins: its recorded lead before the first op
                boundaries.append(start - (float(tr.ts[i]) - self.steps[k][1]))
            for call in it.calls:
                for kern in call.kernels:
                    s, e = next(kernels)
                    ev, q = kern.payload
                    out.append(("dev", kern.stream, s, e - s, tr.names[tr.name_id[ev]],
                                "communication" if q is not None else
                                kernel_category(tr.names[tr.name_id[ev]], int(tr.kind[ev]))))
                tc, te = next(calls)
                if te > tc:
                    out.append(("cpu", int(tr.thread[call.payload]), tc, te - tc,
                                tr.names[tr.name_id[call.payload]], "cpu_overhead"))
            out.append(("cpu", it.thread, start, end - start, nm,
                        "cpu_op" if tr.kind[i] == Kind.CPU_OP else "cpu_overhead"))
            t_end = max(t_end, end)
            rec_end = max(rec_end, float(tr.ts[i] + tr.dur[i]))
        boundaries.append(t_end + max(0.0, self.w1 - rec_end))
        return out, boundaries


def replay(rec: Recording, stats: TraceStats | None = None,
           durations: list[np.ndarray] | None = None) -> ReplayResult:
    """Replay ``rec`` (all its ranks) and compare with the recorded steps.

    Parameters
    ----------
    rec : the recording (see :func:`~predictors.traces.recording.load_recording`)
    stats : overheads to replay with (default: measured from ``rec`` itself, each rank
        from its own trace: ranks may run on CPUs of different speed)
    durations : per rank, a duration (us) per event of its trace that replaces the
        recorded one for device events (NaN: keep the recording); this is how modeled
        kernels are replayed (:mod:`predictors.calibrate.trace_validation`)
    """
    own = [stats] * len(rec.traces) if stats else [
        overhead_stats([t], [o]) for t, o in zip(rec.traces, rec.ops)]
    durations = durations or [None] * len(rec.traces)
    ranks = [_Rank(t, o, st, d) for t, o, st, d in zip(rec.traces, rec.ops, own, durations)]
    n_coll = min((len(r.comm) for r in ranks), default=0)
    notes = []
    if len({len(r.comm) for r in ranks}) > 1:
        notes.append("ranks recorded different numbers of collectives; the first "
                     f"{n_coll} are synchronized")
    # Transfer time of collective q: its shortest recorded duration over the ranks.
    pure = np.array([min(float(r.dur[r.comm[q]]) for r in ranks) for q in range(n_coll)])
    n_sync = n_coll if len(ranks) > 1 else 0
    gbase = min(r.tr.base_us for r in ranks)
    off = [r.tr.base_us - gbase for r in ranks]  # each file's clock -> the common one
    programs = [r.program(own[j].launch_latency_us, own[j].api_us, n_sync)
                for j, r in enumerate(ranks)]

    def collective_time(q: int, kernels: list) -> float:
        order = {k.payload[1] for k in kernels}  # each rank's collective, by start order
        if len(order) > 1:
            raise TraceError(f"the ranks issue their collectives in different orders: "
                             f"collectives {sorted(order)} would meet as one")
        return float(pure[order.pop()])

    results, _ = simulate(programs, collective_time, off)
    per_rank, lanes, cols, steps = [], [], [], []
    for r, items, res in zip(ranks, programs, results):
        events, bounds = r.events(items, res)
        step_ms = [(b1 - b0) / 1e3 for b0, b1 in zip(bounds[:-1], bounds[1:])]
        rec_ms = [d / 1e3 for _, _, d in r.steps]
        if not step_ms:
            raise TraceError(f"{r.tr.file}: no CPU ops in the recorded step window: "
                             "nothing to replay")
        if sum(rec_ms) <= 0:
            raise TraceError(f"{r.tr.file}: the recorded step has zero duration")
        it_ms, rec_mean = float(np.mean(step_ms)), float(np.mean(rec_ms))
        per_rank.append({
            "rank": r.tr.rank, "file": r.tr.file, "iteration_ms": it_ms,
            "recorded_ms": rec_mean, "error_pct": 100 * (it_ms - rec_mean) / max(rec_mean, 1e-12),
            "steps": [{"name": n, "recorded_ms": rm, "replayed_ms": sm}
                      for (n, _, _), rm, sm in zip(r.steps, rec_ms, step_ms)]})
        lane_of = {}
        for kind, thr, s, d, nm, cat in events:
            key = (kind, thr)
            if key not in lane_of:
                lane_of[key] = len(lanes)
                tkey = r.tr.threads[thr]
                lanes.append(Lane(r.tr.rank, "cpu" if kind == "cpu" else "stream",
                                  f"thread {tkey[2]}" if kind == "cpu"
                                  else stream_label(tkey[2])))
            cols.append((s + r.tr.base_us, d, lane_of[key], CATEGORIES.index(cat), nm))
        for (n, _, _), b0, b1 in zip(r.steps, bounds[:-1], bounds[1:]):
            steps.append(Span(r.tr.rank, n, b0 + r.tr.base_us, b1 - b0))
    base = min((c[0] for c in cols), default=0.0)
    names: dict[str, int] = {}
    name_id = [names.setdefault(c[4], len(names)) for c in cols]
    tl = Timeline.from_arrays([c[0] - base for c in cols], [c[1] for c in cols],
                              [c[2] for c in cols], [c[3] for c in cols], name_id, None,
                              lanes, list(names), None, title="replay",
                              meta={"source": "replay"},
                              steps=[Span(s.rank, s.name, s.start_us - base, s.dur_us)
                                     for s in steps])
    iteration = max(p["iteration_ms"] for p in per_rank) if per_rank else 0.0
    recorded = max(p["recorded_ms"] for p in per_rank) if per_rank else 0.0
    return ReplayResult(iteration, recorded, per_rank, tl, notes)
