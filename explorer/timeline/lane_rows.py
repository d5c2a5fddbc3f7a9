"""The Gantt's rows on screen: how tall they are, which are in view, and the column right
of the plot that changes their height and scrolls through them.

Rows are at least ``MIN_ROW_PX`` tall, so that every lane name stays readable however many
ranks there are; when they do not all fit, the view scrolls instead of squeezing them.
The column holds a ``+`` (taller lanes) and a ``−`` (shorter lanes) button above the
vertical scroll bar; the Gantt maps Ctrl+wheel and the ``+``/``-`` keys to the same steps.
"""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QScrollBar, QToolButton, QVBoxLayout, QWidget

__all__ = ["LaneRows", "MIN_ROW_PX", "DEFAULT_ROW_PX", "MAX_ROW_PX", "ROW_ZOOM", "EDGE"]

MIN_ROW_PX = 18       # rows never get shorter: the view scrolls instead
DEFAULT_ROW_PX = 24   # row height of a timeline that does not fit the view
MAX_ROW_PX = 240
ROW_ZOOM = 1.25       # one lane-height step
EDGE = 0.2            # rows of margin above the first and below the last row
_SCROLL_UNITS = 1000  # scroll bar steps per row
_COLUMN_PX = 18


class LaneRows(QWidget):
    """The lane-height buttons and the vertical scroll bar of a Gantt's ViewBox ``vb``,
    and the state behind them: the wanted row height (:attr:`row_px`) and the view y at
    the top edge (:attr:`top`).

    Signals
    -------
    sigRowHeightChanged(float)  the row height on screen, in pixels, after a zoom
    """

    sigRowHeightChanged = Signal(float)

    def __init__(self, vb, parent: QWidget | None = None):
        super().__init__(parent)
        self.vb = vb
        self.layout_ = None            # the Gantt's LaneLayout, None without a timeline
        self.row_px = float(DEFAULT_ROW_PX)
        self.top = -EDGE
        self._syncing = False
        self.taller = self._button("+", "Taller lanes (+, or Ctrl+wheel over the lanes)",
                                   lambda: self.zoom(ROW_ZOOM), "ganttTallerLanes")
        self.shorter = self._button("−", "Shorter lanes (−, or Ctrl+wheel over the lanes)",
                                    lambda: self.zoom(1 / ROW_ZOOM), "ganttShorterLanes")
        self.scroll = QScrollBar(Qt.Vertical, self)
        self.scroll.setObjectName("ganttScroll")
        self.scroll.valueChanged.connect(self._on_scrollbar)
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(1)
        box.addWidget(self.taller)
        box.addWidget(self.shorter)
        box.addWidget(self.scroll, 1, Qt.AlignHCenter)
        self.setFixedWidth(_COLUMN_PX)
        self.set_layout(None)

    def _button(self, text: str, tip: str, slot, name: str) -> QToolButton:
        button = QToolButton(self)
        button.setObjectName(name)
        button.setText(text)
        button.setToolTip(tip)
        button.setAutoRaise(True)
        button.setFocusPolicy(Qt.NoFocus)   # the keys stay with the plot
        button.setFixedSize(_COLUMN_PX, _COLUMN_PX)
        button.setAutoRepeat(True)
        button.clicked.connect(slot)
        return button

    def set_layout(self, layout) -> None:
        """Follow the Gantt's new :class:`~explorer.timeline.layout.LaneLayout` (``None``:
        no timeline, nothing to scroll or zoom)."""
        self.layout_ = layout
        for button in (self.taller, self.shorter):
            button.setEnabled(layout is not None)
        if layout is None:
            self.scroll.setVisible(False)

    def extent(self) -> tuple[float, float]:
        """The view y of the top of the first row and the bottom of the last, with margins."""
        height = self.layout_.height if self.layout_ is not None else 1.0
        return -EDGE, height + EDGE

    def row_height_px(self) -> float:
        """The height of a row on screen: the wanted one, or taller when all rows fit."""
        lo, hi = self.extent()
        view_px = self.vb.height()
        if view_px <= 0:
            return self.row_px
        return max(self.row_px, view_px / (hi - lo))

    def apply(self) -> None:
        """Show rows from :attr:`top` down at :meth:`row_height_px`."""
        if self.layout_ is None:
            return
        lo, hi = self.extent()
        view_px = self.vb.height()
        span = hi - lo if view_px <= 0 else min(hi - lo, view_px / self.row_height_px())
        self.top = min(max(self.top, lo), hi - span)
        self.vb.setYRange(self.top, self.top + span, padding=0)
        self._sync_scrollbar(lo, hi, span)

    def to_top(self) -> None:
        self.top = -EDGE
        self.apply()

    def _sync_scrollbar(self, lo: float, hi: float, span: float) -> None:
        self._syncing = True
        try:
            hidden = hi - lo - span
            self.scroll.setVisible(hidden > 1e-6)
            self.scroll.setRange(0, int(round(max(0.0, hidden) * _SCROLL_UNITS)))
            self.scroll.setPageStep(int(round(span * _SCROLL_UNITS)))
            self.scroll.setSingleStep(_SCROLL_UNITS)
            self.scroll.setValue(int(round((self.top - lo) * _SCROLL_UNITS)))
        finally:
            self._syncing = False

    def _on_scrollbar(self, value: int) -> None:
        if self._syncing or self.layout_ is None:
            return
        self.top = self.extent()[0] + value / _SCROLL_UNITS
        self.apply()

    def y_range(self) -> tuple[float, float]:
        """The visible rows' span in view coordinates (top, bottom)."""
        _, (y0, y1) = self.vb.viewRange()
        return float(y0), float(y1)

    def visible_lanes(self) -> list[int]:
        """The lanes whose rows are whole in view, top to bottom."""
        lay = self.layout_
        if lay is None:
            return []
        y0, y1 = self.y_range()
        return [i for i in lay.order if y0 - 1e-6 <= lay.y[i] - 0.5 and lay.y[i] + 0.5 <= y1 + 1e-6]

    def scroll_by(self, rows: float) -> None:
        """Scroll the view down by ``rows`` (negative: up)."""
        self.top += rows
        self.apply()

    def zoom(self, factor: float, anchor_y: float | None = None) -> None:
        """Make rows ``factor`` times taller (< 1: shorter, never below ``MIN_ROW_PX``),
        keeping the row at view y ``anchor_y`` (default: the top one) where it is."""
        if self.layout_ is None:
            return
        old = self.row_height_px()
        self.row_px = float(min(MAX_ROW_PX, max(MIN_ROW_PX, old * factor)))
        new = self.row_height_px()
        if anchor_y is not None:
            self.top = anchor_y - (anchor_y - self.top) * old / new
        self.apply()
        self.sigRowHeightChanged.emit(new)
