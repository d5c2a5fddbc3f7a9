"""A layout that lays its widgets out in a row and wraps them onto more rows when the row
is too narrow, so a row of figures never sets a minimum width wider than its widest item."""
from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtWidgets import QLayout, QWidget

__all__ = ["FlowLayout"]


class FlowLayout(QLayout):
    """Items left to right at their size hints, wrapped to the next row when out of room."""

    def __init__(self, parent: QWidget | None = None, spacing: int = 8):
        super().__init__(parent)
        self._items: list = []
        self._spacing = spacing
        self._height = 0  # the height the items took at the last placement
        self.setContentsMargins(0, 0, 0, 0)

    def addItem(self, item) -> None:  # noqa: N802 - Qt's names
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int):  # noqa: N802
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int):  # noqa: N802
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self):  # noqa: N802
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:  # noqa: N802
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802
        return self._arrange(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:  # noqa: N802
        super().setGeometry(rect)
        height = self._arrange(rect, move=True)
        if height != self._height:
            # The minimum height follows the width: tell the parent layout, whose own
            # parents (a dock) may not ask for heights per width.
            self._height = height
            layout = self
            while isinstance(layout, QLayout):   # the layouts above cache our size
                layout.invalidate()
                layout = layout.parent()
            if self.parentWidget() is not None:
                self.parentWidget().updateGeometry()

    def sizeHint(self) -> QSize:  # noqa: N802
        """One row of all the items."""
        shown = self._shown()
        m = self.contentsMargins()
        width = sum(i.sizeHint().width() for i in shown) + self._spacing * max(0, len(shown) - 1)
        height = max((i.sizeHint().height() for i in shown), default=0)
        return QSize(width + m.left() + m.right(), height + m.top() + m.bottom())

    def minimumSize(self) -> QSize:  # noqa: N802
        """The widest item (the others wrap), as tall as the rows at the last placement."""
        size = QSize()
        for item in self._shown():
            size = size.expandedTo(item.minimumSize())
        m = self.contentsMargins()
        size += QSize(m.left() + m.right(), m.top() + m.bottom())
        return size.expandedTo(QSize(0, self._height))

    def _shown(self) -> list:
        return [i for i in self._items if not (i.widget() is not None and i.widget().isHidden())]

    def _arrange(self, rect: QRect, move: bool) -> int:
        """Place (or only measure) the items in ``rect``; returns the height they take."""
        m = self.contentsMargins()
        area = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom())
        x, y, row_h = area.x(), area.y(), 0
        for item in self._shown():
            hint = item.sizeHint()
            hint.setWidth(max(item.minimumSize().width(), min(hint.width(), area.width())))
            if x > area.x() and x + hint.width() > area.right() + 1:
                x, y, row_h = area.x(), y + row_h + self._spacing, 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), hint))
            x += hint.width() + self._spacing
            row_h = max(row_h, hint.height())
        return y + row_h - rect.y() + m.bottom()
