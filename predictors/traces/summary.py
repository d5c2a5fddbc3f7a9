"""What a recorded job did, per rank: steps, device active and idle time, exposed
communication, and the kernel time per category (the ``trace-summary`` command)."""
from __future__ import annotations

import numpy as np

from ..engine.timeline import CATEGORIES
from .kineto import Kind
from .recording import Recording

__all__ = ["summarize"]

_COMM = CATEGORIES.index("communication")


def summarize(rec: Recording) -> dict:
    """``{"per_rank": [...], "device": ..., "files": ...}`` as the CLI contract prints it.

    Device times are measured inside the recorded steps (from the first step's start to
    the last one's end) where the trace has steps, else over the whole trace.
    """
    tl = rec.timeline
    per_rank = []
    for tr in rec.traces:
        r = tr.rank
        steps = [s for s in tl.steps if s.rank == r]
        window = tl.step_window(r)
        stream_lanes = tl.lanes_of(r, "stream")
        lanes = stream_lanes or tl.lanes_of(r, "cpu")
        in_rank = np.isin(tl.lane, stream_lanes)
        if window is None:
            sel = np.isin(tl.lane, [i for i, l in enumerate(tl.lanes) if l.rank == r])
            t0 = float(tl.start_us[sel].min()) if sel.any() else 0.0
            t1 = float((tl.start_us[sel] + tl.dur_us[sel]).max()) if sel.any() else 0.0
        else:
            t0, t1 = window
        active = tl.busy_ms(lanes, t0, t1)
        kern = np.isin(tr.kind, (Kind.KERNEL,))
        comm = in_rank & (tl.category == _COMM)
        span_ms = (t1 - t0) / 1e3
        per_rank.append({
            "rank": r, "file": tr.path, "device": tr.device_name or "CPU",
            "steps": [{"name": s.name, "start_us": s.start_us + rec.base_us,
                       "dur_ms": s.dur_us / 1e3} for s in steps],
            "step_ms": float(np.mean([s.dur_us for s in steps])) / 1e3 if steps else None,
            "window_ms": span_ms,
            "device_active_ms": active,
            "device_idle_ms": max(0.0, span_ms - active),
            "exposed_comm_ms": tl.exposed_comm_ms(r, t0, t1),
            "kernels": int(kern.sum()),
            "comm_kernels": int(comm.sum()),
            "kernel_ms_by_category": tl.category_ms(lanes, t0, t1),
        })
    return {"files": rec.files, "ranks": len(rec.traces), "per_rank": per_rank}
