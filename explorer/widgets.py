"""Self-contained widgets of the main window: the error bar and the prediction progress in
the status bar."""
from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QVBoxLayout,
    QWidget,
)

__all__ = ["ErrorBar", "PredictionProgress", "read_only_table",
           "stacked"]


def read_only_table(columns: list[str], parent: QWidget | None = None) -> QTableWidget:
    """A figures table: read-only rows, first column stretched, the rest fit to content."""
    table = QTableWidget(0, len(columns), parent)
    table.setHorizontalHeaderLabels(columns)
    table.verticalHeader().setVisible(False)
    table.setEditTriggers(QAbstractItemView.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectRows)
    table.setAlternatingRowColors(True)
    table.setShowGrid(False)
    header = table.horizontalHeader()
    header.setSectionResizeMode(0, QHeaderView.Stretch)
    for c in range(1, len(columns)):
        header.setSectionResizeMode(c, QHeaderView.ResizeToContents)
    return table


def stacked(top: QWidget, main: QWidget, parent: QWidget | None = None) -> QWidget:
    """``top`` (a caption or an error bar) above ``main``, without margins."""
    pane = QWidget(parent)
    box = QVBoxLayout(pane)
    box.setContentsMargins(0, 0, 0, 0)
    box.setSpacing(0)
    box.addWidget(top)
    box.addWidget(main, 1)
    return pane


class ErrorBar(QLabel):
    """A red bar across the top of a view; clicking it emits the node id at fault."""

    sigNodeClicked = Signal(str)
    sigDismissed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("errorBar")
        self.setWordWrap(True)
        self.setTextFormat(Qt.RichText)
        self.setStyleSheet("#errorBar { background: #fdecea; color: #a4161a; border: 1px solid"
                           " #f5c2c0; border-left: 4px solid #d32f2f; padding: 5px 8px; }")
        self.node_id: str | None = None
        self.kind: str | None = None  # "prediction" (replaced by the next result) or "file"
        self.hide()

    def show_error(self, message: str, node_id: str | None = None,
                   kind: str = "prediction") -> None:
        self.node_id, self.kind = node_id, kind
        # a file error outlives predictions, so a click dismisses it
        self.setToolTip("Click to select the block at fault" if node_id
                        else "Click to dismiss" if kind == "file" else "")
        self.setCursor(Qt.PointingHandCursor if node_id or kind == "file" else Qt.ArrowCursor)
        self.setText(f"<b>⚠</b>&nbsp; {html.escape(message)}")
        self.show()

    def clear(self) -> None:
        self.node_id = self.kind = None
        self.hide()

    def mousePressEvent(self, event):
        if self.node_id:
            self.sigNodeClicked.emit(self.node_id)
        elif self.kind == "file":
            self.clear()
            self.sigDismissed.emit()
        super().mousePressEvent(event)


class PredictionProgress(QWidget):
    """The stage of the running prediction, a progress bar and a Cancel button.

    ``cancel_button.clicked`` is for the owner to connect; the bar and the button show only
    while busy.
    """

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.stage_label = QLabel("", self)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 1000)
        self.progress.setMaximumWidth(220)
        self.progress.setTextVisible(True)
        self.progress.setFormat("%p%")
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setToolTip("Cancel the running prediction")
        box = QHBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.stage_label)
        box.addWidget(self.progress)
        box.addWidget(self.cancel_button)
        self.set_busy(False)

    def set_busy(self, busy: bool) -> None:
        self.progress.setVisible(busy)
        self.cancel_button.setVisible(busy)

    def set_fraction(self, fraction: float, stage: str) -> None:
        self.progress.setValue(int(1000 * max(0.0, min(1.0, fraction))))
        self.stage_label.setText(f"Predicting: {stage}…")
