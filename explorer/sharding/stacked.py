"""Timelines of up to four sharding plans, stacked on one time axis.

One Gantt per plan (the Timeline dock's :class:`~explorer.timeline.gantt.GanttWidget`),
each named with its plan and iteration, their time axes linked: zoom or pan one and the
others follow.  To stay readable with many ranks, each plan shows one rank's streams (its
slowest rank, or the rank picked above), or every rank folded to one row.
"""
from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from ..timeline.gantt import GanttWidget

__all__ = ["ALL_RANKS", "MAX_PLANS", "SLOWEST", "StackedTimelines"]

MAX_PLANS = 4
SLOWEST, ALL_RANKS = -1, -2    # the rank picker's two entries that are not a rank
PANEL_MIN_PX = 96              # one plan's Gantt never gets shorter: the area scrolls
HINT = ("Select two to four plans in the table (Ctrl+click or Shift+click) to stack their "
        "timelines on one time axis.")


def slowest_rank(result) -> int:
    return int(max(result.per_rank, key=lambda r: r["iteration_ms"])["rank"])


def plan_view(result, which: int):
    """``result``'s timeline as one panel shows it: the streams of one rank (``which``,
    or the plan's slowest for :data:`SLOWEST`), or every lane for :data:`ALL_RANKS`; and
    the rank shown (None: all)."""
    tl = result.timeline
    if which == ALL_RANKS:
        return tl, None
    rank = slowest_rank(result) if which == SLOWEST else int(which)
    if rank not in tl.ranks:
        rank = slowest_rank(result)
    keep = [i for i, lane in enumerate(tl.lanes) if lane.rank == rank and lane.kind == "stream"]
    if not keep:
        keep = [i for i, lane in enumerate(tl.lanes) if lane.rank == rank]
    return tl.with_lanes(keep), rank


class StackedTimelines(QWidget):
    """Up to :data:`MAX_PLANS` plans' timelines (:meth:`set_plans`), stacked and x-linked.

    ``gantts`` are the Gantt widgets shown, top to bottom; ``labels`` their captions.
    """

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.rank = QComboBox()
        self.rank.setToolTip("Which rank each plan shows: its slowest (the one that sets "
                             "its iteration), one rank in every plan, or all ranks folded "
                             "to one row each")
        self.rank.setSizeAdjustPolicy(QComboBox.AdjustToContents)
        self.hint = QLabel(HINT)
        self.hint.setWordWrap(True)
        self.hint.setForegroundRole(QPalette.PlaceholderText)   # follows the theme
        self.legend = QLabel("")
        self.legend.setTextFormat(Qt.RichText)
        self.legend.setWordWrap(True)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(QLabel("Show"))
        top.addWidget(self.rank)
        top.addWidget(self.hint, 1)
        top.addStretch(0)
        self.inner = QWidget()
        self.stack = QVBoxLayout(self.inner)
        self.stack.setContentsMargins(0, 0, 0, 0)
        self.stack.setSpacing(4)
        self.area = QScrollArea()
        self.area.setWidgetResizable(True)
        self.area.setFrameShape(QScrollArea.NoFrame)
        self.area.setWidget(self.inner)
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(2)
        box.addLayout(top)
        box.addWidget(self.legend)
        box.addWidget(self.area, 1)
        self.results: list = []
        self.gantts: list[GanttWidget] = []
        self.labels: list[QLabel] = []
        self._panels: list[QWidget] = []
        self._ranks = 0
        self._dirty = False
        self.rank.currentIndexChanged.connect(lambda *_: self._redraw())

    def set_plans(self, results: list, draw: bool = True) -> None:
        """Show ``results`` (the first :data:`MAX_PLANS`); with ``draw`` False, only
        remember them until :meth:`refresh` (the tab is hidden)."""
        self.results = list(results)[:MAX_PLANS]
        ranks = max((len(r.timeline.ranks) for r in self.results), default=0)
        if ranks != self._ranks:
            self._ranks = ranks
            self.rank.blockSignals(True)
            self.rank.clear()
            self.rank.addItem("the slowest rank", SLOWEST)
            for r in range(ranks):
                self.rank.addItem(f"rank {r}", r)
            self.rank.addItem("all ranks, folded", ALL_RANKS)
            self.rank.blockSignals(False)
        self.hint.setVisible(len(self.results) < 2)
        self._dirty = True
        if draw:
            self.refresh()

    def refresh(self) -> None:
        """Draw what :meth:`set_plans` was given, if it has not been drawn yet."""
        if self._dirty:
            self._redraw()

    def _clear(self) -> None:
        for panel in self._panels:
            self.stack.removeWidget(panel)
            panel.setParent(None)
            panel.deleteLater()
        self._panels, self.gantts, self.labels = [], [], []

    def _redraw(self) -> None:
        from ..window.theme import style_new_plots   # here: the window package imports this
        self._dirty = False
        self._clear()
        which = self.rank.currentData()
        which = SLOWEST if which is None else which
        ends = []
        for k, res in enumerate(self.results):
            tl, rank = plan_view(res, which)
            panel = QWidget()
            lay = QVBoxLayout(panel)
            lay.setContentsMargins(0, 0, 0, 0)
            lay.setSpacing(0)
            where = "all ranks" if rank is None else (
                f"rank {rank}" + (" (its slowest)" if rank == slowest_rank(res) else ""))
            label = QLabel(f"<b>{html.escape(res.plan.name)}</b> &nbsp;{res.iteration_ms:.3f} ms"
                           f" &nbsp;<span style='color:#888'>{where}</span>")
            label.setTextFormat(Qt.RichText)
            label.setToolTip(res.plan.how or res.plan.name)
            gantt = GanttWidget()
            gantt.set_timeline(tl)
            if rank is None:
                gantt.set_collapsed(tl.ranks)
            gantt.legend.setVisible(False)
            gantt.details.setVisible(False)
            gantt.setMinimumHeight(PANEL_MIN_PX if rank is not None or len(tl.ranks) <= 4
                                   else 2 * PANEL_MIN_PX)
            if k < len(self.results) - 1:
                gantt.plot.getPlotItem().getAxis("bottom").setLabel("")
            lay.addWidget(label)
            lay.addWidget(gantt, 1)
            style_new_plots(panel)   # dark, when the theme is
            self.stack.addWidget(panel, 1)
            self._panels.append(panel)
            self.gantts.append(gantt)
            self.labels.append(label)
            ends.append((tl.begin_us / 1e3, tl.end_us / 1e3))
        if not self.gantts:
            self.legend.setText("")
            return
        self.legend.setText(self.gantts[0].legend.text())
        t0 = min(a for a, _ in ends)
        t1 = max(b for _, b in ends)
        span = max(t1 - t0, 1e-3)
        first = self.gantts[0]
        for g in self.gantts:
            # one time span for all: each Gantt limits the view to its own timeline
            g.vb.setLimits(xMin=t0 - 0.5 * span, xMax=t1 + 0.5 * span)
            if g is not first:
                g.vb.setXLink(first.vb)
        pad = 0.01 * span
        first.vb.setXRange(t0 - pad, t1 + pad, padding=0)

    def x_ranges(self) -> list[tuple[float, float]]:
        return [g.x_range() for g in self.gantts]
