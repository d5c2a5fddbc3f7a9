"""Where each lane of a Timeline sits vertically, and what it is called (Gantt and exports)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from predictors.engine.timeline import LINKS_RANK, Lane, Timeline, group_name
from predictors.utils.formatting import format_bytes

__all__ = ["LaneLayout", "lane_title", "node_groups", "nice_step", "counter_steps",
           "counter_range", "counter_curves"]

_KIND_ORDER = {"cpu": 0, "stream": 1, "link": 2, "counter": 3}
COUNTER_FILL = 0.8   # a counter's curve spans this share of its row, 0 at the bottom
RANK_GAP = 0.6  # vertical gap between two ranks' groups, in rows


def lane_title(lane: Lane) -> str:
    """Short label as Perfetto/Nsight users expect: ``CPU main``, ``stream 0``,
    ``NVLink gpu0↔nvswitch``."""
    name = lane.name
    low = name.lower()
    if lane.kind == "cpu":
        return name if low.startswith(("cpu", "thread")) else f"CPU {name}"
    if lane.kind == "stream":
        # "stream 7", "GPU 1 stream 7", "context (all streams)" are names already
        return name if "stream" in low else f"stream {name}"
    if lane.kind == "link":   # the engine names its links by kind: NVLink, PCIe, NIC
        return name if low.startswith(("link", "nvlink", "pcie", "nic")) else f"link {name}"
    if lane.kind == "counter":   # the range follows: keep the label short
        return name.replace("memory allocated", "memory")
    return name


@dataclass
class LaneLayout:
    """Rows of a Timeline grouped per rank: CPU threads, then streams, then links; the
    physical links' group (``LINKS_RANK``, named ``links``) comes after the ranks.

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
        CPU threads hidden, ``y`` NaN), labelled ``rank N (collapsed)``; the links' group
        folded draws its links on one row."""
        lanes = timeline.lanes
        order_all = sorted(range(len(lanes)),
                           key=lambda i: (lanes[i].rank == LINKS_RANK, lanes[i].rank,
                                          _KIND_ORDER.get(lanes[i].kind, 3), i))
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
            if rank in collapsed:   # its streams, or its CPU threads; never its counters
                shown = ([i for i in mine if lanes[i].kind == "stream"]
                         or [i for i in mine if lanes[i].kind != "counter"] or mine[:1])
                y[shown] = pos + 0.5
                order.append(shown[0])
                labels.append(f"{group_name(rank)} (collapsed)")
                pos += 1.0
                continue
            for i in mine:
                y[i] = pos + 0.5
                order.append(i)
                title = lane_title(lanes[i])
                if i in timeline.counters and len(timeline.counters[i][1]):
                    lo, hi = counter_range(timeline, i)
                    title += f" {format_bytes(lo)} – {format_bytes(hi)}"
                labels.append(f"{group_name(rank)} · {title}" if multi else title)
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


def node_groups(lay: LaneLayout | None, ranks_per_node: int | None
                ) -> list[tuple[int, float, float]]:
    """``(node, top, bottom)`` of each node's ranks in ``lay``, when ranks are grouped
    ``ranks_per_node`` to a node and there is more than one node; else empty."""
    if lay is None or not ranks_per_node or len(lay.groups) < 2:
        return []
    nodes: dict[int, list[float]] = {}
    for rank, top, bottom in lay.groups:
        if rank == LINKS_RANK:   # the links span the nodes
            continue
        span = nodes.setdefault(rank // ranks_per_node, [top, bottom])
        span[0], span[1] = min(span[0], top), max(span[1], bottom)
    if len(nodes) < 2:
        return []
    return [(n, a, b) for n, (a, b) in nodes.items()]


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


def counter_range(timeline: Timeline, lane: int) -> tuple[float, float]:
    """A counter's lowest and highest value.  Each curve spans its own range, as
    Perfetto's counter tracks do: the ranks of a sharded job hold very different tables,
    and on a shared scale the step's own allocations would vanish under them."""
    values = timeline.counters[lane][1]
    if not len(values):
        return 0.0, 0.0
    return float(values.min()), float(values.max())


def counter_steps(times_ms: np.ndarray, values: np.ndarray, end_ms: float, row_y: float,
                  low: float, high: float) -> tuple[np.ndarray, np.ndarray]:
    """The vertices of a counter's step curve in its row (``row_y`` its centre, y growing
    downwards): each value held until the next time, the last until ``end_ms``; ``low``
    a tenth of the way up the curve's band (``COUNTER_FILL`` of the row) and ``high`` at
    its top."""
    if not len(times_ms):
        return np.zeros(0), np.zeros(0)
    xs = np.repeat(np.append(times_ms, max(end_ms, float(times_ms[-1]))), 2)[1:-1]
    share = (np.repeat(values, 2) - low) / (high - low) if high > low else np.ones(
        2 * len(values))
    heights = (0.1 + 0.9 * share) * COUNTER_FILL
    return xs, row_y + COUNTER_FILL / 2 - heights


def counter_curves(timeline: Timeline, lay: "LaneLayout", end_ms: float):
    """``(lane, xs, ys, base)`` for every counter shown in ``lay`` (a folded rank's are
    not): its step curve over its own range, and the y of its row's bottom."""
    for k, (times, values) in timeline.counters.items():
        if not np.isfinite(lay.y[k]) or not len(times):
            continue
        low, high = counter_range(timeline, k)
        xs, ys = counter_steps(times / 1e3, values, end_ms, float(lay.y[k]), low, high)
        yield k, xs, ys, float(lay.y[k]) + COUNTER_FILL / 2
