"""Results tables out of the app: "Export CSV…" to a file and "Copy" (also Ctrl+C on the
table) as tab-separated text that pastes into a spreadsheet, both with a header row.

One :class:`TableExport` serves each table (Sharding, Sweep, Summary, Compare).  Copy takes
the selected rows, or every row when none is selected; the CSV file has every row.  Files
are written atomically; a failure goes to the view's ``on_error`` and never raises.
"""
from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QFileDialog,
    QMainWindow,
    QTableWidget,
    QToolButton,
    QWidget,
)

from predictors.utils.fileio import atomic_write_bytes

__all__ = ["EXPORT_ROLE", "TableExport", "table_csv", "table_rows", "table_tsv"]

# an item's text for the file and the clipboard, where it differs from what the cell shows
# (a cell's leading marker glyph, say)
EXPORT_ROLE = Qt.UserRole + 77


def _cell(table: QTableWidget, row: int, col: int) -> str:
    item = table.item(row, col)
    if item is None:
        return ""
    plain = item.data(EXPORT_ROLE)
    return plain if isinstance(plain, str) else item.text()


def _header(table: QTableWidget, col: int) -> str:
    item = table.horizontalHeaderItem(col)
    return item.text() if item is not None else str(col + 1)


def table_rows(table: QTableWidget, selected_only: bool = False) -> list[list[str]]:
    """The header and the rows of ``table`` as cell texts (hidden rows and columns left
    out); with ``selected_only``, the rows with a selected cell (all rows when none is)."""
    cols = [c for c in range(table.columnCount()) if not table.isColumnHidden(c)]
    rows = [r for r in range(table.rowCount()) if not table.isRowHidden(r)]
    if selected_only:
        model = table.selectionModel()
        chosen = {i.row() for i in model.selectedIndexes()} if model is not None else set()
        if chosen:
            rows = [r for r in rows if r in chosen]
    out = [[_header(table, c) for c in cols]]
    for r in rows:
        out.append([_cell(table, r, c) for c in cols])
    return out


def table_tsv(table: QTableWidget, selected_only: bool = True) -> str:
    """Tab-separated text with a header row (tabs and line breaks in cells become spaces)."""
    def clean(text: str) -> str:
        return " ".join(text.replace("\t", " ").split())
    return "\n".join("\t".join(clean(c) for c in row)
                     for row in table_rows(table, selected_only)) + "\n"


def table_csv(table: QTableWidget) -> bytes:
    """Every row of ``table`` as UTF-8 CSV with a header row."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(table_rows(table))
    return buf.getvalue().encode("utf-8")


class TableExport(QObject):
    """"Export CSV…" and "Copy" for one table: two buttons for the view's toolbar, the
    table's context menu, and Ctrl+C while the table has the focus.

    Parameters
    ----------
    table : the results table
    name : the default file name's stem, or a callable returning it
    on_error : shows a message in the view (an error bar); exports never raise

    Signals
    -------
    sigMessage(str)   what was done, for the status bar
    """

    sigMessage = Signal(str)

    def __init__(self, table: QTableWidget, name: str | Callable[[], str],
                 on_error: Callable[[str], None], parent: QObject | None = None):
        super().__init__(parent if parent is not None else table)
        self.table, self.name, self.on_error = table, name, on_error
        self.export_button = self._button("Export CSV…", "Save every row of the table as a "
                                          "CSV file (opens in a spreadsheet)", self.export_dialog)
        self.copy_button = self._button("Copy", "Copy the selected rows (or all) with the "
                                        "header as tab-separated text (Ctrl+C in the table)",
                                        self.copy)
        self.copy_action = QAction("Copy Rows", table)
        self.copy_action.setShortcut(QKeySequence.Copy)
        self.copy_action.setShortcutContext(Qt.WidgetShortcut)
        self.copy_action.triggered.connect(self.copy)
        self.export_action = QAction("Export CSV…", table)
        self.export_action.triggered.connect(self.export_dialog)
        table.addAction(self.copy_action)
        table.addAction(self.export_action)
        table.setContextMenuPolicy(Qt.ActionsContextMenu)
        # Ctrl+C reaches the table as a key press (the item view's own copy takes one cell)
        table.installEventFilter(self)
        self.sigMessage.connect(self._to_status_bar)

    def _button(self, text: str, tip: str, slot) -> QToolButton:
        b = QToolButton()
        b.setText(text)
        b.setToolTip(tip)
        b.setToolButtonStyle(Qt.ToolButtonTextOnly)
        b.clicked.connect(slot)
        return b

    def buttons(self) -> tuple[QWidget, QWidget]:
        return self.export_button, self.copy_button

    def eventFilter(self, obj, event) -> bool:
        # (getattr: Qt may still deliver events while the object is being torn down)
        if obj is getattr(self, "table", None) and event.type() in (
                QEvent.ShortcutOverride, QEvent.KeyPress) and event.matches(QKeySequence.Copy):
            event.accept()
            if event.type() == QEvent.KeyPress:
                self.copy()
            return True
        return False

    def file_stem(self) -> str:
        stem = self.name() if callable(self.name) else self.name
        return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in stem) or "table"

    # --- the two actions ----------------------------------------------------------------

    def copy(self) -> str:
        """Put the selected rows (or all) on the clipboard as TSV; returns the text."""
        if self.table.rowCount() == 0:
            self.sigMessage.emit("Nothing to copy yet")
            return ""
        text = table_tsv(self.table, selected_only=True)
        QGuiApplication.clipboard().setText(text)
        self.sigMessage.emit(f"Copied {text.count(chr(10)) - 1} row(s)")
        return text

    def export_csv(self, path: str | os.PathLike) -> bool:
        """Write every row to ``path`` as CSV; False (and the error shown) when it cannot."""
        try:
            atomic_write_bytes(path, table_csv(self.table))
        except OSError as exc:
            self.on_error(f"Could not export {os.fspath(path)}: {exc}")
            return False
        self.sigMessage.emit(f"Exported {os.fspath(path)}")
        return True

    def export_dialog(self) -> bool:
        if self.table.rowCount() == 0:
            self.sigMessage.emit("Nothing to export yet")
            return False
        path, _ = QFileDialog.getSaveFileName(self.table, "Export CSV",
                                              f"{self.file_stem()}.csv",
                                              "CSV files (*.csv);;All files (*)")
        if not path:
            return False
        if not os.path.splitext(path)[1]:
            path += ".csv"
        return self.export_csv(path)

    def _to_status_bar(self, message: str) -> None:
        window = self.table.window()
        if isinstance(window, QMainWindow):
            window.statusBar().showMessage(message, 5000)
