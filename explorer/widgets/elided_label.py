"""A one-line label that never widens its window: a text too long for the label's width is
elided, and the whole text is in its tooltip."""
from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QLabel, QWidget

__all__ = ["ElidedLabel"]


class ElidedLabel(QLabel):
    """A plain-text, single-line :class:`QLabel` whose minimum width is a few characters.

    ``text()`` returns the whole text; the label shows as much as fits, ending in "…", and
    then carries the whole text as its tooltip.  Style sheets that select ``QLabel`` apply.
    """

    MIN_CHARS = 12

    def __init__(self, text: str = "", parent: QWidget | None = None,
                 mode: Qt.TextElideMode = Qt.ElideMiddle):
        super().__init__(parent)
        self._full = ""
        self._mode = mode
        self.setTextFormat(Qt.PlainText)
        self.setWordWrap(False)
        self.setText(text)

    def text(self) -> str:  # noqa: D102 - the whole text, not the elided one shown
        return self._full

    def shown_text(self) -> str:
        """The text as drawn (elided when the label is narrower than the text)."""
        return super().text()

    def is_elided(self) -> bool:
        return self.shown_text() != self._full

    def setText(self, text: str) -> None:  # noqa: N802 - Qt's name
        self._full = text
        self._elide()

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        hint = super().minimumSizeHint()
        chars = self.fontMetrics().horizontalAdvance("x" * self.MIN_CHARS)
        return QSize(min(hint.width(), chars + self._chrome()), hint.height())

    def sizeHint(self) -> QSize:  # noqa: N802
        hint = super().sizeHint()
        full = self.fontMetrics().horizontalAdvance(self._full) + self._chrome()
        return QSize(max(hint.width(), full), hint.height())

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._elide()

    def _chrome(self) -> int:
        """Pixels of margins, padding and border around the text."""
        return self.width() - self.contentsRect().width() + 2 * self.margin() + 2

    def _elide(self) -> None:
        room = max(0, self.contentsRect().width() - 2 * self.margin())
        shown = self.fontMetrics().elidedText(self._full, self._mode, room) \
            if self.fontMetrics().horizontalAdvance(self._full) > room else self._full
        if shown != super().text():
            super().setText(shown)
        self.setToolTip(self._full if shown != self._full else "")
