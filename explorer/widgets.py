"""Self-contained widgets of the main window: the error bar, the Platform tab and the
prediction progress in the status bar."""
from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QFormLayout, QHBoxLayout,
                               QHeaderView, QLabel, QProgressBar, QPushButton, QTableWidget,
                               QVBoxLayout, QWidget)

from predictors.devices.platforms import PLATFORM_PRESETS

from .document.editor import DocumentEditor

__all__ = ["ErrorBar", "PlatformPage", "PredictionProgress", "read_only_table",
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


class PlatformPage(QWidget):
    """The Platform tab, for now a preset chooser; a choice is one undoable edit."""

    CUSTOM = "(custom platform graph)"

    def __init__(self, editor: DocumentEditor, parent: QWidget | None = None):
        super().__init__(parent)
        self.editor = editor
        self.combo = QComboBox(self)
        for name, p in PLATFORM_PRESETS.items():
            self.combo.addItem(name, name)
            self.combo.setItemData(self.combo.count() - 1, p.description, Qt.ToolTipRole)
        self.description = QLabel(self)
        self.description.setWordWrap(True)
        self.description.setStyleSheet("color: #445;")
        form = QFormLayout()
        form.addRow("Preset", self.combo)
        form.addRow("", self.description)
        box = QVBoxLayout(self)
        box.setContentsMargins(16, 16, 16, 16)
        box.addLayout(form)
        box.addStretch(1)
        self.combo.currentIndexChanged.connect(self._on_chosen)
        doc = editor.document
        doc.sigPlatformChanged.connect(self.refresh)
        doc.sigReset.connect(self.refresh)
        self.refresh()

    def refresh(self) -> None:
        platform = self.editor.document.platform()
        preset = platform.get("preset") if isinstance(platform, dict) else None
        self.combo.blockSignals(True)
        custom = self.combo.findData(self.CUSTOM)
        if preset in PLATFORM_PRESETS:
            if custom >= 0:
                self.combo.removeItem(custom)
            self.combo.setCurrentIndex(self.combo.findData(preset))
            p = PLATFORM_PRESETS[preset]
            self.description.setText(f"{p.description}\n{p.ranks} rank(s) · device: {p.device}")
        else:
            if custom < 0:
                self.combo.addItem(self.CUSTOM, self.CUSTOM)
            self.combo.setCurrentIndex(self.combo.findData(self.CUSTOM))
            nodes = platform.get("nodes", []) if isinstance(platform, dict) else []
            self.description.setText(f"A custom platform graph of {len(nodes)} nodes.")
        self.combo.blockSignals(False)

    def _on_chosen(self, index: int) -> None:
        name = self.combo.itemData(index)
        if name in PLATFORM_PRESETS:
            current = self.editor.document.platform()
            platform = {"preset": name}
            if name == "local-cpu" and "threads" in current:
                platform["threads"] = current["threads"]
            self.editor.set_platform(platform)


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
