"""The Sharding dock: embedding sharding plans ranked side by side, and one plan's ranks.

The table lists every plan best first (iteration, the gap to the best, the slowest rank,
how evenly the tables' bytes spread, exposed communication).  Below it, the selected
plan's ranks as bars: compute-stream time and exposed communication per rank, so a
straggler stands out.  "Apply" writes the plan into the scenario (one undo step).
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QLabel,
                               QProgressBar, QPushButton, QSplitter, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from predictors.sharding import format_bytes

from ..timeline.colors import CATEGORY_COLORS
from ..widgets import ErrorBar

__all__ = ["ShardingView", "COLUMNS"]

COLUMNS = ("#", "Plan", "Iteration (ms)", "vs best", "Slowest", "Tables per rank",
           "Exposed comm (ms)")
COLUMN_TIPS = ("Rank of the plan, best first", "The planner that made it (hover a row for how)",
               "Predicted iteration time of the slowest rank",
               "How much slower than the best plan", "The rank that finishes last",
               "The least and the most embedding-table bytes any rank holds",
               "Communication of the slowest rank that no kernel overlaps (waiting included)")
EMPTY_TEXT = ("Run ▸ Rank Shardings predicts every candidate placement of the embedding "
              "tables on the platform's GPUs, with all ranks and their collectives, and "
              "lists them here best first. It needs a multi-GPU platform and a model with "
              "embedding tables.")


def compute_ms(timeline, rank: int) -> float:
    """Busy time of a rank's compute stream (communication streams left out), ms."""
    lanes = [i for i in timeline.lanes_of(rank, "stream")
             if "communication" not in timeline.lanes[i].name]
    return timeline.busy_ms(lanes) if lanes else timeline.device_active_ms(rank)


class ShardingView(QWidget):
    """Ranked plans, one plan's ranks, and the run's progress and errors.

    Signals
    -------
    sigRankRequested()      the user asks for a ranking
    sigCancelRequested()
    sigApplyRequested(object)   the selected :class:`~predictors.rank_sharding.PlanResult`
    """

    sigRankRequested = Signal()
    sigCancelRequested = Signal()
    sigApplyRequested = Signal(object)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.ranking = None
        self.stale = False
        self.header = QLabel(EMPTY_TEXT)
        self.header.setWordWrap(True)
        self.header.setStyleSheet("color: #555;")
        self.rank_button = QPushButton("Rank Plans")
        self.rank_button.setToolTip("Predict every candidate sharding plan of this scenario "
                                    "(Run ▸ Rank Shardings)")
        self.apply_button = QPushButton("Apply Plan")
        self.apply_button.setToolTip("Write the selected plan into the scenario's "
                                     "parallelism.embedding_sharding (undoable)")
        self.apply_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setMaximumWidth(220)
        self.progress.setTextVisible(False)
        self.stage = QLabel("")
        self.stage.setStyleSheet("color: #445;")
        self.cancel_button = QPushButton("Cancel")
        self.error = ErrorBar()
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        for col, tip in enumerate(COLUMN_TIPS):
            self.table.horizontalHeaderItem(col).setToolTip(tip)
        head = self.table.horizontalHeader()
        head.setSectionResizeMode(QHeaderView.ResizeToContents)
        head.setStretchLastSection(True)
        self.refused = QLabel("")
        self.refused.setWordWrap(True)
        self.refused.setStyleSheet("color: #8a5a00;")
        self.plot = pg.PlotWidget(background="w")
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setLabel("left", "ms")
        self.plot.setLabel("bottom", "rank")
        self.plot.setMinimumSize(260, 120)
        self._bars: list = []
        self._build_layout()
        self.rank_button.clicked.connect(self.sigRankRequested)
        self.cancel_button.clicked.connect(self.sigCancelRequested)
        self.apply_button.clicked.connect(self._apply)
        self.table.itemSelectionChanged.connect(self._on_selection)
        self.set_running(False)

    def _build_layout(self) -> None:
        top = QHBoxLayout()
        top.addWidget(self.rank_button)
        top.addWidget(self.apply_button)
        top.addSpacing(12)
        top.addWidget(self.progress)
        top.addWidget(self.stage, 1)
        top.addWidget(self.cancel_button)
        top.addStretch(0)
        upper = QWidget()
        lay = QVBoxLayout(upper)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.header)
        lay.addWidget(self.table, 1)
        lay.addWidget(self.refused)
        # side by side: the bottom dock is wide and short
        split = QSplitter(Qt.Horizontal)
        split.addWidget(upper)
        split.addWidget(self.plot)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setSizes([640, 360])
        outer = QVBoxLayout(self)
        outer.setContentsMargins(4, 4, 4, 4)
        outer.addLayout(top)
        outer.addWidget(self.error)
        outer.addWidget(split, 1)

    # --- state ----------------------------------------------------------------------------

    def set_running(self, running: bool, stage: str = "") -> None:
        for w in (self.progress, self.stage, self.cancel_button):
            w.setVisible(running)
        self.rank_button.setEnabled(not running)
        if running:
            self.progress.setValue(0)
            self.stage.setText(stage)
            self.error.clear()

    def set_progress(self, fraction: float, stage: str) -> None:
        self.progress.setValue(int(1000 * max(0.0, min(1.0, fraction))))
        self.stage.setText(stage)

    def show_error(self, message: str) -> None:
        self.error.show_error(message, kind="file")  # stays until clicked away

    def set_stale(self, stale: bool) -> None:
        """Grey the ranking out (still scrollable): the scenario changed since it was made."""
        self.stale = bool(stale) and self.ranking is not None
        self.table.setStyleSheet("QTableWidget { color: #a0a6ae; }" if self.stale else "")
        self.plot.setEnabled(not self.stale)
        self.apply_button.setEnabled(not self.stale and self.selected() is not None)
        if self.ranking is not None:
            self.header.setText(self._header_text())

    def mark_applied(self, assignment) -> None:
        """Tag the plan the scenario uses now (after Apply) in the Plan column."""
        if self.ranking is None:
            return
        for row, res in enumerate(self.ranking.plans):
            item = self.table.item(row, 1)
            if item is not None:
                applied = isinstance(assignment, dict) and assignment == res.plan.assignment
                item.setText(res.plan.name + ("  ✓ applied" if applied else ""))

    def clear(self) -> None:
        self.ranking = None
        self.error.clear()
        self.stale = False
        self.table.setRowCount(0)
        self.refused.setText("")
        self.header.setText(EMPTY_TEXT)
        self._draw_ranks(None)
        self.apply_button.setEnabled(False)

    def _header_text(self) -> str:
        r = self.ranking
        text = (f"{len(r.plans)} plan(s) for {r.scenario_name or 'this scenario'}, best "
                f"first. " + " ".join(r.notes[:1]) + ".")
        if self.stale:
            text = "Out of date (the scenario changed): rank again. " + text
        return text

    # --- results --------------------------------------------------------------------------

    def set_ranking(self, ranking) -> None:
        """Show a :class:`~predictors.rank_sharding.ShardingRanking`."""
        self.ranking = ranking
        self.stale = False
        self.table.setStyleSheet("")
        self.plot.setEnabled(True)
        self.header.setText(self._header_text())
        best = ranking.plans[0].iteration_ms if ranking.plans else 0.0
        self.table.setRowCount(len(ranking.plans))
        for row, res in enumerate(ranking.plans):
            slowest = max(res.per_rank, key=lambda r: r["iteration_ms"])
            comm = slowest.get("exposed_comm_ms", 0.0)
            cells = (str(row + 1), res.plan.name, f"{res.iteration_ms:.3f}",
                     "best" if row == 0 else f"+{100 * (res.iteration_ms / best - 1):.1f} %",
                     str(slowest["rank"]), f"{format_bytes(min(res.rank_bytes))} – "
                     f"{format_bytes(max(res.rank_bytes))}", f"{comm:.3f}")
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if col != 1:
                    item.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
                item.setToolTip(f"{res.plan.name}: {res.plan.how}" if res.plan.how
                                else res.plan.name)
                self.table.setItem(row, col, item)
        self.refused.setText("; ".join(f"Not possible: {n} ({w})" for n, w in ranking.refused))
        self.refused.setVisible(bool(ranking.refused))
        if ranking.plans:
            self.table.selectRow(0)
        else:
            self._draw_ranks(None)

    def selected(self):
        rows = self.table.selectionModel().selectedRows() if self.ranking else []
        if not rows or self.ranking is None:
            return None
        return self.ranking.plans[rows[0].row()]

    def _on_selection(self) -> None:
        res = self.selected()
        self.apply_button.setEnabled(res is not None and not self.stale)
        self._draw_ranks(res)

    def _apply(self) -> None:
        res = self.selected()
        if res is not None:
            self.sigApplyRequested.emit(res)

    def _draw_ranks(self, res) -> None:
        """Per rank of one plan: compute-stream time and exposed communication as bars,
        the rank's iteration as a tick above them, the slowest rank's in red."""
        for item in self._bars:
            self.plot.removeItem(item)
        self._bars = []
        if res is None:
            self.plot.setTitle("")
            return
        ranks = np.array([r["rank"] for r in res.per_rank], float)
        busy = np.array([compute_ms(res.timeline, int(r)) for r in ranks])
        comm = np.array([r.get("exposed_comm_ms", 0.0) for r in res.per_rank])
        its = np.array([r["iteration_ms"] for r in res.per_rank])
        slowest = int(np.argmax(its))
        a = pg.BarGraphItem(x=ranks, height=busy, width=0.6, brush=CATEGORY_COLORS["gemm"])
        b = pg.BarGraphItem(x=ranks, y0=busy, height=comm, width=0.6,
                            brush=CATEGORY_COLORS["communication"])
        brushes = ["#222"] * len(ranks)
        brushes[slowest] = "#d32f2f"
        tick = pg.ScatterPlotItem(x=ranks, y=its, symbol="_", size=26, pen=None,
                                  brush=brushes)
        for item in (a, b, tick):
            self.plot.addItem(item)
            self._bars.append(item)
        # the key sits in the title: a legend box would cover the bars of a short dock
        self.plot.setTitle(
            f"{res.plan.name}: {res.iteration_ms:.3f} ms (rank {int(ranks[slowest])})<br>"
            f"<span style='color:{CATEGORY_COLORS['gemm']}'>■</span> compute "
            f"<span style='color:{CATEGORY_COLORS['communication']}'>■</span> exposed comm "
            f"<b>–</b> iteration", size="9pt", color="#333")
        self.plot.getAxis("bottom").setTicks([[(int(r), str(int(r))) for r in ranks]])
        self.plot.setXRange(-0.6, max(ranks) + 0.6 if len(ranks) else 1, padding=0)
        top = float(max((busy + comm).max(), its.max())) if len(ranks) else 1.0
        self.plot.setYRange(0, max(1e-3, top * 1.12), padding=0)
