"""The Gantt's vertical grid: a line at each tick of the time axis, across the rows in view.

pyqtgraph's own axis grid draws its lines into the axis's picture, which spans the whole
plot and is replayed in every frame: at 1600 × 900 px it cost about half of a pan or zoom
frame.  This item draws the same lines (each tick level fainter than the one above, as
the axis does) straight into the view, only those in it.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QLineF, QRectF
from PySide6.QtGui import QColor, QPen

__all__ = ["TimeGrid"]


class TimeGrid(pg.GraphicsObject):
    """Vertical lines at the ticks of ``axis`` (the time axis), in its pen's colour at
    ``alpha`` (0..1) for the major ticks, fainter for the finer levels."""

    def __init__(self, axis: pg.AxisItem, alpha: float = 0.18):
        super().__init__()
        self.axis, self.alpha = axis, float(alpha)
        self.setZValue(-5)   # under the bars, over the rank bands

    def boundingRect(self) -> QRectF:
        vb = self.getViewBox()
        return vb.viewRect() if vb is not None else QRectF()

    def lines(self) -> list[tuple[float, list[float]]]:
        """``(alpha, [time, ...])`` per tick level of the view, major first."""
        vb = self.getViewBox()
        if vb is None:
            return []
        (t0, t1), _ = vb.viewRange()
        width = max(vb.width(), 1.0)
        levels = self.axis.tickValues(t0, t1, width)
        out = []
        for i, (_spacing, values) in enumerate(levels):
            # as pyqtgraph's grid: fainter per level, and where ticks crowd
            crowd = float(np.clip(0.05 * width / (len(values) + 1), 0.0, 1.0))
            out.append((self.alpha / (i + 1) * crowd, [v for v in values if t0 <= v <= t1]))
        return out

    def paint(self, p, *args) -> None:
        vb = self.getViewBox()
        if vb is None:
            return
        _, (y0, y1) = vb.viewRange()
        base = QColor(self.axis.pen().color())
        for alpha, values in self.lines():
            if not values or alpha <= 0:
                continue
            colour = QColor(base)
            colour.setAlphaF(min(1.0, alpha))
            pen = QPen(colour)
            pen.setCosmetic(True)
            pen.setWidth(0)
            p.setPen(pen)
            p.drawLines([QLineF(v, y0, v, y1) for v in values])

    def viewRangeChanged(self) -> None:  # noqa: N802 - pyqtgraph's name
        self.prepareGeometryChange()
        self.update()
