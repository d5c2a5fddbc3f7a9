"""Lookups on a Timeline's events for the views, free of Qt: the event under a point,
durations as people read them, and the bars of the critical path."""
from __future__ import annotations

import numpy as np

from predictors.engine.timeline import Timeline

__all__ = ["EventIndex", "format_us", "critical_events", "path_predecessor"]


def format_us(us: float) -> str:
    """``850 ns``, ``12.3 µs`` or ``4.567 ms``."""
    if us < 1.0:
        return f"{us * 1e3:.0f} ns"
    if us < 1000.0:
        return f"{us:.1f} µs"
    return f"{us / 1e3:.3f} ms"


class EventIndex:
    """Per-lane sorted starts for point lookups (built lazily on the first hover)."""

    def __init__(self, timeline: Timeline):
        tl = timeline
        order = np.lexsort((tl.start_us, tl.lane))
        lanes_sorted = tl.lane[order]
        bounds = np.searchsorted(lanes_sorted, np.arange(len(tl.lanes) + 1))
        self._idx, self._start, self._end, self._maxend = [], [], [], []
        for a, b in zip(bounds[:-1], bounds[1:]):
            idx = order[a:b]
            start = tl.start_us[idx]
            end = start + tl.dur_us[idx]
            self._idx.append(idx)
            self._start.append(start)
            self._end.append(end)
            self._maxend.append(np.maximum.accumulate(end) if len(end) else end)

    def event_at(self, lane: int, t_us: float, tol_us: float = 0.0) -> int | None:
        """The event of ``lane`` under time ``t_us`` (innermost if nested), else the nearest
        one within ``tol_us``; ``None`` if there is none."""
        if lane is None or not 0 <= lane < len(self._idx):
            return None
        starts, ends, maxend = self._start[lane], self._end[lane], self._maxend[lane]
        if not len(starts):
            return None
        i = int(np.searchsorted(starts, t_us, side="right")) - 1
        best, best_dur = None, np.inf
        j = i
        # Walk back while some earlier event may still cover t (prefix max of ends >= t).
        while j >= 0 and maxend[j] >= t_us and i - j < 256:
            if ends[j] >= t_us and ends[j] - starts[j] < best_dur:
                best, best_dur = j, ends[j] - starts[j]
            j -= 1
        if best is None and tol_us > 0:
            cands = []
            if i >= 0:
                cands.append((t_us - ends[i], i))
            if i + 1 < len(starts):
                cands.append((starts[i + 1] - t_us, i + 1))
            dist, k = min(cands)
            if dist <= tol_us:
                best = k
        return None if best is None else int(self._idx[lane][best])


def critical_events(timeline: Timeline | None) -> np.ndarray:
    """The valid event indices of ``timeline.meta["critical_path"]``, sorted."""
    if timeline is None:
        return np.zeros(0, np.int64)
    path = np.asarray(timeline.meta.get("critical_path") or [], np.int64).ravel()
    path = path[(path >= 0) & (path < len(timeline))]
    return np.unique(path)


def path_predecessor(timeline: Timeline, path: np.ndarray, i: int) -> int | None:
    """The event of ``path`` that starts last before event ``i`` does (``None`` when
    ``i`` starts the path)."""
    starts = timeline.start_us[path]
    before = (starts < timeline.start_us[i]) | ((starts == timeline.start_us[i]) & (path < i))
    if not before.any():
        return None
    cand = path[before]
    return int(cand[np.lexsort((cand, timeline.start_us[cand]))[-1]])
