"""Lining a recording up with a prediction, rank by rank (no Qt)."""
from __future__ import annotations

import numpy as np

from predictors.engine.timeline import Span, Timeline

__all__ = ["aligned_on_step"]


def aligned_on_step(rec: Timeline, step: str, to_us: float,
                    default_us: float) -> tuple[Timeline, int]:
    """``rec`` with each rank's step named ``step`` moved to start at ``to_us``.

    The ranks of a job record their steps at different moments (and, across hosts, on
    different clocks), so each rank is moved by its own step; a rank without that step
    is moved by ``default_us``.

    Returns
    -------
    (Timeline, int)
        The moved Timeline and how many ranks were aligned on their own step.

    Examples
    --------
    >>> from predictors.engine.timeline import Lane
    >>> tl = Timeline.from_arrays([5.0, 9.0], [1.0, 1.0], [0, 1], [0, 0], [0, 0], None,
    ...                           [Lane(0, "cpu", "a"), Lane(1, "cpu", "b")], ["op"],
    ...                           steps=[Span(0, "S#1", 5.0, 2.0), Span(1, "S#1", 9.0, 2.0)])
    >>> moved, n = aligned_on_step(tl, "S#1", 0.0, 0.0)
    >>> moved.start_us.tolist(), n
    ([0.0, 0.0], 2)
    """
    own: dict[int, float] = {}
    for s in rec.steps:
        if s.name == step:
            own.setdefault(s.rank, to_us - s.start_us)
    by_lane = np.array([own.get(lane.rank, default_us) for lane in rec.lanes], np.float64)
    start = rec.start_us + by_lane[rec.lane] if len(rec) else rec.start_us.copy()
    steps = [Span(s.rank, s.name, s.start_us + own.get(s.rank, default_us), s.dur_us)
             for s in rec.steps]
    counters = {k: (t + by_lane[k], v) for k, (t, v) in rec.counters.items()}
    moved = Timeline(start, rec.dur_us, rec.lane, rec.category, rec.name_id, rec.detail_id,
                     rec.lanes, rec.names, rec.details, rec.title, dict(rec.meta), steps,
                     counters)
    return moved, len(own)
