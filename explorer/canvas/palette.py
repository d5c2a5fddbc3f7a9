"""The block palette: every block kind of the registry, grouped by category, searchable.

Dragging an entry carries its kind name under :data:`BLOCK_MIME_TYPE` to the canvas;
double-clicking asks (``sigAddRequested``) for one at the centre of the view.
"""
from __future__ import annotations

from PySide6.QtCore import QMimeData, QSize, Qt, Signal
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLineEdit,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from predictors.scenario.registry import BLOCK_KINDS

from .items import CATEGORY_COLORS, UNKNOWN_COLOR
from .model_scene import BLOCK_MIME_TYPE

__all__ = ["BlockPalette", "BLOCK_MIME_TYPE", "CATEGORY_TITLES"]

CATEGORY_TITLES = {"input": "Inputs", "layer": "Layers", "interaction": "Interaction",
                   "loss": "Loss"}
KIND_ROLE = Qt.UserRole + 1


def _swatch(color: QColor, size: int = 14) -> QIcon:
    pixmap = QPixmap(size, size)
    pixmap.fill(Qt.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.Antialiasing)
    painter.setPen(color.darker(120))
    painter.setBrush(color)
    painter.drawRoundedRect(1, 1, size - 2, size - 2, 3, 3)
    painter.end()
    return QIcon(pixmap)


class _KindTree(QTreeWidget):
    """A tree whose drags carry the block kind in our MIME type."""

    sigEnterPressed = Signal(object)

    def keyPressEvent(self, event):
        # Not itemActivated: some styles activate on a single click, which would add blocks.
        if event.key() in (Qt.Key_Return, Qt.Key_Enter) and self.currentItem() is not None:
            self.sigEnterPressed.emit(self.currentItem())
            event.accept()
            return
        super().keyPressEvent(event)

    def mimeTypes(self):
        return [BLOCK_MIME_TYPE]

    def mimeData(self, items):
        kinds = [i.data(0, KIND_ROLE) for i in items if i.data(0, KIND_ROLE)]
        data = QMimeData()
        if kinds:
            data.setData(BLOCK_MIME_TYPE, kinds[0].encode("utf-8"))
            data.setText(kinds[0])
        return data

    def supportedDropActions(self):
        return Qt.CopyAction


class BlockPalette(QWidget):
    """A search field over the block kinds, grouped by category.

    Signals
    -------
    sigAddRequested(str)
        A kind was double-clicked (or Enter pressed on it): add one at the view centre.
    """

    sigAddRequested = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Search blocks")
        self.search.setClearButtonEnabled(True)
        self.tree = _KindTree(self)
        self.tree.setHeaderHidden(True)
        self.tree.setRootIsDecorated(False)
        self.tree.setIndentation(8)
        self.tree.setIconSize(QSize(14, 14))
        self.tree.setDragEnabled(True)
        self.tree.setDragDropMode(QAbstractItemView.DragOnly)
        self.tree.setDefaultDropAction(Qt.CopyAction)
        self.tree.setSelectionMode(QAbstractItemView.SingleSelection)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.search)
        layout.addWidget(self.tree)
        self._groups: dict[str, QTreeWidgetItem] = {}
        self._populate()
        self.search.textChanged.connect(self.set_filter)
        self.tree.itemDoubleClicked.connect(self._on_activated)
        self.tree.sigEnterPressed.connect(lambda item: self._on_activated(item, 0))

    def _populate(self) -> None:
        order = list(CATEGORY_TITLES)
        kinds = sorted(BLOCK_KINDS.values(), key=lambda k: (
            order.index(k.category) if k.category in order else len(order), k.label))
        for kind in kinds:
            group = self._groups.get(kind.category)
            if group is None:
                group = QTreeWidgetItem(self.tree, [CATEGORY_TITLES.get(
                    kind.category, kind.category.title())])
                group.setFlags(Qt.ItemIsEnabled)  # a heading: neither selectable nor dragged
                font = group.font(0)
                font.setBold(True)
                group.setFont(0, font)
                group.setExpanded(True)
                self._groups[kind.category] = group
            item = QTreeWidgetItem(group, [kind.label])
            item.setData(0, KIND_ROLE, kind.name)
            item.setToolTip(0, f"<b>{kind.label}</b> <i>({kind.name})</i><br>{kind.doc}")
            item.setIcon(0, _swatch(CATEGORY_COLORS.get(kind.category, UNKNOWN_COLOR)))
            item.setFlags(Qt.ItemIsEnabled | Qt.ItemIsSelectable | Qt.ItemIsDragEnabled)
        self.tree.expandAll()

    def kind_items(self) -> list[QTreeWidgetItem]:
        return [g.child(i) for g in self._groups.values() for i in range(g.childCount())]

    def item_for(self, kind: str) -> QTreeWidgetItem | None:
        return next((i for i in self.kind_items() if i.data(0, KIND_ROLE) == kind), None)

    def visible_kinds(self) -> list[str]:
        return [i.data(0, KIND_ROLE) for i in self.kind_items()
                if not i.isHidden() and not i.parent().isHidden()]

    def mime_data(self, kind: str) -> QMimeData:
        """What a drag of ``kind`` carries (also handy for tests)."""
        return self.tree.mimeData([self.item_for(kind)])

    def set_filter(self, text: str) -> None:
        """Show only kinds whose label, name or category contains every word of ``text``."""
        words = text.lower().split()
        for group in self._groups.values():
            shown = 0
            for i in range(group.childCount()):
                item = group.child(i)
                kind = BLOCK_KINDS[item.data(0, KIND_ROLE)]
                # Not the description: "transformer" would also find the token input.
                hay = f"{kind.label} {kind.name} {kind.category}".lower()
                match = all(w in hay for w in words)
                item.setHidden(not match)
                shown += match
            group.setHidden(shown == 0)

    def _on_activated(self, item: QTreeWidgetItem, column: int) -> None:
        kind = item.data(0, KIND_ROLE)
        if kind:
            self.sigAddRequested.emit(kind)
