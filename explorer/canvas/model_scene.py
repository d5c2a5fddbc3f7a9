"""The model canvas: a scene that mirrors the document, and the view that shows it.

The scene only follows document signals; user gestures (drop, connect, move, delete) go
through the :class:`~explorer.document.editor.DocumentEditor`, which pushes undo commands.
"""
from __future__ import annotations

import shiboken6
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QPainter, QPen
from PySide6.QtWidgets import QGraphicsScene, QGraphicsView

from ..document.editor import DocumentEditor
from ..widgets.theme_colors import canvas_colors
from .interactions import ConnectInteraction
from .items import BlockItem, EdgeItem, PortItem
from .view import CanvasView

__all__ = ["ModelScene", "ModelView", "BLOCK_MIME_TYPE"]

BLOCK_MIME_TYPE = "application/x-ml-dse-block-kind"
GRID = 20.0
SCENE_MARGIN = 1500.0  # room to pan and drop around the blocks


class ModelScene(QGraphicsScene):
    """Blocks and edges of the scenario's model graph.

    Signals
    -------
    sigSelectionChangedIds(list)
        The ids of the selected blocks, after every selection change.
    """

    sigSelectionChangedIds = Signal(list)

    def __init__(self, editor: DocumentEditor, parent=None):
        super().__init__(parent)
        self.editor = editor
        self.document = editor.document
        self._blocks: dict[str, BlockItem] = {}
        self._edges: dict[tuple[str, str], EdgeItem] = {}
        self._prediction_issues: list = []  # blamed by the last failed prediction
        self._interaction: ConnectInteraction | None = None
        doc = self.document
        doc.sigNodeAdded.connect(self._on_node_added)
        doc.sigNodeRemoved.connect(self._on_node_removed)
        doc.sigNodeChanged.connect(self._on_node_changed)
        doc.sigNodeMoved.connect(self._on_node_moved)
        doc.sigEdgeAdded.connect(self._on_edge_added)
        doc.sigEdgeRemoved.connect(self._on_edge_removed)
        doc.sigReset.connect(self._rebuild)
        doc.sigChanged.connect(self._refresh_issues)
        self.selectionChanged.connect(self._emit_selection)
        self._rebuild()

    # -- lookups ----------------------------------------------------------------------------

    def block_item(self, node_id: str) -> BlockItem | None:
        return self._blocks.get(node_id)

    def edge_item(self, source: str, target: str) -> EdgeItem | None:
        return self._edges.get((source, target))

    def block_items(self) -> list[BlockItem]:
        return list(self._blocks.values())

    def edge_items(self) -> list[EdgeItem]:
        return list(self._edges.values())

    def selected_node_ids(self) -> list[str]:
        # Ask Qt, not our dict: while the scene is destroyed, items in the dict may be gone.
        chosen = {i.node_id for i in self.selectedItems() if isinstance(i, BlockItem)}
        # Document order, so the result is stable whatever order the user clicked in.
        return [i for i in self.document.node_ids() if i in chosen]

    def selected_edges(self) -> list[tuple[str, str]]:
        return [i.key for i in self.selectedItems() if isinstance(i, EdgeItem)]

    def _emit_selection(self) -> None:
        # ~QGraphicsScene clears the selection after Python has let go of this wrapper.
        if shiboken6.isValid(self):
            self.sigSelectionChangedIds.emit(self.selected_node_ids())

    def select_nodes(self, ids: list[str]) -> None:
        wanted = set(ids)
        self.blockSignals(True)  # one selection signal, not one per item
        try:
            self.clearSelection()
            for node_id, item in self._blocks.items():
                item.setSelected(node_id in wanted)
        finally:
            self.blockSignals(False)
        self.selectionChanged.emit()

    def select_all(self) -> None:
        self.select_nodes(list(self._blocks))

    def delete_selected(self) -> None:
        self.editor.delete(self.selected_node_ids(), self.selected_edges())

    # -- following the document -------------------------------------------------------------

    def _rebuild(self) -> None:
        self._cancel_interaction()
        for edge in list(self._edges.values()):
            edge.detach()
        self._edges.clear()
        self._blocks.clear()
        self.clear()
        for node_id in self.document.node_ids():
            self._on_node_added(node_id)
        for s, t in self.document.edges():
            self._on_edge_added(s, t)
        self._refresh_issues()
        self.selectionChanged.emit()

    def _on_node_added(self, node_id: str) -> None:
        record = self.document.node(node_id)
        item = BlockItem(node_id, record["kind"], record["params"])
        item.setPos(QPointF(*self.document.position(node_id)))
        self._blocks[node_id] = item
        self.addItem(item)
        self._grow_rect()

    def _on_node_removed(self, node_id: str) -> None:
        item = self._blocks.pop(node_id, None)
        if item is None:
            return
        for key in [k for k in self._edges if node_id in k]:
            self._on_edge_removed(*key)
        if self._interaction is not None and self._interaction.port.block is item:
            self._cancel_interaction()
        self.removeItem(item)

    def _on_node_changed(self, node_id: str) -> None:
        item = self._blocks.get(node_id)
        if item is not None:
            item.set_params(self.document.node(node_id)["params"])

    def _on_node_moved(self, node_id: str) -> None:
        item = self._blocks.get(node_id)
        if item is not None:
            item.setPos(QPointF(*self.document.position(node_id)))
            self._grow_rect()

    def _on_edge_added(self, source: str, target: str) -> None:
        if (source, target) in self._edges:
            return
        edge = EdgeItem(self._blocks[source], self._blocks[target])
        self._edges[(source, target)] = edge
        self.addItem(edge)

    def _on_edge_removed(self, source: str, target: str) -> None:
        edge = self._edges.pop((source, target), None)
        if edge is not None:
            edge.detach()
            self.removeItem(edge)

    def _refresh_issues(self) -> None:
        self._prediction_issues = []  # an edit makes the last prediction's verdict stale
        self._show_issues()

    def set_prediction_issues(self, issues) -> None:
        """Outline the blocks a failed prediction blamed (memory, sizes torch cannot hold:
        what validating the document alone cannot tell), until the next edit."""
        self._prediction_issues = [i for i in issues if i.node_id is not None]
        self._show_issues()

    def _show_issues(self) -> None:
        by_node: dict[str, list[str]] = {}
        for issue in list(self.document.issues()) + self._prediction_issues:
            if issue.node_id is not None:
                by_node.setdefault(issue.node_id, []).append(str(issue))
        for node_id, item in self._blocks.items():
            item.set_issues(by_node.get(node_id, []))

    def _grow_rect(self) -> None:
        # The scene rect only grows, so panning room never jumps away under the user.
        bounds = self.itemsBoundingRect().adjusted(-SCENE_MARGIN, -SCENE_MARGIN,
                                                   SCENE_MARGIN, SCENE_MARGIN)
        self.setSceneRect(self.sceneRect().united(bounds))

    # -- gestures ---------------------------------------------------------------------------

    def _cancel_interaction(self) -> None:
        if self._interaction is not None:
            self._interaction.cancel()
            self._interaction = None

    def mousePressEvent(self, event):
        if event.button() == Qt.LeftButton:
            port = next((i for i in self.items(event.scenePos()) if isinstance(i, PortItem)),
                        None)
            if port is not None:
                self._interaction = ConnectInteraction(self, port)
                event.accept()
                return
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event):
        if self._interaction is not None:
            self._interaction.update(event.scenePos())
            event.accept()
            return
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event):
        if self._interaction is not None and event.button() == Qt.LeftButton:
            interaction, self._interaction = self._interaction, None
            interaction.finish(event.scenePos())
            event.accept()
            return
        super().mouseReleaseEvent(event)
        if event.button() == Qt.LeftButton:
            self._commit_moves()

    def _commit_moves(self) -> None:
        """Blocks dragged by Qt moved only on screen; make that one undoable move."""
        ids, positions = [], []
        for node_id, item in self._blocks.items():
            # Whole units keep the saved layout tidy; the item snaps to match via sigNodeMoved.
            pos = (float(round(item.pos().x())), float(round(item.pos().y())))
            if (item.pos().x(), item.pos().y()) != self.document.position(node_id):
                ids.append(node_id)
                positions.append(pos)
        if ids and not self.editor.move(ids, positions):
            for node_id in ids:  # a sub-unit wiggle: put the item back where the document says
                self._on_node_moved(node_id)

    def keyPressEvent(self, event):
        if event.key() in (Qt.Key_Delete, Qt.Key_Backspace) and self.selectedItems():
            self.delete_selected()
            event.accept()
            return
        if event.key() == Qt.Key_Escape and self._interaction is not None:
            self._cancel_interaction()
            event.accept()
            return
        super().keyPressEvent(event)


class ModelView(CanvasView):
    """The model canvas widget: a grid, block drops from the palette (zoom, pan and fit
    from :class:`~explorer.canvas.view.CanvasView`)."""

    drop_mime = BLOCK_MIME_TYPE

    def __init__(self, scene: ModelScene, parent=None):
        super().__init__(scene, parent)
        self.setViewportUpdateMode(QGraphicsView.BoundingRectViewportUpdate)
        # Panning is by middle- or space-drag, as in node editors; scroll bars only add clutter.
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setFrameShape(QGraphicsView.NoFrame)

    def model_scene(self) -> ModelScene:
        return self.scene()

    def view_center(self) -> QPointF:
        """The scene point at the centre of the viewport: where double-clicked blocks go."""
        return self.mapToScene(self.viewport().rect().center())

    def dropped(self, text: str, pos: QPointF) -> bool:
        return self.scene().editor.add_block(text, (pos.x(), pos.y())) is not None

    def drawBackground(self, painter: QPainter, rect: QRectF) -> None:
        colors = canvas_colors(self)
        painter.fillRect(rect, colors.background)
        if self.transform().m11() < 0.35:  # a dense grid at low zoom is only noise
            return
        left, top = int(rect.left() // GRID) * GRID, int(rect.top() // GRID) * GRID
        minor, major = [], []
        x = left
        while x < rect.right():
            (major if round(x / GRID) % 5 == 0 else minor).append(
                (QPointF(x, rect.top()), QPointF(x, rect.bottom())))
            x += GRID
        y = top
        while y < rect.bottom():
            (major if round(y / GRID) % 5 == 0 else minor).append(
                (QPointF(rect.left(), y), QPointF(rect.right(), y)))
            y += GRID
        for color, lines in ((colors.grid_minor, minor), (colors.grid_major, major)):
            painter.setPen(QPen(color, 0))
            for a, b in lines:
                painter.drawLine(a, b)
