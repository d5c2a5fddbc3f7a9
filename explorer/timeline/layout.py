"""Where each lane of a Timeline sits vertically, and what it is called (Gantt and exports)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from predictors.timeline import Lane, Timeline

__all__ = ["LaneLayout", "lane_title", "nice_step"]

_KIND_ORDER = {"cpu": 0, "stream": 1, "link": 2}
RANK_GAP = 0.6  # vertical gap between two ranks' groups, in rows


def lane_title(lane: Lane) -> str:
    """Short label as Perfetto/Nsight users expect: ``CPU main``, ``stream 0``, ``link nvlink``."""
    name = lane.name
    low = name.lower()
    if lane.kind == "cpu":
        return name if low.startswith(("cpu", "thread")) else f"CPU {name}"
    if lane.kind == "stream":
        # "stream 7", "GPU 1 stream 7", "context (all streams)" are names already
        return name if "stream" in low else f"stream {name}"
    if lane.kind == "link":
        return name if low.startswith("link") else f"link {name}"
    return name


@dataclass
class LaneLayout:
    """Rows of a Timeline grouped per rank: CPU threads, then streams, then links.

    ``y[lane]`` is the centre of the lane's row; rows are one unit tall, rank groups separated
    by ``RANK_GAP``.  Row 0 is at the top (the views invert the y axis).
    """

    y: np.ndarray                # per lane: row centre
    order: list[int]             # lanes top to bottom
    labels: list[str]            # per lane, in ``order``
    groups: list[tuple[int, float, float]]  # (rank, top, bottom) of each rank's band
    height: float

    @classmethod
    def of(cls, timeline: Timeline, collapsed=frozenset()) -> "LaneLayout":
        """``collapsed`` ranks take one row: their device streams drawn together (their
        CPU threads hidden, ``y`` NaN), labelled ``rank N (collapsed)``."""
        lanes = timeline.lanes
        order_all = sorted(range(len(lanes)),
                           key=lambda i: (lanes[i].rank, _KIND_ORDER.get(lanes[i].kind, 3), i))
        multi = len({l.rank for l in lanes}) > 1
        y = np.full(len(lanes), np.nan)
        order, labels, groups = [], [], []
        pos, prev_rank, top = 0.0, None, 0.0
        by_rank: dict[int, list[int]] = {}
        for i in order_all:
            by_rank.setdefault(lanes[i].rank, []).append(i)
        for rank, mine in by_rank.items():
            if prev_rank is not None:
                groups.append((prev_rank, top, pos))
                pos += RANK_GAP
                top = pos
            prev_rank = rank
            if rank in collapsed:
                shown = [i for i in mine if lanes[i].kind == "stream"] or mine
                y[shown] = pos + 0.5
                order.append(shown[0])
                labels.append(f"rank {rank} (collapsed)")
                pos += 1.0
                continue
            for i in mine:
                y[i] = pos + 0.5
                order.append(i)
                title = lane_title(lanes[i])
                labels.append(f"rank {rank} · {title}" if multi else title)
                pos += 1.0
        if prev_rank is not None:
            groups.append((prev_rank, top, pos))
        return cls(y, order, labels, groups, pos)

    def lanes_at(self, y: float) -> list[int]:
        """Every lane drawn on the row that contains ``y`` (a collapsed rank's several)."""
        return [int(i) for i in np.flatnonzero(np.abs(self.y - y) <= 0.5)]

    def rank_at(self, y: float) -> int | None:
        """The rank whose band contains ``y``."""
        return next((r for r, top, bottom in self.groups if top - 0.3 <= y <= bottom + 0.3),
                    None)

    def lane_at(self, y: float) -> int | None:
        """The lane whose row contains ``y`` (None in a gap or outside)."""
        if not len(self.y) or not np.isfinite(self.y).any():
            return None
        i = int(np.nanargmin(np.abs(self.y - y)))
        return i if abs(self.y[i] - y) <= 0.5 else None


def nice_step(span: float, target_ticks: int = 8) -> float:
    """A 1/2/5 x 10^k tick step giving about ``target_ticks`` ticks over ``span``."""
    if span <= 0 or not np.isfinite(span):
        return 1.0
    raw = span / max(1, target_ticks)
    mag = 10.0 ** np.floor(np.log10(raw))
    for m in (1.0, 2.0, 5.0, 10.0):
        if raw <= m * mag:
            return float(m * mag)
    return float(10 * mag)
