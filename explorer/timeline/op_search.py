"""Find ops on the timeline by name, as Perfetto's search does.

Typing in the field marks every bar whose name contains the text (case-insensitive) in
the highlight colour, on top of the others, which dim; the label counts the matches and
their time.  Enter (or ▶) goes to the next match in time and Shift+Enter (or ◀) to the
previous one: the view centres on it (zoomed to at most a hundred times its length),
unfolds its rank and scrolls to its row if needed, and pins its details.  Escape clears.
"""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import QEvent, Qt, QTimer
from PySide6.QtGui import QColor, QKeySequence, QPalette, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QToolButton, QWidget

from predictors.engine.timeline import Timeline

from .events import format_us
from .lane_bars import LaneBarsItem

__all__ = ["OpSearch", "matching_events", "HIGHLIGHT"]

HIGHLIGHT = QColor("#ff00d4")   # magenta: unlike every category colour
_DEBOUNCE_MS = 200              # a new search after typing pauses this long


def matching_events(timeline: Timeline | None, query: str) -> np.ndarray:
    """The events whose name contains ``query`` (case-insensitive; blank: none), in
    order of their start."""
    q = query.strip().lower()
    if not q or timeline is None or not len(timeline):
        return np.zeros(0, np.int64)
    ids = [k for k, name in enumerate(timeline.names) if q in name.lower()]
    hit = np.flatnonzero(np.isin(timeline.name_id, ids)) if ids else np.zeros(0, np.int64)
    return hit[np.argsort(timeline.start_us[hit], kind="stable")]


class OpSearch(QWidget):
    """The search field of a :class:`~explorer.timeline.gantt.GanttWidget`."""

    def __init__(self, gantt, bar_height: float, parent: QWidget | None = None):
        super().__init__(parent)
        self.gantt, self.bar_height = gantt, float(bar_height)
        self.searched: Timeline | None = None   # the timeline ``matches`` index
        self.matches = np.zeros(0, np.int64)
        self.current = -1
        self.item: LaneBarsItem | None = None
        self.field = QLineEdit(self)
        self.field.setPlaceholderText("Find op…")
        self.field.setClearButtonEnabled(True)
        self.field.setToolTip("Mark the ops whose name contains this text (Ctrl+F); Enter "
                              "goes to the next, Shift+Enter to the previous, Esc clears")
        self.field.setMaximumWidth(220)
        self.count = QLabel("", self)
        self.count.setForegroundRole(QPalette.PlaceholderText)
        self.back = self._button("◀", "Previous match (Shift+Enter)", lambda: self.go(-1))
        self.next = self._button("▶", "Next match (Enter)", lambda: self.go(1))
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(2)
        for w in (self.field, self.back, self.next, self.count):
            row.addWidget(w)
        self._timer = QTimer(self, singleShot=True, interval=_DEBOUNCE_MS)
        self._timer.timeout.connect(self.search)
        self.field.textChanged.connect(lambda _text: self._timer.start())
        self.field.installEventFilter(self)   # Enter and Shift+Enter step, Esc clears
        find = QShortcut(QKeySequence(QKeySequence.Find), gantt)
        find.setContext(Qt.WidgetWithChildrenShortcut)   # while the Gantt has focus
        find.activated.connect(self.focus)
        self._update_count()

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 - Qt's name
        if watched is self.field and event.type() == QEvent.KeyPress:
            if event.key() in (Qt.Key_Return, Qt.Key_Enter):
                self.go(-1 if event.modifiers() & Qt.ShiftModifier else 1)
                return True
            if event.key() == Qt.Key_Escape:
                self.field.clear()
                return True
        return super().eventFilter(watched, event)

    def _button(self, text: str, tip: str, slot) -> QToolButton:
        b = QToolButton(self)
        b.setText(text)
        b.setToolTip(tip)
        b.setAutoRaise(True)
        b.clicked.connect(slot)
        return b

    def focus(self) -> None:
        self.field.setFocus(Qt.ShortcutFocusReason)
        self.field.selectAll()

    def active(self) -> bool:
        """Whether a search marks bars (the others are then dimmed)."""
        return self.item is not None

    def search(self) -> None:
        """Find the field's text in the timeline now (typing does it after a pause)."""
        self._timer.stop()
        self._match()
        self.redraw()

    def _match(self) -> None:
        self.searched = self.gantt.timeline
        self.matches = matching_events(self.searched, self.field.text())
        self.current = -1

    def redraw(self) -> None:
        """Draw the matches' bars again (the rows moved: a fold, or a new timeline, which
        is searched again)."""
        if self.searched is not self.gantt.timeline:
            self._match()
        pi = self.gantt.plot.getPlotItem()
        if self.item is not None:
            pi.removeItem(self.item)
            self.item = None
        tl, lay = self.gantt.timeline, self.gantt.layout_
        if tl is not None and lay is not None and len(self.matches):
            m = self.matches
            y0 = lay.y[tl.lane[m]] - self.bar_height / 2
            shown = np.isfinite(y0)          # a folded rank's threads are not drawn
            if shown.any():
                m = m[shown]
                self.item = LaneBarsItem(x0=tl.start_us[m] / 1e3, width=tl.dur_us[m] / 1e3,
                                         y0=y0[shown], height=self.bar_height, pen=None,
                                         brush=HIGHLIGHT, key="match")
                self.item.setZValue(6)     # over the critical path, under hover/selection
                pi.addItem(self.item)
        self.gantt.apply_opacity()
        self._update_count()

    def go(self, step: int) -> None:
        """Show the next (``step`` 1) or previous (-1) match and pin its details."""
        if self._timer.isActive():   # typed, and not searched yet
            self.search()
        if not len(self.matches):
            return
        self.current = (self.current + step) % len(self.matches)
        self.gantt.reveal_event(int(self.matches[self.current]))
        self._update_count()

    def _update_count(self) -> None:
        n = len(self.matches)
        for b in (self.back, self.next):
            b.setEnabled(n > 0)
        if not self.field.text().strip():
            self.count.setText("")
            return
        if not n:
            self.count.setText("no match")
            return
        tl = self.gantt.timeline
        total = float(tl.dur_us[self.matches].sum()) if tl is not None else 0.0
        where = f"{self.current + 1} of {n:,}" if self.current >= 0 else f"{n:,} matches"
        self.count.setText(f"{where} · {format_us(total)} in all")
