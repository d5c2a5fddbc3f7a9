"""One recorded job (one Kineto file per rank) -> a :class:`~predictors.engine.timeline.Timeline`.

Lanes per rank: CPU threads (``thread N (main)``, ``thread N (autograd)``), the rank's
annotations (``ProfilerStep#N``, ``## forward ##`` ...), Python functions, and one lane per
GPU stream.  Kernels are classified by name into the shared categories (``nccl``/``rccl``
kernels are communication).  The columns are filled with numpy, never event by event.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..engine.timeline import CATEGORIES, Lane, Span, Timeline
from ..model.op_classes import classify
from .kineto import Kind, KinetoTrace, TraceError, read_kineto, stream_label
from .ops import CpuOps, cpu_ops

__all__ = ["Recording", "load_recording", "kernel_category", "kernel_categories",
           "build_timeline"]

_CAT = {c: i for i, c in enumerate(CATEGORIES)}

# Name fragments per class, matched case-insensitively as plain substrings (regular
# expressions with alternatives were most of the time of building a timeline, on long
# templated kernel names).  ``x_?y`` patterns are spelled both ways.
_COMM = ("nccl", "rccl", "msccl", "allreduce", "all_reduce", "allgather", "all_gather",
         "reducescatter", "reduce_scatter", "alltoall", "all_toall", "allto_all",
         "all_to_all", "sendrecv", "c10d::", "gloo")
_GEMM = ("gemm", "cutlass", "cublas", "xmma", "matmul", "wgrad", "dgrad", "fprop", "conv",
         "cudnn", "cijk_", "hipblaslt", "_mm_", "bmm", "tensorop", "wmma", "mfma", "flashfwd",
         "flash_fwd", "flashbwd", "flash_bwd", "flashattn", "flash_attn", "fmha")
_EMB = ("embedding", "fbgemm", "indexselect", "index_select", "lookup", "tbe_", "jagged")
_RED = ("reduce", "softmax", "norm", "scan", "cub::", "sum_kernel", "mean", "cross_entropy",
        "nll_loss", "argmax", "topk", "sort")
_COPY = ("copy", "cat_", "catarray", "memcpy", "memset", "transpose", "gather", "scatter",
         "index_put", "fill")
_CLASSES = (("communication", _COMM), ("embedding", _EMB), ("gemm", _GEMM),
            ("reduction", _RED), ("memcpy", _COPY))


def kernel_category(name: str, kind: int = Kind.KERNEL) -> str:
    """The timeline category of a device event from its name (``volta_sgemm`` -> gemm)."""
    if kind in (Kind.MEMCPY, Kind.MEMSET):
        return "memcpy"
    if kind == Kind.SYNC:
        return "idle"
    if kind == Kind.GPU_ANNOTATION:
        return "other"
    low = name.lower()
    for category, fragments in _CLASSES:
        if any(f in low for f in fragments):
            return category
    return "elementwise"


def kernel_categories(trace: KinetoTrace) -> np.ndarray:
    """Per name id of ``trace``: the ``CATEGORIES`` index of a kernel of that name (only
    names that kernels have are classified; the others read ``other``).  Computed once per
    trace: the name patterns are slow on long templated kernel names."""
    cached = getattr(trace, "_kernel_cat", None)
    if cached is not None and len(cached) == len(trace.names):
        return cached
    out = np.full(len(trace.names), _CAT["other"], np.int16)
    for nid in np.unique(trace.name_id[trace.kind == Kind.KERNEL]).tolist():
        out[nid] = _CAT[kernel_category(trace.names[nid])]
    trace._kernel_cat = out
    return out


# Which class names a CPU op whose subtree holds several (a GEMM wrapper is GEMM).
_PRIORITY = {"cpu_op": 1, "view": 2, "memcpy": 3, "elementwise": 4, "reduction": 5,
             "embedding": 6, "gemm": 7}
_BY_PRIORITY = np.array([_CAT["cpu_op"]] + [_CAT[c] for c in sorted(_PRIORITY, key=_PRIORITY.get)],
                        np.int16)


def _cpu_category(name: str) -> str:
    if name.startswith("aten::"):
        return classify(name)
    return "cpu_op"


@dataclass
class Recording:
    """A recorded job: one :class:`KinetoTrace` per rank and their common Timeline."""

    traces: list[KinetoTrace]
    timeline: Timeline
    base_us: float  # Timeline time 0 in the files' clock
    ops: list[CpuOps] = field(default_factory=list)

    @property
    def ranks(self) -> list[int]:
        return [t.rank for t in self.traces]

    @property
    def files(self) -> list[str]:
        return [t.path for t in self.traces]

    @property
    def has_device(self) -> bool:
        return any(t.thread_is_device.any() for t in self.traces)


# Top-level key of a trace written by ``measure --trace``: the median and spread of the
# same scenario's steps run without the profiler (which slows the step it records).
UNPROFILED_KEY = "mldse_unprofiled"


def _unprofiled(traces: list[KinetoTrace]) -> dict | None:
    """The untraced steps' figures that ``measure --trace`` writes into a single-rank
    trace (``iteration_ms`` > 0), or None."""
    if len(traces) != 1:
        return None
    d = traces[0].meta.get(UNPROFILED_KEY) if isinstance(traces[0].meta, dict) else None
    ms = d.get("iteration_ms") if isinstance(d, dict) else None
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not 0 < ms < 1e9:
        return None
    return {k: v for k, v in d.items() if isinstance(v, (int, float, str))}


def _assign_ranks(traces: list[KinetoTrace]) -> None:
    ranks = [t.rank for t in traces]
    if len(traces) == 1:
        if ranks[0] < 0:
            traces[0].rank = 0
        return
    if min(ranks) < 0 or len(set(ranks)) != len(ranks):
        for r, t in enumerate(sorted(traces, key=lambda t: t.path)):
            t.rank = r


def _merge_table(local: list[str], merged: list[str], index: dict[str, int]) -> np.ndarray:
    """Append ``local``'s new strings to ``merged``; return local id -> merged id."""
    out = np.empty(len(local), np.int32)
    for i, text in enumerate(local):
        j = index.get(text)
        if j is None:
            j = index[text] = len(merged)
            merged.append(text)
        out[i] = j
    return out


def build_timeline(traces: Sequence[KinetoTrace], ops: Sequence[CpuOps] | None = None,
                   title: str = "") -> tuple[Timeline, float]:
    """The Timeline of ranks ``traces`` and its time origin in the files' clock (us)."""
    ops = list(ops) if ops is not None else [cpu_ops(t) for t in traces]
    base = min(t.base_us for t in traces)
    lanes: list[Lane] = []
    names: list[str] = []
    name_index: dict[str, int] = {}
    details: list[str] = [""]
    detail_index: dict[str, int] = {"": 0}
    cols = {k: [] for k in ("start", "dur", "lane", "cat", "name", "detail")}
    steps: list[Span] = []
    counters: dict[int, tuple] = {}

    for tr, op in zip(traces, ops):
        r = tr.rank
        shift = tr.base_us - base
        # Name and detail tables are merged through per-file maps.
        nmap = _merge_table(tr.names, names, name_index)
        dmap = _merge_table(tr.details, details, detail_index)
        # Category per event: by name for kernels, by kind otherwise.
        cat = np.full(len(tr), _CAT["other"], np.int16)
        kind = tr.kind
        dev_cat = kernel_categories(tr)
        kmask = kind == Kind.KERNEL
        cat[kmask] = dev_cat[tr.name_id[kmask]]
        cat[(kind == Kind.MEMCPY) | (kind == Kind.MEMSET)] = _CAT["memcpy"]
        cat[kind == Kind.SYNC] = _CAT["idle"]
        cat[kind == Kind.RUNTIME] = _CAT["cpu_overhead"]
        opmask = kind == Kind.CPU_OP
        rank_has_device = bool(tr.thread_is_device.any())
        if rank_has_device:
            cat[opmask] = _CAT["cpu_op"]
        else:
            # On the CPU the ops are the kernels: a top-level op takes the heaviest class
            # found in its subtree (aten::linear holds aten::addmm: gemm).
            prio = np.array([_PRIORITY.get(_cpu_category(n), 0) for n in tr.names], np.int16)
            sub = np.flatnonzero(opmask & (op.owner >= 0))
            best = np.zeros(len(op.items), np.int16)
            np.maximum.at(best, op.owner[sub], prio[tr.name_id[sub]])
            top_ops = op.items[tr.kind[op.items] == Kind.CPU_OP]
            cat[top_ops] = _BY_PRIORITY[best[op.owner[top_ops]]]
            nested = np.flatnonzero(opmask)
            nested = nested[~np.isin(nested, top_ops)]
            cat[nested] = _BY_PRIORITY[prio[tr.name_id[nested]]]
        # Lanes: one per (thread, role).
        steps_here = tr.steps()
        step_threads = set()
        if steps_here:
            is_step = tr._step_name_mask() & ((kind == Kind.ANNOTATION) | opmask)
            step_threads = set(np.unique(tr.thread[is_step]).tolist())
        n_ops = np.bincount(tr.thread[opmask], minlength=len(tr.threads))
        autograd_names = np.array([n.startswith("autograd::engine") for n in tr.names], bool)
        autograd_thr = set(np.unique(tr.thread[opmask & autograd_names[tr.name_id]]).tolist()) \
            if len(tr.names) else set()
        main = next(iter(sorted(step_threads)), None)
        if main is None and n_ops.any():
            main = int(np.argmax(n_ops))
        lane_of = {}

        def lane(key, kind_name, label):
            if key not in lane_of:
                lane_of[key] = len(lanes)
                lanes.append(Lane(r, kind_name, label))
            return lane_of[key]

        ev_lane = np.empty(len(tr), np.int32)
        order_threads = sorted(range(len(tr.threads)),
                               key=lambda t: (tr.thread_is_device[t], t != main,
                                              t in autograd_thr, tr.threads[t]))
        multi_dev = len({k[1] for k in tr.threads if k[0] == "dev"}) > 1
        for t in order_threads:
            key = tr.threads[t]
            sel_t = tr.thread == t
            if tr.thread_is_device[t]:
                label = (f"GPU {key[1]} " if multi_dev else "") + stream_label(key[2])
                ann = sel_t & (kind == Kind.GPU_ANNOTATION)
                ev_lane[sel_t] = lane(("s", t), "stream", label)
                if ann.any():
                    ev_lane[ann] = lane(("ga",), "annotation", "GPU annotations")
                continue
            role = " (main)" if t == main else " (autograd)" if t in autograd_thr else ""
            tname = f"thread {key[2]}{role}"
            work = sel_t & ((kind == Kind.CPU_OP) | (kind == Kind.RUNTIME) |
                            (kind == Kind.OTHER))
            if work.any():
                ev_lane[work] = lane(("c", t), "cpu", tname)
            if not rank_has_device:
                nested = np.zeros(len(tr), bool)
                nested[np.flatnonzero(opmask)] = True
                nested[op.items] = False
                nested &= sel_t
                if nested.any():
                    ev_lane[nested] = lane(("o", t), "annotation", f"{tname} · nested ops")
            ann = sel_t & (kind == Kind.ANNOTATION)
            if ann.any():
                ev_lane[ann] = lane(("a",), "annotation", "annotations")
            py = sel_t & (kind == Kind.PYTHON)
            if py.any():
                ev_lane[py] = lane(("p", t), "annotation", f"{tname} · python")
        for (dev, index), (t_mem, v_mem, absolute) in tr.memory.items():
            # the device's memory pairs with the predicted counter of the same name
            own = (dev == "gpu") == rank_has_device
            # relative: the change since the trace began (older traces, and the CPU's)
            label = ("memory allocated" if own else "host memory allocated") + (
                "" if absolute else " (relative)")
            if dev == "gpu" and len({k[1] for k in tr.memory if k[0] == "gpu"}) > 1:
                label += f" (GPU {index})"
            counters[lane(("m", dev, index), "counter", label)] = (t_mem + shift, v_mem)
        cols["start"].append(tr.ts + shift)
        cols["dur"].append(tr.dur)
        cols["lane"].append(ev_lane)
        cols["cat"].append(cat)
        cols["name"].append(nmap[tr.name_id])
        cols["detail"].append(dmap[tr.detail_id])
        steps.extend(Span(r, n, s + shift, d) for n, s, d in steps_here)

    cat_all = lambda k, dt: np.concatenate(cols[k]).astype(dt) if cols[k] else np.zeros(0, dt)
    meta = {"source": "recorded", "files": len(traces),
            "device": next((t.device_name for t in traces if t.device_name), "CPU")}
    unprofiled = _unprofiled(traces)
    if unprofiled is not None:
        meta["unprofiled"] = unprofiled
    tl = Timeline.from_arrays(cat_all("start", np.float64), cat_all("dur", np.float64),
                              cat_all("lane", np.int32), cat_all("cat", np.int16),
                              cat_all("name", np.int32), cat_all("detail", np.int32),
                              lanes, names, details, title=title, meta=meta,
                              steps=sorted(steps, key=lambda s: (s.rank, s.start_us)),
                              counters=counters)
    return tl, base


def load_recording(paths: Sequence[str | os.PathLike], *,
                   progress: Callable[[float, str], None] | None = None,
                   cancelled: Callable[[], bool] | None = None) -> Recording:
    """Read Kineto files that are the ranks of one job (one file: one rank).

    Ranks come from ``distributedInfo.rank``, else from numbers in the file names
    (``worker3``, ``rank3``), else from the sorted file names.  Raises
    :class:`~predictors.traces.kineto.TraceError` for a file that cannot be read.
    """
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise TraceError("no trace files given")
    sizes = [max(os.path.getsize(p), 1) if os.path.exists(p) else 1 for p in paths]
    total, done = float(sum(sizes)), 0.0
    traces = []
    for p, size in zip(paths, sizes):
        def sub(f, stage, _done=done, _size=size, _p=p):
            if progress is not None:
                progress(0.9 * (_done + f * _size) / total,
                         f"{os.path.basename(_p)}: {stage}")
        traces.append(read_kineto(p, progress=sub, cancelled=cancelled))
        done += size
    _assign_ranks(traces)
    traces.sort(key=lambda t: t.rank)
    if progress is not None:
        progress(0.92, "building the timeline")
    ops = [cpu_ops(t) for t in traces]
    title = (os.path.basename(paths[0]) if len(paths) == 1
             else f"{len(paths)} ranks: {os.path.basename(paths[0])} …")
    tl, base = build_timeline(traces, ops, title=title)
    if progress is not None:
        progress(1.0, "done")
    return Recording(traces, tl, base, ops)
