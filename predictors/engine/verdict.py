"""What bounds a predicted step, in one line, and which changes would move it.

The verdict reads the step's critical path (the chain of bars that sets its end,
``timeline.meta["critical_path"]``): the time it spends in device kernels, in
collectives, and the rest, which is host time (CPU ops, dispatch and launch overheads,
the gaps between ops).  The largest part, when it is half of the step or more, names the
bound:

- **memory**: a rank's peak does not fit its device (this one comes first);
- **communication**: collectives on the path (waits for the last rank included);
- **device**: the GPU's kernels;
- **host**: the CPU's work and overheads while the GPU waits for it;
- **mixed**: no part reaches half: each waits for the other in turn.

A step on the CPU has no device to wait for: its verdict is **cpu**.  Each verdict comes
with the what-ifs that act on its bound, as a planner would try them next.
"""
from __future__ import annotations

import numpy as np

from .timeline import CATEGORIES, Timeline

__all__ = ["step_verdict", "path_shares", "BOUND_SHARE"]

BOUND_SHARE = 0.5   # a part of the critical path this share of the step or more bounds it


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def path_shares(timeline: Timeline) -> dict[str, float]:
    """The critical path's device, communication and host parts, as shares of the
    step (the slowest rank's span: ranks that start apart span more together)."""
    step = max((timeline.span_ms(r) for r in timeline.ranks), default=0.0) * 1e3
    path = np.asarray(timeline.meta.get("critical_path") or [], dtype=int)
    if step <= 0 or not len(path):
        return {"device": 0.0, "communication": 0.0, "host": 1.0}
    stream = np.array([timeline.lanes[i].kind == "stream" for i in timeline.lane[path]])
    comm = timeline.category[path] == CATEGORIES.index("communication")
    dur = timeline.dur_us[path]
    device = float(dur[stream & ~comm].sum()) / step
    communication = float(dur[stream & comm].sum()) / step
    return {"device": device, "communication": communication,
            "host": max(0.0, 1.0 - device - communication)}


def step_verdict(timeline: Timeline, per_rank: list[dict], num_ops: int, device: str,
                 doc: dict) -> dict:
    """``{"bound", "text", "shares", "what_if"}`` (see the module): ``shares`` are the
    critical path's device, communication and host parts of the step."""
    slow = max(per_rank, key=lambda r: r["iteration_ms"])
    shares = path_shares(timeline)
    who = "" if len(per_rank) == 1 else f" (rank {slow['rank']} is the slowest)"
    active = slow["device_active_ms"] / max(slow["iteration_ms"], 1e-9)
    tables = [n for n in doc["model"]["nodes"] if n["kind"] == "embedding_tables"]
    per_table = any(n["params"].get("kernel", "per_table") == "per_table"
                    and len(n["params"]["tables"]) > 1 for n in tables)
    if len(per_rank) > 1:   # the slowest rank's ops: its CPU threads' bars
        lanes = timeline.lanes_of(slow["rank"], "cpu")
        skip = [CATEGORIES.index("idle"), CATEGORIES.index("cpu_overhead")]
        num_ops = int((np.isin(timeline.lane, lanes) & ~np.isin(timeline.category, skip))
                      .sum())
    over = [r for r in per_rank if r.get("memory", {}).get("fits") is False]
    top = max(("device", "communication", "host"), key=lambda k: shares[k])
    if over:
        bound, text = "memory", (f"memory-bound: {len(over)} rank(s) do not fit their "
                                 f"device at the step's peak")
        what_if = ["a smaller per-GPU batch (activations shrink with it)",
                   "more GPUs, or tables sharded row-wise or column-wise (rank-sharding)",
                   "a GPU with more memory"]
    elif device == "cpu":
        bound, text = "cpu", f"cpu: the CPU's cores run all {num_ops:,} ops{who}"
        what_if = ["more threads (the platform's threads)", "a larger batch per step"]
    elif shares[top] < BOUND_SHARE:
        bound = "mixed"
        text = (f"mixed: the critical path is {_pct(shares['host'])} host, "
                f"{_pct(shares['device'])} GPU kernels and {_pct(shares['communication'])} "
                f"collectives; each waits for the other in turn{who}")
        what_if = ["fewer synchronizations (.item(), host copies) in the step",
                   "overlapping copies with compute (pinned memory, non_blocking)"]
    elif top == "communication":
        bound = "communication"
        text = (f"communication-bound: collectives are {_pct(shares['communication'])} of "
                f"the critical path{who}")
        what_if = ["a sharding plan with less exposed all-to-all (rank-sharding)",
                   "faster links or one NIC per GPU", "a larger per-GPU batch (the "
                   "all-reduce stays the same size while the compute grows)"]
    elif top == "device":
        bound = "device"
        text = (f"device-bound: GPU kernels are {_pct(shares['device'])} of the critical "
                f"path; the GPU is active {_pct(active)} of the step{who}")
        what_if = ["a faster GPU (platform)", "bf16 instead of float32 (training dtype)",
                   "more GPUs for the same global batch"]
    else:
        bound = "host"
        text = (f"host-bound: the GPU is active {_pct(active)} of the step; the CPU's "
                f"dispatch of {num_ops:,} ops sets it{who}")
        what_if = ["a larger per-GPU batch (the CPU's dispatch barely grows with it)",
                   "CUDA graphs (one launch replays the step's kernels)"]
        if per_table:
            what_if.insert(1, "fused embedding lookups (kernel: fused): one lookup per "
                              "dim instead of one per table")
        if (tables and len(per_rank) > 1
                and doc["training"].get("input_pipeline") == "torchrec"):
            what_if.append("fewer sharding kinds: each kind with an input distribution "
                           "(table-, row-, column-wise) adds its all-to-alls and a wait "
                           "for its splits")
    return {"bound": bound, "text": text,
            "shares": {k: round(v, 4) for k, v in shares.items()}, "what_if": what_if}
