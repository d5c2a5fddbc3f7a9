"""Where each rank's iteration goes, for one to four plans side by side.

One stacked bar per rank (lookups, dense computation, the embeddings' exchange, other
communication, waiting: the rank's ``breakdown_ms``, which sum to its iteration), the
plans' ranks in groups left to right on one y axis, each group named above with the plan's
iteration.  Hover a bar for its figures.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QLabel, QToolTip, QVBoxLayout, QWidget

from ..timeline.colors import CATEGORY_COLORS

__all__ = ["PARTS", "PART_COLORS", "BreakdownChart"]

PARTS = ("lookups", "dense", "exchange", "other communication", "waiting")
PART_COLORS = {"lookups": CATEGORY_COLORS["embedding"], "dense": CATEGORY_COLORS["gemm"],
               "exchange": CATEGORY_COLORS["communication"],
               "other communication": "#f4a6a7", "waiting": "#c9c9c9"}
PART_TIPS = {"lookups": "the embedding lookups' kernels (forward, backward, update)",
             "dense": "the rank's other computation (MLPs, interaction, optimizer)",
             "exchange": "the embeddings' all-to-all (row-wise: reduce-scatter, all-gather) "
                         "that no computation hides",
             "other communication": "other exposed communication (the dense gradients' "
                                    "all-reduce)",
             "waiting": "the device idle: waiting for its host or for slower peers"}
GAP = 1.4   # bars of space between two plans' groups


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class BreakdownChart(QWidget):
    """Stacked per-rank bars of up to four plans (:meth:`set_plans`).

    ``stacks`` holds what is drawn: per plan (in order) a dict of part -> per-rank ms.
    """

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.key = QLabel(" ".join(
            f"<span style='color:{PART_COLORS[p]}'>■</span> {p}" for p in PARTS))
        self.key.setTextFormat(Qt.RichText)
        self.key.setToolTip("<br>".join(f"<b>{p}</b>: {PART_TIPS[p]}" for p in PARTS))
        self.key.setWordWrap(True)
        self.plot = pg.PlotWidget(background="w")
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setMinimumSize(220, 110)
        self.plot.setLabel("left", "ms")
        pi = self.plot.getPlotItem()
        for name in ("left", "bottom"):
            pi.getAxis(name).setPen(pg.mkPen("#888"))
            pi.getAxis(name).setTextPen(pg.mkPen("#333"))
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(2)
        box.addWidget(self.key)
        box.addWidget(self.plot, 1)
        self.results: list = []
        self.stacks: list[dict[str, np.ndarray]] = []
        self.x: list[np.ndarray] = []    # per plan: its bars' x
        self._items: list = []
        self.plot.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self._width = 0.0
        self.plot.getPlotItem().vb.sigResized.connect(self._on_resized)

    def ink(self) -> str:
        """The colour of text drawn in the chart: the palette's (the theme's) foreground,
        as the plot's background follows the theme too."""
        return self.palette().color(QPalette.WindowText).name()

    def changeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().changeEvent(event)
        if event.type() == QEvent.PaletteChange and getattr(self, "results", None):
            self.set_plans(self.results)   # the theme changed: redraw the plans' names

    def _on_resized(self, *_args) -> None:
        """Redraw when the width changes much: the plans' names are fitted to it."""
        width = self.plot.getPlotItem().vb.width()
        if self.results and len(self.results) > 1 and abs(width - self._width) > 24:
            self._width = width
            self.set_plans(self.results)

    def set_plans(self, results: list) -> None:
        """Draw ``results`` (PlanResults; an empty list clears)."""
        pi = self.plot.getPlotItem()
        for item in self._items:
            pi.removeItem(item)
        self._items, self.stacks, self.x = [], [], []
        self.results = list(results)
        if not self.results:
            pi.getAxis("bottom").setTicks([[]])
            self.plot.setTitle("")
            return
        left, ticks, top = 0.0, [], 0.0
        many = sum(len(r.per_rank) for r in self.results) > 40
        width = 0.72
        for res in self.results:
            ranks = [int(r["rank"]) for r in res.per_rank]
            x = left + np.arange(len(ranks), dtype=float)
            stack = {p: np.array([float(r.get("breakdown_ms", {}).get(p, 0.0))
                                  for r in res.per_rank]) for p in PARTS}
            base = np.zeros(len(ranks))
            for part in PARTS:
                h = stack[part]
                if h.any():
                    item = pg.BarGraphItem(x=x, y0=base.copy(), height=h, width=width,
                                           brush=PART_COLORS[part], pen=None)
                    pi.addItem(item)
                    self._items.append(item)
                base += h
            slowest = int(np.argmax(base)) if len(base) else 0
            top = max(top, float(base.max()) if len(base) else 0.0)
            ticks += [(float(xi), str(rk)) for k, (xi, rk) in enumerate(zip(x, ranks))
                      if not many or k % 4 == 0 or k == len(ranks) - 1]
            self.stacks.append(stack)
            self.x.append(x)
            # the iteration as a tick over the slowest rank
            mark = pg.ScatterPlotItem(x=[x[slowest]], y=[res.iteration_ms], symbol="_",
                                      size=22, pen=None, brush="#d32f2f")
            pi.addItem(mark)
            self._items.append(mark)
            left = float(x[-1]) + GAP if len(x) else left + GAP
        pi.getAxis("bottom").setTicks([ticks])
        self.plot.setXRange(-0.6, left - GAP + 0.6, padding=0)
        top = max(top, 1e-3)
        self.plot.setYRange(0, top * (1.32 if len(self.results) > 1 else 1.08), padding=0)
        best = min(r.iteration_ms for r in self.results)
        span = max(left - GAP + 1.2, 1.0)
        for res, x in zip(self.results, self.x):
            # the name fits over its group (about 8.5 px a character, bold)
            room = max(6, int(pi.vb.width() * (len(x) + GAP) / span / 8.5)) \
                if pi.vb.width() > 0 else 28
            name = res.plan.name if len(res.plan.name) <= room else \
                res.plan.name[:room - 1] + "…"
            gap = "" if res.iteration_ms == best else \
                f" {100 * (res.iteration_ms / best - 1):+.1f} %"
            label = pg.TextItem(html=f"<div style='color:{self.ink()};font-size:8pt'><b>"
                                f"{_escape(name)}</b><br>{res.iteration_ms:.3f} ms{gap}</div>",
                                anchor=(0.5, 0.0))   # its top edge at the chart's top
            label.setPos(float(x.mean()) if len(x) else 0.0, top * 1.31)
            pi.addItem(label, ignoreBounds=True)
            self._items.append(label)
        self.plot.setLabel("bottom", "rank" + (" (per plan)" if len(self.results) > 1 else ""))
        if len(self.results) == 1:
            self.plot.setTitle(f"{_escape(self.results[0].plan.name)}: where each rank's "
                               f"{self.results[0].iteration_ms:.3f} ms go", size="9pt",
                               color=self.ink())
        else:
            self.plot.setTitle("")

    def bar_at(self, x: float, y: float) -> tuple[int, int, str] | None:
        """``(plan position, rank position, part)`` of the bar at view point (x, y)."""
        for k, xs in enumerate(self.x):
            if not len(xs) or not xs[0] - 0.4 <= x <= xs[-1] + 0.4:
                continue
            j = int(round(x - xs[0]))
            if not 0 <= j < len(xs) or abs(x - xs[j]) > 0.36:
                return None
            base = 0.0
            for part in PARTS:
                h = float(self.stacks[k][part][j])
                if base <= y <= base + h:
                    return k, j, part
                base += h
            return None
        return None

    def _on_mouse_moved(self, pos) -> None:
        vb = self.plot.getPlotItem().vb
        if not self.stacks or not vb.sceneBoundingRect().contains(pos):
            return
        p = vb.mapSceneToView(pos)
        hit = self.bar_at(p.x(), p.y())
        if hit is None:
            QToolTip.hideText()
            return
        k, j, part = hit
        res = self.results[k]
        r = res.per_rank[j]
        lines = [f"{res.plan.name}, rank {r['rank']}: {r['iteration_ms']:.3f} ms"]
        lines += [("▸ " if p == part else "   ") + f"{p}: {self.stacks[k][p][j]:.3f} ms"
                  for p in PARTS]
        QToolTip.showText(self.plot.mapToGlobal(self.plot.mapFromScene(pos)),
                          "\n".join(lines), self.plot)
