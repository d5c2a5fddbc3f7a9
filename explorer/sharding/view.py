"""The Sharding dock: embedding sharding plans ranked side by side, and one plan's ranks.

The table lists every plan best first (iteration, the gap to the best, the slowest rank,
how evenly the tables' bytes spread, the slowest rank's exposed communication).  Beside
it, the selected plan's ranks: compute-stream time and exposed communication as bars, each
rank's iteration as a tick, the slowest rank's in red.  "Apply" writes the plan into the
scenario (one undo step).
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QWidget

from predictors.utils.formatting import format_bytes

from ..run.results_dock import ResultsView, memory_text
from ..timeline.colors import CATEGORY_COLORS, COUNTER_COLOR

__all__ = ["ShardingView", "COLUMNS", "compute_ms"]

COLUMNS = ("#", "Plan", "Iteration (ms)", "vs best", "Slowest", "Tables per rank",
           "Peak memory", "Exposed comm (ms)")
COLUMN_TIPS = ("Rank of the plan, best first", "The planner that made it (hover a row for how)",
               "Predicted iteration time of the slowest rank",
               "How much slower than the best plan", "The rank that finishes last",
               "The least and the most embedding-table bytes any rank holds",
               "Allocated device memory at the step's peak, on the rank that needs most "
               "(tables, dense weights, gradients, activations); plans that do not fit "
               "rank last",
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


class ShardingView(ResultsView):
    """Ranked plans (a :class:`~predictors.plan.rank_sharding.ShardingRanking`) and one plan's
    ranks."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(COLUMNS, COLUMN_TIPS, EMPTY_TEXT,
                         ("Rank Plans", "Predict every candidate sharding plan of this "
                                        "scenario (Run ▸ Rank Shardings)"),
                         ("Apply Plan", "Write the selected plan into the scenario's "
                                        "parallelism.embedding_sharding (undoable)"),
                         parent=parent)
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
        text = (f"{len(r.plans)} plan(s) for {r.scenario_name or 'this scenario'}, best "
                f"first. " + " ".join(r.notes[:1]) + ".")
        if self.stale:
            text = "Out of date (the scenario changed): rank again. " + text
        return text

    def export_name(self) -> str:
        name = getattr(self.shown, "scenario_name", "") or "scenario"
        return f"{name}-sharding-plans"

    def set_ranking(self, ranking) -> None:
        """Show a :class:`~predictors.plan.rank_sharding.ShardingRanking`."""
        best = ranking.plans[0].iteration_ms if ranking.plans else 0.0
        rows, tips = [], []
        for i, res in enumerate(ranking.plans):
            slowest = max(res.per_rank, key=lambda r: r["iteration_ms"])
            rows.append([str(i + 1), res.plan.name, f"{res.iteration_ms:.3f}",
                         ("best" if res.fits else "best (too big)") if i == 0
                         else f"{100 * (res.iteration_ms / best - 1):+.1f} %",
                         str(slowest["rank"]), f"{format_bytes(min(res.rank_bytes))} – "
                         f"{format_bytes(max(res.rank_bytes))}",
                         memory_text(res.peak_memory_bytes or None, res.fits),
                         f"{slowest.get('exposed_comm_ms', 0.0):.3f}"])
            tips.append(f"{res.plan.name}: {res.plan.how}" if res.plan.how else res.plan.name)
        footer = "; ".join(f"Not possible: {n} ({w})" for n, w in ranking.refused)
        self.show_rows(ranking, ranking.plans, rows, tips, footer)

    def mark_applied(self, assignment) -> None:
        """Tag the plan the scenario uses now (after Apply) in the Plan column."""
        for row, res in enumerate(self.results):
            item = self.table.item(row, 1)
            if item is not None:
                applied = isinstance(assignment, dict) and assignment == res.plan.assignment
                item.setText(res.plan.name + ("  ✓ applied" if applied else ""))

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
        brushes = ["#222"] * len(ranks)
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
            f"<b>–</b> iteration", size="9pt", color="#333")
        self.plot.getAxis("bottom").setTicks([[(int(r), str(int(r))) for r in ranks]])
        self.plot.setXRange(-0.6, max(ranks) + 0.6 if len(ranks) else 1, padding=0)
        top = float(max((busy + comm).max(), its.max())) if len(ranks) else 1.0
        self.plot.setYRange(0, max(1e-3, top * 1.12), padding=0)
