"""Selecting a time range on the Gantt, as in Perfetto: a left-drag marks a translucent
region and labels it with its duration; Esc clears it.

``TimeRangeViewBox`` turns plain left-drags on the plot into range drags (shift- and
middle-drags, and drags on the axis, still pan); ``TimeRangeSelection`` draws the region and
its label.
"""
from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor

__all__ = ["TimeRangeViewBox", "TimeRangeSelection", "format_duration"]

REGION_BRUSH = QColor(66, 133, 244, 46)
REGION_EDGE = QColor(66, 133, 244, 200)


def format_duration(ms: float) -> str:
    """``850 ns``, ``12.3 µs``, ``1.234 ms`` or ``2.500 s`` for a span in milliseconds."""
    us = abs(ms) * 1e3
    if us < 1.0:
        return f"{us * 1e3:.0f} ns"
    if us < 1000.0:
        return f"{us:.1f} µs"
    if us < 1e6:
        return f"{us / 1e3:.3f} ms"
    return f"{us / 1e6:.3f} s"


class TimeRangeViewBox(pg.ViewBox):
    """A ViewBox whose plain left-drag selects a time range instead of panning.

    Signals
    -------
    sigRangeDragged(float, float, bool)  start and current time (ms), and whether the drag
        has finished
    """

    sigRangeDragged = Signal(float, float, bool)

    def mouseDragEvent(self, ev, axis=None):
        if (axis is None and ev.button() == Qt.LeftButton
                and not ev.modifiers() & Qt.ShiftModifier):
            ev.accept()
            t0 = self.mapSceneToView(ev.buttonDownScenePos(Qt.LeftButton)).x()
            t1 = self.mapSceneToView(ev.scenePos()).x()
            self.sigRangeDragged.emit(float(t0), float(t1), bool(ev.isFinish()))
            return
        super().mouseDragEvent(ev, axis)


class TimeRangeSelection(QObject):
    """The selected time range of a ViewBox: a translucent region with a duration label.

    Signals
    -------
    sigChanged(object)  ``(t0_ms, t1_ms)`` when a selection is made, ``None`` when cleared
    """

    sigChanged = Signal(object)

    def __init__(self, plot_item: pg.PlotItem, parent: QObject | None = None):
        super().__init__(parent)
        self.vb = plot_item.getViewBox()
        self.range: tuple[float, float] | None = None
        self.region = pg.LinearRegionItem(orientation="vertical", movable=False,
                                          brush=REGION_BRUSH, pen=pg.mkPen(REGION_EDGE))
        self.region.setZValue(15)
        self.label = pg.TextItem("", color="#174ea6", anchor=(0.5, 0),
                                 fill=pg.mkBrush(255, 255, 255, 215),
                                 border=pg.mkPen(REGION_EDGE))
        self.label.setZValue(21)
        for item in (self.region, self.label):
            item.setVisible(False)
            plot_item.addItem(item, ignoreBounds=True)
        self.vb.sigRangeChanged.connect(self._place_label)

    def set_range(self, t0: float, t1: float) -> None:
        """Select ``[t0, t1]`` ms (either order); an empty range clears."""
        t0, t1 = sorted((float(t0), float(t1)))
        if t1 <= t0:
            self.clear()
            return
        self.range = (t0, t1)
        self.region.setRegion((t0, t1))
        self.label.setText(format_duration(t1 - t0))
        self.region.setVisible(True)
        self.label.setVisible(True)
        self._place_label()

    def clear(self) -> None:
        had = self.range is not None
        self.range = None
        self.region.setVisible(False)
        self.label.setVisible(False)
        if had:
            self.sigChanged.emit(None)

    def on_drag(self, t0: float, t1: float, finished: bool) -> None:
        """Slot for :attr:`TimeRangeViewBox.sigRangeDragged`."""
        px = self.vb.viewPixelSize()[0]
        if abs(t1 - t0) < 2 * px:  # a twitch, not a selection
            if finished:
                self.clear()
            return
        self.set_range(t0, t1)
        if finished:
            self.sigChanged.emit(self.range)

    def _place_label(self, *args) -> None:
        if self.range is None:
            return
        (x0, x1), (y0, y1) = self.vb.viewRange()
        a, b = max(self.range[0], x0), min(self.range[1], x1)
        center = (a + b) / 2 if a < b else (self.range[0] + self.range[1]) / 2
        # The y axis is inverted (lane 0 on top), so the top of the view is the smaller y.
        self.label.setPos(center, min(y0, y1))
