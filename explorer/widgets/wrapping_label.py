"""A word-wrapped label whose minimum height is the height of its text at its width, so a
dock that lays it out (docks do not ask for heights per width) grows rather than draws the
next widget over its last lines."""
from __future__ import annotations

from PySide6.QtCore import QSize
from PySide6.QtWidgets import QLabel, QWidget

__all__ = ["WrappingLabel"]


class WrappingLabel(QLabel):
    """A :class:`QLabel` with word wrap on and an honest minimum height."""

    def __init__(self, text: str = "", parent: QWidget | None = None):
        super().__init__(text, parent)
        self.setWordWrap(True)
        self._width = 0

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        hint = super().minimumSizeHint()
        if self._width > 0:
            hint.setHeight(max(hint.height(), self.heightForWidth(self._width)))
        return hint

    def setText(self, text: str) -> None:  # noqa: N802
        super().setText(text)
        self.updateGeometry()

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        if event.size().width() != self._width:
            self._width = event.size().width()
            self.updateGeometry()
