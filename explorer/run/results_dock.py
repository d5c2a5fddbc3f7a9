"""What-if docks: a long run in the background, its results in a table beside a chart.

The Sharding and Sweep docks share this shape.  A :class:`ResultsView` has a top bar
(run, apply, the dock's own controls, Export CSV… and Copy, progress, cancel), an error
bar, a header, and the table of results beside a chart.  A click on a column's header sorts
the table by it (again: the other way); the results keep their order underneath, so a row
always maps to its result (:meth:`ResultsView.result_at`, :meth:`ResultsView.row_of`).  A :class:`ResultsController` runs the work in a
:class:`~explorer.workers.BackgroundRunner`, adds the dock and its Run menu action, and
greys the results while the scenario differs from the one they were made for.  "Apply"
writes the selected result into the scenario as one undo step.
"""
from __future__ import annotations

import json
import re

import pyqtgraph as pg
from PySide6.QtCore import QItemSelectionModel, QObject, Qt, Signal
from PySide6.QtGui import QAction, QKeySequence, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from predictors.profiles import ProfileError
from predictors.scenario.format import ScenarioError
from predictors.utils.formatting import format_bytes

from ..widgets import ElidedLabel, ErrorBar, TableExport
from ..widgets.theme_colors import style_by_theme
from ..workers import BackgroundRunner

__all__ = ["ResultsController", "ResultsView", "memory_text"]



_NUMBER = re.compile(r"\s*[-+]?\d[\d,]*(?:\.\d+)?")
_UNITS = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "KIB": 2**10, "MIB": 2**20,
          "GIB": 2**30, "TIB": 2**40}


def sort_key(text: str) -> tuple:
    """How a cell's text sorts: by the number it starts with (bytes scaled by their
    unit), cells that do not start with one after the numbers, by their text."""
    m = _NUMBER.match(text or "")
    if m is None:
        return (1, 0.0, (text or "").lower())
    value = float(m.group().strip().replace(",", ""))
    unit = text[m.end():].strip().split(" ")[0].upper() if text[m.end():].strip() else ""
    return (0, value * _UNITS.get(unit, 1), (text or "").lower())


def memory_text(peak_bytes: int | None, fits: bool | None) -> str:
    """A table cell for a peak: ``9.1 GB``, ``69.5 GB ✗ too big``, or a dash."""
    if not peak_bytes:
        return "–"
    return format_bytes(peak_bytes) + ("  ✗ too big" if fits is False else "")

class ResultsTable(QTableWidget):
    """The results table: :meth:`selectRow` selects that row alone, whatever keys are
    held (with several rows selectable, Qt's would add to the selection under Ctrl)."""

    def selectRow(self, row: int) -> None:
        index = self.model().index(row, 0)
        if index.isValid():
            self.selectionModel().setCurrentIndex(
                index, QItemSelectionModel.ClearAndSelect | QItemSelectionModel.Rows)


class ResultsView(QWidget):
    """Results of one what-if run: a table (one row per result) beside a chart.

    Signals
    -------
    sigRunRequested()
    sigCancelRequested()
    sigApplyRequested(object)   the selected result
    """

    sigRunRequested = Signal()
    sigCancelRequested = Signal()
    sigApplyRequested = Signal(object)

    def __init__(self, columns: tuple, tips: tuple, empty_text: str, run: tuple[str, str],
                 apply: tuple[str, str], controls: tuple = (), parent: QWidget | None = None):
        super().__init__(parent)
        self.results: list = []
        self.order: list[int] = []  # table row -> index in ``results`` (sorting moves rows)
        self._rows: list[list[str]] = []
        self._tips: list[str] = []
        self._keys: list[list] = []
        self.shown = None  # the run's whole result
        self.stale = False
        self.empty_text = empty_text
        self.header = QLabel(empty_text)
        self.header.setWordWrap(True)
        self.header.setForegroundRole(QPalette.PlaceholderText)   # secondary text
        self.run_button = QPushButton(run[0])
        self.run_button.setToolTip(run[1])
        self.apply_button = QPushButton(apply[0])
        self.apply_button.setToolTip(apply[1])
        self.apply_button.setEnabled(False)
        self.controls = list(controls)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setMaximumWidth(220)
        self.progress.setTextVisible(False)
        self.stage = ElidedLabel("", mode=Qt.ElideRight)  # never widens the window
        self.stage.setForegroundRole(QPalette.PlaceholderText)
        self.cancel_button = QPushButton("Cancel")
        self.error = ErrorBar()
        self.table = ResultsTable(0, len(columns))
        self.table.setHorizontalHeaderLabels(list(columns))
        self.table.verticalHeader().setVisible(False)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        for col, tip in enumerate(tips):
            self.table.horizontalHeaderItem(col).setToolTip(tip)
        head = self.table.horizontalHeader()
        head.setSectionResizeMode(QHeaderView.ResizeToContents)
        head.setStretchLastSection(True)
        head.setSectionsClickable(True)
        head.setSortIndicatorShown(True)
        head.setSortIndicator(-1, Qt.AscendingOrder)  # the results' own order
        head.sortIndicatorChanged.connect(self._on_sort)
        self.footer = QLabel("")
        self.footer.setWordWrap(True)
        self.footer.hide()
        # the footer's caveat in amber, lighter on a dark palette
        style_by_theme(self.footer, lambda dark: f"color: {'#e0a84a' if dark else '#8a5a00'};")
        self.plot = pg.PlotWidget(background="w")
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setMinimumSize(260, 120)
        self._items: list = []
        self.export = TableExport(self.table, self.export_name, self.show_error, self)
        self._build_layout()
        self.run_button.clicked.connect(self.sigRunRequested)
        self.cancel_button.clicked.connect(self.sigCancelRequested)
        self.apply_button.clicked.connect(self._apply)
        self.table.itemSelectionChanged.connect(self._on_selection)
        self.set_running(False)

    def _build_layout(self) -> None:
        top = QHBoxLayout()
        for w in self.controls + [self.run_button, self.apply_button]:
            top.addWidget(w)
        top.addSpacing(6)
        for w in self.export.buttons():
            top.addWidget(w)
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
        lay.addWidget(self.footer)
        split = self.splitter = QSplitter(Qt.Horizontal)  # the bottom dock is wide and short
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
        self.run_button.setEnabled(not running)
        for w in self.controls:
            w.setEnabled(not running)
        # no Apply while a run may replace what is shown
        res = self.selected()
        self.apply_button.setEnabled(not running and res is not None and not self.stale
                                     and self.can_apply(res))
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
        """Grey the results (still scrollable): the scenario changed since they were made."""
        self.stale = bool(stale) and self.shown is not None
        self.table.setStyleSheet("QTableWidget { color: #a0a6ae; }" if self.stale else "")
        self.plot.setEnabled(not self.stale)
        self.apply_button.setEnabled(not self.stale and self.selected() is not None)
        if self.shown is not None:
            self.header.setText(self.header_text())

    def clear(self) -> None:
        self.shown, self.results, self.stale = None, [], False
        self.order, self._rows, self._tips, self._keys = [], [], [], []
        self.error.clear()
        self.table.setRowCount(0)
        self.footer.setText("")
        self.footer.hide()
        self.header.setText(self.empty_text)
        self.draw(None)
        self.apply_button.setEnabled(False)

    # --- results --------------------------------------------------------------------------

    def header_text(self) -> str:
        """The header above the table (subclasses say what was run)."""
        return ""

    def export_name(self) -> str:
        """The stem of the CSV file's default name (subclasses say what was run)."""
        return "results"

    def show_rows(self, shown, results: list, rows: list[list[str]], tips: list[str],
                  footer: str = "", select: int | None = 0,
                  keys: list[list] | None = None) -> None:
        """Fill the table: one row of cell texts per result (numbers right-aligned), in
        the results' order; ``select`` is a result's index.  ``keys`` (per row, per
        column) sort the columns where a cell's text would not (:func:`sort_key` else)."""
        self.shown, self.results = shown, list(results)
        self._rows, self._tips = [list(r) for r in rows], list(tips)
        self._keys = [list(k) for k in keys] if keys is not None else []
        self.stale = False
        self.table.setStyleSheet("")
        self.plot.setEnabled(True)
        self.header.setText(self.header_text())
        head = self.table.horizontalHeader()
        head.blockSignals(True)
        head.setSortIndicator(-1, Qt.AscendingOrder)  # new results: their own order
        head.blockSignals(False)
        self._fill(list(range(len(rows))))
        self.footer.setText(footer)
        self.footer.setVisible(bool(footer))
        if rows and select is not None:
            self.table.selectRow(self.row_of(select))
        else:
            self.draw(None)

    def _fill(self, order: list[int]) -> None:
        """(Re)write the table's rows: row ``r`` shows result ``order[r]``."""
        self.order = list(order)
        self.table.setRowCount(len(order))
        for row, index in enumerate(order):
            tip = self._tips[index] if index < len(self._tips) else ""
            for col, text in enumerate(self._rows[index]):
                item = QTableWidgetItem(text)
                if col != 1:
                    item.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
                item.setToolTip(tip)
                self.table.setItem(row, col, item)

    def _sort_value(self, index: int, col: int) -> tuple:
        if index < len(self._keys) and col < len(self._keys[index]):
            key = self._keys[index][col]
            if key is not None:
                return (0, key, "") if isinstance(key, (int, float)) else (1, 0.0, str(key))
        cells = self._rows[index]
        return sort_key(cells[col] if col < len(cells) else "")

    def _on_sort(self, col: int, order) -> None:
        """Sort the rows by column ``col`` (-1: the results' own order), keeping the
        selected results selected and the chart as it is."""
        if not self._rows:
            return
        chosen = self.selected_indices()
        indices = list(range(len(self._rows)))
        if 0 <= col < self.table.columnCount():
            indices.sort(key=lambda i: self._sort_value(i, col),
                         reverse=order == Qt.DescendingOrder)
        model = self.table.selectionModel()
        self.table.blockSignals(True)
        model.blockSignals(True)
        try:
            self._fill(indices)
            self.table.clearSelection()
            for index in chosen:
                model.select(self.table.model().index(self.row_of(index), 0),
                             QItemSelectionModel.Select | QItemSelectionModel.Rows)
        finally:
            model.blockSignals(False)
            self.table.blockSignals(False)
        self.table.viewport().update()
        self.after_sort()

    def after_sort(self) -> None:
        """What a subclass redoes after the rows moved (marks written into cells)."""

    def row_of(self, index: int) -> int:
        """The table row showing result ``index`` (-1: none)."""
        try:
            return self.order.index(index)
        except ValueError:
            return -1

    def result_at(self, row: int):
        """The result the table's ``row`` shows (None: no such row)."""
        if 0 <= row < len(self.order) and self.order[row] < len(self.results):
            return self.results[self.order[row]]
        return None

    def selected_indices(self) -> list[int]:
        """The selected results' indices, in the table's order."""
        rows = sorted(i.row() for i in self.table.selectionModel().selectedRows())
        return [self.order[r] for r in rows if 0 <= r < len(self.order)
                and self.order[r] < len(self.results)]

    def selected_results(self) -> list:
        """The selected results, in the table's order."""
        return [self.results[i] for i in self.selected_indices()]

    def selected(self):
        chosen = self.selected_results()
        return chosen[0] if chosen else None

    def _on_selection(self) -> None:
        res = self.selected()
        self.apply_button.setEnabled(res is not None and not self.stale and self.can_apply(res)
                                     and not self.cancel_button.isVisible())
        self.draw(res)

    def can_apply(self, result) -> bool:
        return True

    def _apply(self) -> None:
        res = self.selected()
        if res is not None:
            self.sigApplyRequested.emit(res)

    def clear_plot(self) -> None:
        for item in self._items:
            self.plot.removeItem(item)
        self._items = []

    def add_plot_item(self, item) -> None:
        self.plot.addItem(item)
        self._items.append(item)

    def draw(self, result) -> None:
        """Chart the selected result (subclasses)."""
        self.clear_plot()


class ResultsController(QObject):
    """Runs one kind of what-if for ``window`` and shows it in its dock.

    Subclasses set ``title``, ``object_name``, ``action`` (text, shortcut, tip) and
    implement :meth:`call` (the work, in the worker thread), :meth:`show` (the result, on
    the GUI thread), :meth:`ignored` (the scenario fields the results do not depend on)
    and :meth:`apply`.
    """

    title = ""
    object_name = ""
    action = ("", None, "")
    failure = "Could not run"

    def __init__(self, window, view: ResultsView, fn=None):
        super().__init__(window)
        self.window, self.view, self.fn = window, view, fn
        self._key: str | None = None  # of the results on screen
        self._pending_key: str | None = None  # of the run in progress
        self.runner = BackgroundRunner((ScenarioError, ProfileError),
                                       self.failure, self)
        self.dock = window._dock(self.title, self.object_name, view, Qt.BottomDockWidgetArea)
        window.tabifyDockWidget(window.timeline_dock, self.dock)
        window.timeline_dock.raise_()
        menus = [a.menu() for a in window.menuBar().actions() if a.menu() is not None]
        run_menu, view_menu = menus[2], menus[3]  # File, Edit, Run, View, Help
        text, shortcut, tip = self.action
        self.run_action = QAction(text, window)
        if shortcut:
            self.run_action.setShortcut(QKeySequence(shortcut))
        self.run_action.setStatusTip(tip)
        self.run_action.triggered.connect(self.run)
        run_menu.addAction(self.run_action)
        window.cancel_action.triggered.connect(self.runner.cancel)  # Run ▸ Cancel stops it
        acts = view_menu.actions()
        view_menu.insertAction(acts[4] if len(acts) > 4 else None, self.dock.toggleViewAction())
        v, r, doc = self.view, self.runner, window.editor.document
        v.sigRunRequested.connect(self.run)
        v.sigCancelRequested.connect(r.cancel)
        v.sigApplyRequested.connect(self.apply)
        r.sigProgress.connect(v.set_progress)
        r.sigFinished.connect(self._on_finished)
        r.sigFailed.connect(self._on_failed)
        r.sigCancelled.connect(self._on_cancelled)
        doc.sigChanged.connect(self.check_stale)
        doc.sigReset.connect(self._on_reset)
        # a profile or overheads change starts a prediction: the results may be stale
        window.controller.sigStarted.connect(self.check_stale)

    # --- for subclasses -----------------------------------------------------------------

    def call(self, snapshot: dict, **kwargs):
        raise NotImplementedError

    def show(self, result) -> str:
        """Show ``result``; return the status-bar message."""
        raise NotImplementedError

    def ignored(self, for_run: bool = False) -> list[tuple[str, str | None]]:
        """``(section, key)`` pairs (key None: the whole section) the results do not
        depend on, besides the layout: those of the results on screen, or with
        ``for_run`` of the run being started."""
        return []

    def apply(self, result) -> bool:
        raise NotImplementedError

    # --- the run ------------------------------------------------------------------------

    def key(self, for_run: bool = False) -> str:
        """What the results depend on: the scenario (less its layout and what
        :meth:`ignored` names) and the prediction's profile and overheads."""
        doc = self.window.editor.document.snapshot()
        doc.pop("layout", None)
        for section, key in self.ignored(for_run):
            if key is None:
                doc.pop(section, None)
            else:
                doc.get(section, {}).pop(key, None)
        c = self.window.controller
        return json.dumps([doc, c.profile if isinstance(c.profile, str) else id(c.profile),
                           id(c.overheads)], sort_keys=True, default=str)

    def is_fresh(self) -> bool:
        return self.view.shown is not None and self.key() == self._key

    def check_stale(self, *_args) -> None:
        self.view.set_stale(self.view.shown is not None and not self.is_fresh())

    def run(self) -> int:
        """Run on the current scenario in the background; returns the run id."""
        self.dock.show()
        self.dock.raise_()
        c = self.window.controller
        kwargs = {}
        if c.profile is not None:
            kwargs["profile"] = c.profile
        if c.overheads is not None:
            kwargs["overheads"] = c.overheads
        snapshot = self.window.editor.document.snapshot()
        self._pending_key = self.key(for_run=True)  # becomes _key when its results show
        self.view.set_running(True, "starting…")
        return self.runner.run(lambda progress, cancelled: self.call(
            snapshot, progress=progress, cancelled=cancelled, **kwargs))

    def refuse_stale(self) -> bool:
        """True (with a message) when the results no longer fit the scenario."""
        if self.is_fresh():
            return False
        self.window.statusBar().showMessage(
            f"The scenario changed since the {self.title.lower()} results were made: run "
            "again first", 8000)
        return True

    def _on_finished(self, result) -> None:
        self.view.set_running(False)
        self._key = self._pending_key
        message = self.show(result)
        self.check_stale()  # edited while it ran: shown, but as out of date
        self.window.statusBar().showMessage(message, 8000)

    def _on_failed(self, message: str) -> None:
        self.view.set_running(False)
        self.view.show_error(message)
        self.window.statusBar().showMessage(message, 10000)

    def _on_cancelled(self) -> None:
        self.view.set_running(False)
        self.window.statusBar().showMessage(f"{self.title} cancelled", 4000)

    def _on_reset(self) -> None:
        self.runner.cancel()
        self.view.clear()

    def shutdown(self) -> bool:
        return self.runner.shutdown()
