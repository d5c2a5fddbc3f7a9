"""The bars of one category on the Gantt: a ``BarGraphItem`` that draws what is in view.

pyqtgraph's ``BarGraphItem`` hands every bar to ``QPainter.drawRects`` in every frame, in
view or not; at a million bars a frame takes about the 50 ms it may on its own.
:class:`LaneBarsItem` takes the same options (``x0``, ``width``, ``y0``, ``height``, one
``brush``, ``pen=None``) and paints, per frame, only the rows and the time window in view,
per pixel column of a row the category that covers most of it (see
:class:`~explorer.timeline.level_of_detail.PixelColumns`): bars closer than a pixel merge,
and a short kernel still shows at full zoom-out.  The Gantt's categories share one
``PixelColumns`` (option ``columns``, each under its ``key`` and with its ``z`` for ties),
so that they split each busy column between them instead of painting over one another.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QPainterPath

from .level_of_detail import CoverageBins, PixelColumns

__all__ = ["LaneBarsItem"]


class LaneBarsItem(pg.BarGraphItem):
    """A one-colour ``BarGraphItem`` (``pen=None``) drawn per pixel column.

    Extra options: ``columns`` (a shared :class:`PixelColumns`; default: one of its own),
    ``key`` (its colour's key there) and ``z`` (wins ties in a column).  ``opts`` keep the
    bars as given; :attr:`drawn` is how many rectangles the last frame drew.
    """

    def __init__(self, **opts):
        opts.setdefault("columns", None)
        opts.setdefault("key", None)
        opts.setdefault("z", 0.0)
        super().__init__(**opts)   # its setOpts prepares the columns
        self.drawn = 0
        if not self._singleColor:
            raise ValueError("LaneBarsItem draws one brush and one pen: use BarGraphItem")

    def _prepareData(self):
        if self.opts["columns"] is None:
            self.opts["columns"] = PixelColumns()
        if self.opts["key"] is None:
            self.opts["key"] = id(self)
        x0, y0, x1, y1 = self._getNormalizedCoords()
        n = max(np.size(x0), np.size(y0))
        if not n:
            self._dataBounds = (None, None), (None, None)
            x0 = x1 = y0 = y1 = np.zeros(0)
        else:
            self._dataBounds = (float(np.min(x0)), float(np.max(x1))), (float(np.min(y0)),
                                                                        float(np.max(y1)))
        x0, x1, y0, y1 = (np.broadcast_to(a, n) for a in (x0, x1, y0, y1))
        self.columns.add(self.key, x0, x1, y0, y1, self.opts["z"])

    @property
    def columns(self) -> PixelColumns:
        return self.opts["columns"]

    @property
    def key(self):
        return self.opts["key"]

    @property
    def bins(self) -> CoverageBins:
        """This colour's bars, per row (:class:`CoverageBins`)."""
        return self.columns.bins(self.key)

    def paint(self, p, *args):
        self.drawn = 0
        vb = self.getViewBox()
        if vb is None or self._dataBounds[0][0] is None:
            return
        (t0, t1), (y0, y1) = vb.viewRange()
        scale = abs(p.transform().m11())
        px = 1.0 / scale if scale > 0 else max(t1 - t0, 1e-9) / 1000.0
        x, width, top, height = self.columns.rects(self.key, t0, t1, px, y0, y1)
        n = len(x)
        if not n:
            return
        self._rectarray.resize(n)
        rects = self._rectarray.ndarray()
        rects[:, 0] = x
        rects[:, 1] = top
        rects[:, 2] = width
        rects[:, 3] = height
        p.setPen(self._sharedPen)
        p.setBrush(self._sharedBrush)
        p.drawRects(*self._rectarray.drawargs())
        self.drawn = n

    def shape(self):
        # the bounds, not a path of a million rectangles: the Gantt looks hovered bars up
        # in its own index, and Qt asks an item under the mouse for its shape
        path = QPainterPath()
        path.addRect(self.boundingRect())
        return path
