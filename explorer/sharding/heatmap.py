"""Where a sharding plan puts each embedding table: a tables × ranks heat map.

Rows are the tables, the costliest first; columns are the ranks.  A table-wise table fills
one cell, a row-wise one an equal share in every rank's cell, a column-wise one an equal
share in the cells of the ranks that hold its column shards.  The colour is the table's
predicted lookup time per step (forward, backward and update) or its bytes, switched with
the combo box above the map; empty cells hold nothing of the table.  Hover a cell for the
table, the rank, the value and the rank's total.
"""
from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from predictors.utils.formatting import format_bytes

from ..widgets.theme_colors import is_dark, plot_colors

__all__ = ["MEASURES", "PlacementMap", "placement_matrix"]

# what a cell can show: (combo text, ranking.tables field, unit)
MEASURES = (("lookup time", "lookup_ms", "ms"), ("bytes", "bytes", "B"))
LABEL_PX = 15   # a table's name on the left axis needs this much height: else every n-th
_STOPS = ((0.0, "#fff5e6"), (0.35, "#fdae61"), (0.7, "#e6550d"), (1.0, "#7f0000"))


def placement_matrix(tables: list[dict], assignment: dict, ranks: int,
                     field: str = "lookup_ms") -> tuple[list[dict], np.ndarray]:
    """The tables sorted by ``field`` (largest first) and a ``len(tables) × ranks`` array of
    ``field`` per table and rank: a table-wise table's whole value in its rank's column, a
    row-wise table's (``"rw"``) value split evenly over every rank, a data-parallel one's
    (``"dp"``) bytes whole on every rank and its lookups split, a column-wise or
    table-row-wise one's (``{"kind": "cw" | "twrw", "ranks": [...]}``) split evenly over
    its ranks."""
    order = sorted(tables, key=lambda t: -float(t.get(field, 0.0) or 0.0))
    values = np.zeros((len(order), max(1, ranks)))
    for row, t in enumerate(order):
        value = float(t.get(field, 0.0) or 0.0)
        where = assignment.get(t["key"])
        if where == "rw":
            values[row, :] = value / max(1, ranks)
        elif where == "dp":   # every rank holds it all and looks up its own samples
            values[row, :] = value if field == "bytes" else value / max(1, ranks)
        elif isinstance(where, (int, np.integer)) and 0 <= int(where) < ranks:
            values[row, int(where)] = value
        elif isinstance(where, dict) and where.get("kind") in ("cw", "twrw"):
            on = [r for r in where.get("ranks", []) if 0 <= r < ranks]
            for r in on:
                values[row, r] = value / len(on)
    return order, values


def _lookup_table(empty: QColor) -> np.ndarray:
    """256 colours from pale to dark; entry 0 (an empty cell) ``empty``."""
    pos = [p for p, _ in _STOPS]
    cmap = pg.ColorMap(pos, [QColor(c) for _, c in _STOPS])
    lut = cmap.getLookupTable(0.0, 1.0, 256, alpha=False)
    lut[0] = [empty.red(), empty.green(), empty.blue()]
    return lut


class PlacementMap(QWidget):
    """The placement of one plan's tables on its ranks (:meth:`set_plan`)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.measure = QComboBox()
        for text, _field, _unit in MEASURES:
            self.measure.addItem(f"colour by {text}")
        self.measure.setToolTip("What a cell's colour shows: the table's predicted lookup "
                                "time per step (forward, backward, update) or its bytes; "
                                "a row-wise table's share on each rank")
        self.caption = QLabel("")
        self.caption.setTextFormat(Qt.RichText)
        self.plot = pg.PlotWidget(background="w")
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setMinimumSize(200, 100)
        pi = self.plot.getPlotItem()
        pi.invertY(True)
        pi.setLabel("bottom", "rank")
        for name in ("left", "bottom"):
            pi.getAxis(name).setPen(pg.mkPen("#888"))
            pi.getAxis(name).setTextPen(pg.mkPen("#333"))
        pi.getAxis("left").setStyle(tickLength=0)
        pi.getAxis("bottom").setStyle(tickLength=0)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setLookupTable(_lookup_table(self._empty_colour()))
        pi.addItem(self.image)
        self.grid: list = []
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.measure)
        top.addWidget(self.caption, 1)
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(2)
        box.addLayout(top)
        box.addWidget(self.plot, 1)
        self.result = None
        self.tables: list[dict] = []
        self.order: list[dict] = []   # the rows' tables, top to bottom
        self.values = np.zeros((0, 0))
        self.ranks = 0
        self.measure.currentIndexChanged.connect(lambda *_: self._draw())
        self.plot.scene().sigMouseMoved.connect(self._on_mouse_moved)
        pi.vb.sigResized.connect(lambda *_: self._table_ticks())

    def _empty_colour(self) -> QColor:
        """An empty cell's colour: the plot's background (the theme's)."""
        return QColor(plot_colors(self).background)

    def changeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().changeEvent(event)
        if event.type() == QEvent.PaletteChange:   # the theme changed
            self.image.setLookupTable(_lookup_table(self._empty_colour()))
            self._draw()

    @property
    def field(self) -> str:
        return MEASURES[self.measure.currentIndex()][1]

    def set_plan(self, result, tables: list[dict], ranks: int) -> None:
        """Show ``result``'s placement (a :class:`PlanResult`, None clears) of
        ``tables`` (the ranking's ``tables``) on ``ranks`` ranks."""
        self.result, self.tables, self.ranks = result, list(tables or []), int(ranks or 0)
        self._draw()

    def _draw(self) -> None:
        pi = self.plot.getPlotItem()
        for item in self.grid:
            pi.removeItem(item)
        self.grid = []
        if self.result is None or not self.tables or self.ranks < 1:
            self.order, self.values = [], np.zeros((0, 0))
            self.image.clear()
            self.caption.setText("Select a plan to see where its tables go."
                                 if self.result is None or self.tables else
                                 "This ranking has no per-table figures.")
            pi.getAxis("left").setTicks([[]])
            pi.getAxis("bottom").setTicks([[]])
            return
        field = self.field
        self.order, self.values = placement_matrix(self.tables, self._assignment(),
                                                   self.ranks, field)
        top = float(self.values.max()) if self.values.size else 0.0
        # scaled to 1..255: 0 (white) is kept for the cells that hold nothing
        scaled = np.where(self.values > 0, 1 + 254 * self.values / top if top > 0 else 1, 0)
        self.image.setImage(scaled, levels=(0, 255), autoLevels=False)
        n, r = self.values.shape
        self.image.setRect(-0.5, -0.5, r, n)
        dark = is_dark(self.palette())
        if r <= 32:   # a faint line between ranks
            lines = pg.PlotDataItem(np.repeat(np.arange(r - 1) + 0.5, 3),
                                    np.tile([-0.5, n - 0.5, np.nan], r - 1),
                                    pen=pg.mkPen("#3a3f46" if dark else "#e3e6ea", width=1),
                                    connect="finite")
            pi.addItem(lines)
            self.grid.append(lines)
        self._table_ticks()
        rstep = 1 if r <= 16 else 2
        pi.getAxis("bottom").setTicks([[(k, str(k)) for k in range(0, r, rstep)]])
        self.plot.setXRange(-0.5, r - 0.5, padding=0)
        self.plot.setYRange(-0.5, n - 0.5, padding=0)
        unit = "ms" if field == "lookup_ms" else "bytes"
        kinds = [self._assignment().get(t["key"]) for t in self.order]
        rw, dp = kinds.count("rw"), kinds.count("dp")
        cw = sum(isinstance(k, dict) and k.get("kind") == "cw" for k in kinds)
        twrw = sum(isinstance(k, dict) and k.get("kind") == "twrw" for k in kinds)
        self.caption.setText(
            f"<b>{html.escape(self.result.plan.name)}</b>: {n} tables, costliest first"
            + (f", {rw} row-wise (a share on every rank)" if rw else "")
            + (f", {dp} data-parallel (on every rank)" if dp else "")
            + (f", {cw} column-wise (a share on each of their ranks)" if cw else "")
            + (f", {twrw} table-row-wise (a share on each rank of a node)" if twrw else "")
            + f"; white: none on that rank, darkest: {self._fmt(top, field)}"
            + ("" if unit == "bytes" else " of lookups"))

    def _table_ticks(self) -> None:
        """Name every table on the left axis that has room (hover names them all)."""
        n = len(self.order)
        if not n:
            return
        px = self.plot.getPlotItem().vb.height() / n
        step = max(1, int(np.ceil(LABEL_PX / px))) if px > 0 else max(1, n // 16)
        self.plot.getPlotItem().getAxis("left").setTicks(
            [[(i, self._short(t["key"])) for i, t in enumerate(self.order) if i % step == 0]])

    def _assignment(self) -> dict:
        """The plan as the scenario writes it (column-wise tables as objects)."""
        return self.result.plan.to_json()["assignment"]

    @staticmethod
    def _short(key: str) -> str:
        return key if len(key) <= 18 else "…" + key[-17:]

    @staticmethod
    def _fmt(value: float, field: str) -> str:
        return format_bytes(value) if field == "bytes" else f"{value:.3f} ms"

    def cell_text(self, row: int, rank: int) -> str:
        """The tooltip of a cell: table, rank, value and the rank's total."""
        t = self.order[row]
        field = self.field
        where = self._assignment().get(t["key"])
        how = ("row-wise: a share on every rank" if where == "rw"
               else "data-parallel: on every rank" if where == "dp"
               else f"{'table-row-wise' if where.get('kind') == 'twrw' else 'column-wise'} "
                    f"on ranks {', '.join(map(str, where['ranks']))}"
               if isinstance(where, dict) else f"table-wise on rank {where}")
        total = float(self.values[:, rank].sum())
        return (f"{t['key']} ({t.get('rows', 0):,} × {t.get('dim', 0)}, {how})\n"
                f"rank {rank}: {self._fmt(float(self.values[row, rank]), field)}"
                f" (rank total {self._fmt(total, field)})")

    def _on_mouse_moved(self, pos) -> None:
        if not self.values.size:
            return
        vb = self.plot.getPlotItem().vb
        if not vb.sceneBoundingRect().contains(pos):
            QToolTip.hideText()
            return
        p = vb.mapSceneToView(pos)
        row, rank = int(round(p.y())), int(round(p.x()))
        if 0 <= row < self.values.shape[0] and 0 <= rank < self.values.shape[1]:
            QToolTip.showText(self.plot.mapToGlobal(self.plot.mapFromScene(pos)),
                              self.cell_text(row, rank), self.plot)
        else:
            QToolTip.hideText()
