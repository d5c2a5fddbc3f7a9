"""The red bar across the top of a view that names what went wrong."""
from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QWidget

__all__ = ["ErrorBar"]

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
        self.setToolTip("Click to select what is at fault" if node_id
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
