"""Mouse gestures on the model canvas, one object per gesture (as orange-canvas-core does).

The scene hands mouse events to the active interaction until it finishes; the interaction
asks the editor to make the edit, so the scene itself never changes the document.
"""
from __future__ import annotations

from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QColor, QPen
from PySide6.QtWidgets import QGraphicsPathItem

from .items import BLOCK_H, PORT_R, SELECTED_COLOR, BlockItem, PortItem, edge_path

__all__ = ["ConnectInteraction"]


class ConnectInteraction:
    """Drag from a port to a port of another block to connect them.

    Starting on an output port looks for an input port (or block body) under the release
    point; starting on an input port looks for an output port.  Valid targets light up
    while the mouse is over them.
    """

    def __init__(self, scene, port: PortItem):
        self.scene = scene
        self.editor = scene.editor
        self.port = port
        self.from_output = port.is_output
        self._hovered: PortItem | None = None
        self.line = QGraphicsPathItem()
        pen = QPen(SELECTED_COLOR, 2.0, Qt.DashLine, Qt.RoundCap)
        self.line.setPen(pen)
        self.line.setZValue(10.0)
        scene.addItem(self.line)
        port.set_highlight(True)
        self.update(port.scenePos())

    def _anchor(self) -> QPointF:
        block = self.port.block
        dy = BLOCK_H / 2 + PORT_R
        return block.scenePos() + QPointF(0, dy if self.from_output else -dy)

    def _other_end(self, scene_pos: QPointF) -> str | None:
        """The block at ``scene_pos`` that would be the other end, or None."""
        for item in self.scene.items(scene_pos):
            if isinstance(item, PortItem):
                if item.is_output != self.from_output and item.block is not self.port.block:
                    return item.node_id
            elif isinstance(item, BlockItem):
                # Releasing on a block body counts as its matching port: a forgiving target.
                if item is not self.port.block:
                    return item.node_id
        return None

    def _pair(self, other: str) -> tuple[str, str]:
        mine = self.port.node_id
        return (mine, other) if self.from_output else (other, mine)

    def update(self, scene_pos: QPointF) -> None:
        start, end = self._anchor(), scene_pos
        self.line.setPath(edge_path(start, end) if self.from_output else edge_path(end, start))
        other = self._other_end(scene_pos)
        port = None
        if other is not None and self.editor.can_connect(*self._pair(other))[0]:
            block = self.scene.block_item(other)
            port = block.input_port if self.from_output else block.output_port
        if port is not self._hovered:
            if self._hovered is not None:
                self._hovered.set_highlight(False)
            if port is not None:
                port.set_highlight(True)
            self._hovered = port
        color = QColor("#16966b") if port is not None else SELECTED_COLOR
        self.line.setPen(QPen(color, 2.0, Qt.DashLine, Qt.RoundCap))

    def finish(self, scene_pos: QPointF) -> bool:
        """End the gesture; returns whether an edge was added."""
        other = self._other_end(scene_pos)
        self.cancel()
        if other is None:
            return False
        return self.editor.connect(*self._pair(other))

    def cancel(self) -> None:
        if self._hovered is not None:
            self._hovered.set_highlight(False)
        self.port.set_highlight(False)
        if self.line.scene() is not None:
            self.scene.removeItem(self.line)
