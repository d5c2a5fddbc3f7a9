"""What both canvases' views do: wheel zoom, middle- or space-drag pan, F fits all, and
drops from their palette (a MIME type each, handed to :meth:`CanvasView.dropped`)."""
from __future__ import annotations

from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QGraphicsView

__all__ = ["CanvasView"]


class CanvasView(QGraphicsView):
    """A canvas view; subclasses set ``drop_mime`` and implement :meth:`dropped`."""

    drop_mime = ""
    max_fit_scale = 1.25  # fitting a few items does not blow them up beyond this

    def __init__(self, scene, parent=None):
        super().__init__(scene, parent)
        self.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing)
        self.setDragMode(QGraphicsView.RubberBandDrag)
        self.setTransformationAnchor(QGraphicsView.AnchorUnderMouse)
        self.setAcceptDrops(True)
        self.setFocusPolicy(Qt.StrongFocus)
        self._pan_from: QPointF | None = None
        self._space = False

    def dropped(self, text: str, pos: QPointF) -> bool:
        """Add what the palette dropped (its MIME data as text) at scene point ``pos``."""
        raise NotImplementedError

    # -- zoom and pan -----------------------------------------------------------------------

    def zoom(self, factor: float) -> None:
        current = self.transform().m11()
        factor = max(0.1 / current, min(4.0 / current, factor))  # keep items usable
        self.scale(factor, factor)

    def fit_all(self) -> None:
        rect = self.scene().itemsBoundingRect()
        if rect.isEmpty():
            self.resetTransform()
            self.centerOn(0, 0)
            return
        self.fitInView(rect.adjusted(-40, -40, 40, 40), Qt.KeepAspectRatio)
        if self.transform().m11() > self.max_fit_scale:  # a lone item should not fill it
            self.resetTransform()
            self.scale(self.max_fit_scale, self.max_fit_scale)
            self.centerOn(rect.center())

    def wheelEvent(self, event):
        delta = event.angleDelta().y()
        if delta:
            self.zoom(1.0015 ** delta)
            event.accept()
        else:
            super().wheelEvent(event)

    def mousePressEvent(self, event):
        if event.button() == Qt.MiddleButton or (self._space and
                                                 event.button() == Qt.LeftButton):
            self._pan_from = event.position()
            self.viewport().setCursor(Qt.ClosedHandCursor)
            event.accept()
            return
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event):
        if self._pan_from is not None:
            delta = event.position() - self._pan_from
            self._pan_from = event.position()
            self.horizontalScrollBar().setValue(self.horizontalScrollBar().value() - delta.x())
            self.verticalScrollBar().setValue(self.verticalScrollBar().value() - delta.y())
            event.accept()
            return
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event):
        if self._pan_from is not None:
            self._pan_from = None
            self.viewport().setCursor(Qt.OpenHandCursor if self._space else Qt.ArrowCursor)
            event.accept()
            return
        super().mouseReleaseEvent(event)

    def keyPressEvent(self, event):
        if event.key() == Qt.Key_F and not event.modifiers():
            self.fit_all()
            event.accept()
            return
        if event.key() == Qt.Key_Space and not event.isAutoRepeat():
            self._space = True
            self.viewport().setCursor(Qt.OpenHandCursor)
            event.accept()
            return
        super().keyPressEvent(event)

    def keyReleaseEvent(self, event):
        if event.key() == Qt.Key_Space and not event.isAutoRepeat():
            self._space = False
            self.viewport().unsetCursor()
            event.accept()
            return
        super().keyReleaseEvent(event)

    # -- drops from the palette -------------------------------------------------------------

    # Only the palette's entries can be dropped here; the scene's items take no drops.
    def dragEnterEvent(self, event):
        if event.mimeData().hasFormat(self.drop_mime):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event):
        if event.mimeData().hasFormat(self.drop_mime):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event):
        if not event.mimeData().hasFormat(self.drop_mime):
            event.ignore()
            return
        text = bytes(event.mimeData().data(self.drop_mime)).decode("utf-8")
        if self.dropped(text, self.mapToScene(event.position().toPoint())):
            event.acceptProposedAction()
        else:
            event.ignore()
