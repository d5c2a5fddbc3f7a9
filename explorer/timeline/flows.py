"""Flow arrows, as Perfetto draws them: hover or click a kernel and an arrow comes from the
CPU op that launched it; hover or click a CPU op and arrows go to the kernels it launched.
A hovered bar's arrows last while the pointer is on it; then the clicked bar's come back.

A predicted timeline names a kernel after the op that launched it (same name and shapes,
same rank), so the pairing is read off the timeline: the k-th kernel of an op and shapes
pairs with the k-th CPU op of that name and shapes on the rank (the stream runs them in
launch order); where the counts differ (one op launching several kernels), a kernel pairs
with the last such CPU op that started before it.  A recording names its kernels after the
CUDA functions, so nothing pairs and no arrow is drawn.
"""
from __future__ import annotations

import html
import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, QPointF

__all__ = ["FlowArrows", "launch_of", "kernels_of", "FLOW_COLOR"]

FLOW_COLOR = "#37474f"
_DEVICE_KINDS = ("stream",)


def _shapes(timeline, i: int) -> set[int]:
    """The detail ids that carry event ``i``'s shapes: a kernel's detail adds the cost
    model after " | " to its op's."""
    base = timeline.details[timeline.detail_id[i]].split(" | ")[0]
    return {k for k, d in enumerate(timeline.details) if d.split(" | ")[0] == base}


def _same_op(timeline, i: int, kinds: tuple[str, ...]) -> np.ndarray:
    """Events on ``kinds`` lanes of event ``i``'s rank with its name and shapes, by start."""
    lanes = [k for k, lane in enumerate(timeline.lanes)
             if lane.rank == timeline.lanes[timeline.lane[i]].rank and lane.kind in kinds]
    if not lanes:
        return np.zeros(0, np.int64)
    sel = np.flatnonzero((timeline.name_id == timeline.name_id[i])
                         & np.isin(timeline.detail_id, list(_shapes(timeline, i)))
                         & np.isin(timeline.lane, lanes))
    return sel[np.argsort(timeline.start_us[sel], kind="stable")]


def _pairs(timeline, kernels: np.ndarray, ops: np.ndarray) -> np.ndarray:
    """For each of ``kernels``, the index into ``ops`` of its launch (-1: none)."""
    if not len(ops):
        return np.full(len(kernels), -1)
    if len(ops) == len(kernels):
        return np.arange(len(kernels))
    starts = timeline.start_us[ops]
    return np.searchsorted(starts, timeline.start_us[kernels], side="right") - 1


def _is_device(timeline, i: int) -> bool:
    return timeline.lanes[timeline.lane[i]].kind in _DEVICE_KINDS


def launch_of(timeline, i: int) -> int | None:
    """The CPU op that launched kernel ``i``, or None (not a kernel, or no such op)."""
    if timeline is None or i is None or not 0 <= i < len(timeline) or \
            not _is_device(timeline, i):
        return None
    kernels, ops = _same_op(timeline, i, _DEVICE_KINDS), _same_op(timeline, i, ("cpu",))
    k = int(np.flatnonzero(kernels == i)[0])
    j = int(_pairs(timeline, kernels, ops)[k])
    return int(ops[j]) if j >= 0 else None


def kernels_of(timeline, i: int) -> list[int]:
    """The kernels CPU op ``i`` launched (empty for a kernel, or an op that launched none)."""
    if timeline is None or i is None or not 0 <= i < len(timeline) or \
            timeline.lanes[timeline.lane[i]].kind != "cpu":
        return []
    kernels, ops = _same_op(timeline, i, _DEVICE_KINDS), _same_op(timeline, i, ("cpu",))
    if not len(kernels):
        return []
    j = int(np.flatnonzero(ops == i)[0])
    return [int(k) for k in kernels[_pairs(timeline, kernels, ops) == j]]


class FlowArrows(QObject):
    """Draws the launch → kernel arrows of the bar hovered, else of the bar clicked, on
    ``gantt`` (a :class:`~explorer.timeline.gantt.GanttWidget`), and keeps them on their
    bars while the view zooms, scrolls or folds ranks; a click elsewhere or a new timeline
    clears the clicked bar's."""

    def __init__(self, gantt):
        super().__init__(gantt)
        self.gantt = gantt
        self.pairs: list[tuple[int, int]] = []   # (launch, kernel) event indices
        self.pinned = -1                          # the clicked bar
        self._items: list = []
        gantt.sigEventClicked.connect(self.show_for)
        gantt.sigEventHovered.connect(self._on_hover)
        gantt.sigCriticalPathAvailable.connect(self._on_new_timeline)
        gantt.vb.sigRangeChanged.connect(self._on_range)

    def pairs_of(self, i: int) -> list[tuple[int, int]]:
        """``(launch, kernel)`` pairs of event ``i``: from its launch (a kernel) or to its
        kernels (a CPU op); none for -1."""
        tl = self.gantt.timeline
        if tl is None or i is None or i < 0:
            return []
        launch = launch_of(tl, i)
        return [(launch, i)] if launch is not None else [(i, k) for k in kernels_of(tl, i)]

    def show_for(self, i: int) -> None:
        """Arrows of the clicked event ``i`` (-1: none), named in its pinned details."""
        self.pinned = -1 if i is None else i
        self.pairs = self.pairs_of(self.pinned)
        self._redraw()
        if self.pairs and self.gantt.selected == i:   # the pinned details name the other end
            self.gantt.details.setText(self.gantt.details.text() + "<br>" + self.flow_text(i))

    def flow_text(self, i: int) -> str:
        """"launched by OP at T ms" for a kernel, "launched N kernel(s) …" for a CPU op."""
        tl = self.gantt.timeline
        at = ", ".join(f"{float(tl.start_us[k]) / 1e3:.3f}" for _, k in self.pairs[:4])
        if self.pairs[0][1] == i:
            a = self.pairs[0][0]
            return (f"→ launched by <b>{html.escape(tl.names[tl.name_id[a]])}</b> at "
                    f"{float(tl.start_us[a]) / 1e3:.3f} ms (arrow)")
        more = " …" if len(self.pairs) > 4 else ""
        return f"→ launched {len(self.pairs)} kernel(s), starting at {at}{more} ms (arrows)"

    def _on_hover(self, i: int) -> None:
        pairs = self.pairs_of(i if i >= 0 else self.pinned)
        if pairs != self.pairs:
            self.pairs = pairs
            self._redraw()

    def _on_new_timeline(self, _has_critical_path: bool) -> None:
        self.show_for(-1)

    def _on_range(self, *_args) -> None:
        # nothing to move (as in most views, and while the view is torn down): touch nothing
        if self.pairs or self._items:
            self._redraw()

    def _clear(self) -> None:
        if not self._items:
            return
        pi = self.gantt.plot.getPlotItem()
        for item in self._items:
            pi.removeItem(item)
        self._items = []

    def _redraw(self) -> None:
        self._clear()
        tl, lay = self.gantt.timeline, self.gantt.layout_
        if tl is None or lay is None or not self.pairs:
            return
        pi, vb = self.gantt.plot.getPlotItem(), self.gantt.vb
        xs, ys = [], []
        for a, b in self.pairs:
            ya, yb = lay.y[tl.lane[a]], lay.y[tl.lane[b]]
            if not (np.isfinite(ya) and np.isfinite(yb)):   # a folded rank's CPU threads
                continue
            p, q = (QPointF(float(tl.start_us[a]) / 1e3, float(ya)),
                    QPointF(float(tl.start_us[b]) / 1e3, float(yb)))
            xs += [p.x(), q.x()]
            ys += [p.y(), q.y()]
            # the head in pixels: the view's x and y scales differ
            dp, dq = vb.mapViewToDevice(p), vb.mapViewToDevice(q)
            if dp is None or dq is None:
                continue
            angle = math.degrees(math.atan2(-(dq.y() - dp.y()), -(dq.x() - dp.x())))
            head = pg.ArrowItem(pos=(q.x(), q.y()), angle=angle, headLen=10, tipAngle=35,
                                pen=None, brush=FLOW_COLOR)
            head.setZValue(13)
            pi.addItem(head, ignoreBounds=True)
            self._items.append(head)
        if xs:
            line = pg.PlotCurveItem(np.array(xs), np.array(ys), connect="pairs",
                                    pen=pg.mkPen(FLOW_COLOR, width=1.5, cosmetic=True))
            line.setZValue(12)
            pi.addItem(line, ignoreBounds=True)
            self._items.insert(0, line)
