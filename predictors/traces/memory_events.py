"""``profile_memory``'s ``[memory]`` events of a Kineto trace: allocated bytes over time
per device."""
from __future__ import annotations

import numpy as np

__all__ = ["add_memory", "memory_counters"]


def _int(v, default: int) -> int:
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return default


def add_memory(rows: list, ts, dev_type, dev_id, nbytes, total) -> None:
    """One ``[memory]`` event into ``rows``; malformed ones are skipped (memory is a side
    show of a trace)."""
    try:
        rows.append((float(ts), _int(dev_type, 0), _int(dev_id, -1), float(nbytes or 0.0),
                     float(total) if total is not None else float("nan")))
    except (TypeError, ValueError):
        pass


def memory_counters(rows: list[tuple], base: float) -> dict:
    """Allocated bytes over time per device: ``{("cpu", -1) or ("gpu", index): (ts - base,
    bytes, absolute)}``.  Newer traces give the allocator's ``Total Allocated`` (absolute
    on CUDA); older ones only each event's ``Bytes``, summed here from zero at the trace's
    start.  Device type 0 is the CPU, 1 CUDA.  The CPU's total counts only what was
    allocated while the profiler ran: never absolute."""
    if not rows:
        return {}
    arr = np.array(rows, np.float64)
    arr = arr[np.argsort(arr[:, 0], kind="stable")]
    out = {}
    for dtype, did in sorted({(int(t), int(d)) for t, d in arr[:, 1:3]}):
        sel = arr[(arr[:, 1] == dtype) & (arr[:, 2] == did)]
        total = sel[:, 4]
        absolute = bool(np.isfinite(total).all()) and dtype != 0
        values = total if absolute else np.cumsum(sel[:, 3])
        key = ("cpu", -1) if dtype == 0 else ("gpu", max(did, 0))
        out[key] = (sel[:, 0] - base, values, absolute)
    return out
