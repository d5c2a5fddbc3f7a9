"""The Sharding dock: embedding sharding plans ranked side by side, and why one wins.

The table lists every plan best first (iteration, the gap to the best, ties within a real
run's noise, the slowest rank, the lookups' imbalance, how the tables' bytes spread, peak
memory, exposed communication and exposed all-to-all); a click on a header sorts by it.
Beside it, tabs chart the selected plans: **Breakdown** (each rank's iteration split into
lookups, dense, exchange, other communication and waiting; two to four plans side by
side), **Placement** (a tables × ranks heat map), **Timelines** (the plans' timelines
stacked on one time axis) and **Ranks** (compute, exposed communication and peak memory
per rank).  "Apply" writes the plan into the scenario (one undo step); "Save Image…"
writes the chart shown as a PNG.
"""
from __future__ import annotations

import html
import os

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QSpinBox,
    QTabWidget,
    QToolButton,
    QWidget,
)

from predictors.utils.formatting import format_bytes

from ..run.results_dock import ResultsView, memory_text
from ..timeline.colors import CATEGORY_COLORS, COUNTER_COLOR
from .breakdown import BreakdownChart
from .heatmap import PlacementMap
from .stacked import MAX_PLANS, StackedTimelines

__all__ = ["COLUMNS", "DEFAULT_BUDGET_S", "ShardingView", "compute_ms"]

DEFAULT_BUDGET_S = 10
COLUMNS = ("#", "Plan", "Iteration (ms)", "vs best", "Slowest", "Imbalance",
           "Tables per rank", "Peak memory", "Exposed comm (ms)", "Exposed all-to-all (ms)")
COLUMN_TIPS = ("Rank of the plan, best first", "The planner that made it (hover a row for how)",
               "Predicted iteration time of the slowest rank",
               "How much slower than the best plan; ≈ best: within 1 % of it, which a real "
               "run's noise cannot tell apart", "The rank that finishes last",
               "How much the busiest rank's lookup time exceeds the ranks' mean (0 %: "
               "balanced)",
               "The least and the most embedding-table bytes any rank holds",
               "Allocated device memory at the step's peak, on the rank that needs most "
               "(tables, dense weights, gradients, activations); plans that do not fit "
               "rank last",
               "Communication of the slowest rank that no kernel overlaps (waiting included)",
               "The most any rank spends in the embeddings' exchange (all-to-all; row-wise "
               "tables: reduce-scatter and all-gather) with no computation hiding it")
EMPTY_TEXT = ("Run ▸ Rank Shardings predicts every candidate placement of the embedding "
              "tables on the platform's GPUs, with all ranks and their collectives, and "
              "lists them here best first. It needs a multi-GPU platform and a model with "
              "embedding tables.")


def compute_ms(timeline, rank: int) -> float:
    """Busy time of a rank's compute stream (communication streams left out), ms."""
    lanes = [i for i in timeline.lanes_of(rank, "stream")
             if "communication" not in timeline.lanes[i].name]
    return timeline.busy_ms(lanes) if lanes else timeline.device_active_ms(rank)


class ShardingView(ResultsView):
    """Ranked plans (a :class:`~predictors.plan.rank_sharding.ShardingRanking`) and one plan's
    ranks."""

    def __init__(self, parent: QWidget | None = None):
        budget = QSpinBox()
        budget.setRange(1, 600)
        budget.setValue(DEFAULT_BUDGET_S)
        budget.setSuffix(" s")
        budget.setToolTip("How long the search may try plans (each simulated with "
                               "every rank); a longer search may find a faster plan")
        budget_box = QWidget()
        row = QHBoxLayout(budget_box)
        row.setContentsMargins(0, 0, 0, 0)
        label = QLabel("Search budget")
        label.setToolTip(budget.toolTip())
        label.setBuddy(budget)
        row.addWidget(label)
        row.addWidget(budget)
        super().__init__(COLUMNS, COLUMN_TIPS, EMPTY_TEXT,
                         ("Rank Plans", "Predict every candidate sharding plan of this "
                                        "scenario (Run ▸ Rank Shardings)"),
                         ("Apply Plan", "Write the selected plan into the scenario's "
                                        "parallelism.embedding_sharding (undoable; one "
                                        "plan selected)"),
                         controls=(budget_box,), parent=parent)
        self.budget = budget
        # the intro and the ranking's summary in the theme's secondary text colour
        self.header.setStyleSheet("")
        self.header.setForegroundRole(QPalette.PlaceholderText)
        # several plans selected (Ctrl/Shift+click) are compared side by side
        self.table.setSelectionMode(QAbstractItemView.ExtendedSelection)
        self.image_button = QToolButton()
        self.image_button.setText("Save Image…")
        self.image_button.setToolTip("Save the chart shown (breakdown, placement, "
                                     "timelines or ranks) as a PNG image")
        self.image_button.clicked.connect(self.save_image_dialog)
        top = self.layout().itemAt(0).layout()
        top.insertWidget(top.indexOf(self.export.copy_button) + 1, self.image_button)
        self.breakdown = BreakdownChart()
        self.placement = PlacementMap()
        self.timelines = StackedTimelines()
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.splitter.replaceWidget(1, self.tabs)
        for widget, name, tip in (
                (self.breakdown, "Breakdown", "Where each rank's iteration goes, for the "
                                              "selected plans side by side"),
                (self.placement, "Placement", "Which rank holds each table, coloured by its "
                                              "lookup time or bytes"),
                (self.timelines, "Timelines", "The selected plans' timelines stacked on one "
                                              "time axis"),
                (self.plot, "Ranks", "Compute, exposed communication and peak memory per "
                                     "rank of the selected plan")):
            self.tabs.addTab(widget, name)
            self.tabs.setTabToolTip(self.tabs.count() - 1, tip)
        self.splitter.setSizes([560, 440])
        self.splitter.setChildrenCollapsible(False)
        self.table.setMinimumWidth(260)
        self.tabs.currentChanged.connect(lambda *_: self._refresh_tab())
        self.plot.setLabel("left", "ms")
        self.plot.setLabel("bottom", "rank")
        # each rank's peak memory on a right axis of its own (GB), sharing the ranks' x
        pi = self.plot.getPlotItem()
        self.memory_box = pg.ViewBox()
        self.memory_box.setMouseEnabled(x=False, y=False)
        pi.showAxis("right")
        pi.scene().addItem(self.memory_box)
        pi.getAxis("right").linkToView(self.memory_box)
        pi.getAxis("right").setLabel("● peak memory (GB)", color=COUNTER_COLOR)
        self.memory_box.setXLink(pi)
        pi.vb.sigResized.connect(
            lambda *_: self.memory_box.setGeometry(pi.vb.sceneBoundingRect()))
        self._memory_items: list = []

    @property
    def ranking(self):
        return self.shown

    def header_text(self) -> str:
        r = self.shown
        searched = getattr(r, "evaluated", 0)
        ties = sum(bool(getattr(p, "tie", False)) for p in r.plans)
        text = (f"{len(r.plans)} plan(s) for {r.scenario_name or 'this scenario'} on "
                f"{getattr(r, 'ranks', '?')} ranks, best first"
                + (f"; {searched:,} simulated in {r.elapsed_s:.1f} s" if searched else "")
                + (f"; {ties} within 1 % of the best (≈ best)" if ties > 1 else "") + "."
                + (" The search was cancelled: the best plans found so far."
                   if getattr(r, "cancelled", False) else ""))
        # the notes (batch per rank, the search, memory) on hover: the table keeps its room
        self.header.setToolTip("<br>".join(html.escape(n) for n in r.notes))
        if self.stale:
            text = "Out of date (the scenario changed): rank again. " + text
        return text

    def export_name(self) -> str:
        name = getattr(self.shown, "scenario_name", "") or "scenario"
        return f"{name}-sharding-plans"

    def set_ranking(self, ranking) -> None:
        """Show a :class:`~predictors.plan.rank_sharding.ShardingRanking`."""
        best = ranking.plans[0].iteration_ms if ranking.plans else 0.0
        rows, tips, keys = [], [], []
        for i, res in enumerate(ranking.plans):
            slowest = max(res.per_rank, key=lambda r: r["iteration_ms"])
            gap = 100 * (res.iteration_ms / best - 1) if best else 0.0
            imbalance = getattr(res, "imbalance", None)
            a2a = getattr(res, "exposed_all_to_all_ms", None)
            if i == 0:
                vs = "best" if res.fits else "best (too big)"
            elif getattr(res, "tie", False):
                vs = f"≈ best ({gap:+.1f} %)"
            else:
                vs = f"{gap:+.1f} %"
            rows.append([str(i + 1), res.plan.name, f"{res.iteration_ms:.3f}", vs,
                         str(slowest["rank"]),
                         "–" if imbalance is None else f"{100 * imbalance:.1f} %",
                         f"{format_bytes(min(res.rank_bytes))} – "
                         f"{format_bytes(max(res.rank_bytes))}",
                         memory_text(res.peak_memory_bytes or None, res.fits),
                         f"{slowest.get('exposed_comm_ms', 0.0):.3f}",
                         "–" if a2a is None else f"{a2a:.3f}"])
            keys.append([i, None, res.iteration_ms, gap, None, imbalance,
                         max(res.rank_bytes, default=0), res.peak_memory_bytes, None, a2a])
            tips.append(f"{res.plan.name}: {res.plan.how}" if res.plan.how else res.plan.name)
        footer = "; ".join(f"Not possible: {n} ({w})" for n, w in ranking.refused)
        self.show_rows(ranking, ranking.plans, rows, tips, footer, keys=keys)

    def mark_applied(self, assignment) -> None:
        """Tag the plan the scenario uses now (after Apply) in the Plan column."""
        self._applied = assignment
        for index, res in enumerate(self.results):
            item = self.table.item(self.row_of(index), 1)
            if item is not None:
                applied = (isinstance(assignment, dict)
                           and assignment == res.plan.to_json()["assignment"])
                item.setText(res.plan.name + ("  ✓ applied" if applied else ""))

    def budget_s(self) -> float:
        """The search budget, seconds."""
        return float(self.budget.value())

    # --- selection: one plan (Apply, Ranks, Placement) or several (Breakdown, Timelines) --

    def selected(self):
        """The selected plan when exactly one is (Apply takes it), else None."""
        chosen = self.selected_results()
        return chosen[0] if len(chosen) == 1 else None

    def compared(self) -> list:
        """The plans the charts show: the selected ones, the first four."""
        return self.selected_results()[:MAX_PLANS]

    def _on_selection(self) -> None:
        chosen = self.compared()
        one = self.selected()
        self.apply_button.setEnabled(one is not None and not self.stale
                                     and not self.cancel_button.isVisible())
        first = chosen[0] if chosen else None
        self.draw(first)
        ranking = self.shown
        self.placement.set_plan(first, getattr(ranking, "tables", []) or [],
                                getattr(ranking, "ranks", 0) if ranking is not None else 0)
        self.breakdown.set_plans(chosen)
        self.timelines.set_plans(chosen, draw=self.tabs.currentWidget() is self.timelines)
        extra = len(self.selected_results()) - len(chosen)
        if extra > 0:
            self.timelines.hint.setText(f"The first {MAX_PLANS} selected plans are shown.")
            self.timelines.hint.show()
        elif len(chosen) >= 2:
            self.timelines.hint.setText("")

    def changeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().changeEvent(event)
        if event.type() == QEvent.PaletteChange and hasattr(self, "tabs"):
            chosen = self.compared()   # the theme changed: redraw the Ranks chart's text
            self.draw(chosen[0] if chosen else None)

    def _refresh_tab(self) -> None:
        if self.tabs.currentWidget() is self.timelines:
            self.timelines.refresh()

    def after_sort(self) -> None:
        self.mark_applied(getattr(self, "_applied", None))

    def clear(self) -> None:
        super().clear()
        self.placement.set_plan(None, [], 0)
        self.breakdown.set_plans([])
        self.timelines.set_plans([])

    def set_stale(self, stale: bool) -> None:
        super().set_stale(stale)
        for w in (self.breakdown.plot, self.placement.plot):
            w.setEnabled(not self.stale)
        for g in self.timelines.gantts:
            g.set_stale(self.stale)

    # --- image ---------------------------------------------------------------------------

    def save_image(self, path) -> bool:
        """The chart shown (the current tab) as a PNG at ``path``; False (and the error
        shown) when it cannot be written."""
        pixmap = self.tabs.currentWidget().grab()
        if pixmap.isNull() or not pixmap.save(os.fspath(path), "PNG"):
            self.show_error(f"Could not save the image {os.fspath(path)}")
            return False
        window = self.window()
        if hasattr(window, "statusBar"):
            window.statusBar().showMessage(f"Saved {os.fspath(path)}", 5000)
        return True

    def save_image_dialog(self) -> bool:
        if not self.results:
            self.show_error("Nothing to save yet: rank the plans first")
            return False
        tab = self.tabs.tabText(self.tabs.currentIndex()).lower()
        stem = self.export.file_stem()
        path, _ = QFileDialog.getSaveFileName(self, "Save Chart Image", f"{stem}-{tab}.png",
                                              "PNG images (*.png)")
        if not path:
            return False
        if not os.path.splitext(path)[1]:
            path += ".png"
        return self.save_image(path)

    def draw(self, res) -> None:
        """Per rank of one plan: compute-stream time and exposed communication as bars,
        the rank's iteration as a tick above them, the slowest rank's in red, and its
        peak memory as a point on the right axis."""
        self.clear_plot()
        for item in self._memory_items:
            self.memory_box.removeItem(item)
        self._memory_items = []
        if res is None:
            self.plot.setTitle("")
            return
        ranks = np.array([r["rank"] for r in res.per_rank], float)
        busy = np.array([compute_ms(res.timeline, int(r)) for r in ranks])
        comm = np.array([r.get("exposed_comm_ms", 0.0) for r in res.per_rank])
        its = np.array([r["iteration_ms"] for r in res.per_rank])
        slowest = int(np.argmax(its))
        ink = self.palette().color(QPalette.WindowText).name()   # the theme's foreground
        brushes = [ink] * len(ranks)
        brushes[slowest] = "#d32f2f"
        self.add_plot_item(pg.BarGraphItem(x=ranks, height=busy, width=0.6,
                                           brush=CATEGORY_COLORS["gemm"]))
        self.add_plot_item(pg.BarGraphItem(x=ranks, y0=busy, height=comm, width=0.6,
                                           brush=CATEGORY_COLORS["communication"]))
        self.add_plot_item(pg.ScatterPlotItem(x=ranks, y=its, symbol="_", size=26, pen=None,
                                              brush=brushes))
        peaks = np.array([r.get("peak_memory_bytes", 0) for r in res.per_rank], float) / 1e9
        if peaks.any():
            line = pg.PlotDataItem(ranks, peaks, pen=None, symbol="o", symbolSize=8,
                                   symbolBrush=COUNTER_COLOR, symbolPen=None)
            self.memory_box.addItem(line)
            self._memory_items.append(line)
            self.memory_box.setYRange(0, float(peaks.max()) * 1.15, padding=0)
            # (the right axis's label, in the points' colour, is their key)
        # the key sits in the title: a legend box would cover the bars of a short dock
        self.plot.setTitle(
            f"{res.plan.name}: {res.iteration_ms:.3f} ms (rank {int(ranks[slowest])})<br>"
            f"<span style='color:{CATEGORY_COLORS['gemm']}'>■</span> compute "
            f"<span style='color:{CATEGORY_COLORS['communication']}'>■</span> exposed comm "
            f"<b>–</b> iteration", size="9pt", color=ink)
        self.plot.getAxis("bottom").setTicks([[(int(r), str(int(r))) for r in ranks]])
        self.plot.setXRange(-0.6, max(ranks) + 0.6 if len(ranks) else 1, padding=0)
        top = float(max((busy + comm).max(), its.max())) if len(ranks) else 1.0
        self.plot.setYRange(0, max(1e-3, top * 1.12), padding=0)
