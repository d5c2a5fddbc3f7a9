"""Graphics items of the model canvas: blocks with ports, and the edges between them.

Items only draw; they never edit the document.  The scene creates, updates and removes them
when the document says so.
"""
from __future__ import annotations

import math

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontMetricsF,
    QPainter,
    QPainterPath,
    QPainterPathStroker,
    QPen,
    QPolygonF,
)
from PySide6.QtWidgets import QGraphicsItem, QGraphicsObject, QGraphicsPathItem, QStyle

from predictors.scenario.registry import BLOCK_KINDS, summarize

from ..widgets.theme_colors import canvas_colors

__all__ = ["CATEGORY_COLORS", "category_color", "PortItem", "BlockItem", "EdgeItem"]

# One hue per category; the palette uses the same ones so a block looks like its palette entry.
CATEGORY_COLORS = {
    "input": QColor("#2f6fd6"),
    "layer": QColor("#16966b"),
    "interaction": QColor("#7c4dcc"),
    "loss": QColor("#d9822b"),
}
UNKNOWN_COLOR = QColor("#6b7280")
SELECTED_COLOR = QColor("#1a73e8")
INVALID_COLOR = QColor("#d93025")

BLOCK_W, BLOCK_H, HEADER_H, RADIUS = 200.0, 64.0, 24.0, 8.0
PORT_R = 6.0


def category_color(kind: str) -> QColor:
    k = BLOCK_KINDS.get(kind)
    return QColor(CATEGORY_COLORS.get(k.category, UNKNOWN_COLOR) if k else UNKNOWN_COLOR)


class PortItem(QGraphicsObject):
    """An input (top) or output (bottom) port; a drag starting here makes a connection."""

    def __init__(self, block: "BlockItem", is_output: bool):
        super().__init__(block)
        self.block, self.is_output = block, is_output
        self._hover = False
        self._highlight = False
        self.setAcceptHoverEvents(True)
        self.setCursor(Qt.CrossCursor)
        self.setToolTip("Drag to an input port to connect" if is_output
                        else "Drag to an output port to connect")
        self.setPos(0.0, BLOCK_H / 2 if is_output else -BLOCK_H / 2)

    @property
    def node_id(self) -> str:
        return self.block.node_id

    def set_highlight(self, on: bool) -> None:
        if on != self._highlight:
            self._highlight = on
            self.update()

    def boundingRect(self) -> QRectF:
        r = PORT_R + 4  # a larger target than the dot, so it is easy to grab
        return QRectF(-r, -r, 2 * r, 2 * r)

    def shape(self) -> QPainterPath:
        path = QPainterPath()
        path.addEllipse(self.boundingRect())
        return path

    def paint(self, painter: QPainter, option, widget=None) -> None:
        color = self.block.color
        big = self._hover or self._highlight
        r = PORT_R + (2 if big else 0)
        painter.setRenderHint(QPainter.Antialiasing)
        painter.setPen(QPen(color.darker(120), 2))
        painter.setBrush(color if big else canvas_colors(widget).body)
        painter.drawEllipse(QPointF(0, 0), r, r)

    def hoverEnterEvent(self, event):
        self._hover = True
        self.update()

    def hoverLeaveEvent(self, event):
        self._hover = False
        self.update()


class BlockItem(QGraphicsObject):
    """A model block: kind label, id and parameter summary; outlined red when invalid."""

    def __init__(self, node_id: str, kind: str, params: dict):
        super().__init__()
        self.node_id = node_id
        self.kind = kind
        self.params: dict = {}
        self.issues: list[str] = []
        self.edges: list[EdgeItem] = []
        self.color = category_color(kind)
        self.setFlags(QGraphicsItem.ItemIsMovable | QGraphicsItem.ItemIsSelectable
                      | QGraphicsItem.ItemSendsGeometryChanges)
        self.setAcceptHoverEvents(True)
        self.setZValue(1.0)
        spec = BLOCK_KINDS.get(kind)
        has_input = spec is None or spec.max_inputs != 0
        has_output = spec is None or spec.has_output
        self.input_port = PortItem(self, False) if has_input else None
        self.output_port = PortItem(self, True) if has_output else None
        # Position signals, not an itemChange() override: PySide wraps every change's
        # value for Python, a child item still under construction included, which
        # crashed now and then (ItemChildAddedChange from the ports above).
        self.xChanged.connect(self._adjust_edges)
        self.yChanged.connect(self._adjust_edges)
        self.set_params(params)

    @property
    def label(self) -> str:
        spec = BLOCK_KINDS.get(self.kind)
        return spec.label if spec else f"unknown: {self.kind}"

    def set_params(self, params: dict) -> None:
        self.params = dict(params)
        self.summary = summarize(self.kind, params) if self.kind in BLOCK_KINDS else ""
        self._update_tooltip()
        self.update()

    def set_issues(self, messages: list[str]) -> None:
        if messages != self.issues:
            self.issues = list(messages)
            self._update_tooltip()
            self.update()

    def _update_tooltip(self) -> None:
        tip = f"<b>{self.label}</b> &nbsp;<i>{self.node_id}</i><br>{self.summary}"
        if self.issues:
            tip += "<br><span style='color:#d93025'>" + "<br>".join(
                m.replace("<", "&lt;") for m in self.issues) + "</span>"
        self.setToolTip(tip)

    def rect(self) -> QRectF:
        return QRectF(-BLOCK_W / 2, -BLOCK_H / 2, BLOCK_W, BLOCK_H)

    def boundingRect(self) -> QRectF:
        return self.rect().adjusted(-4, -4, 4, 4)

    def shape(self) -> QPainterPath:
        path = QPainterPath()
        path.addRoundedRect(self.rect(), RADIUS, RADIUS)
        return path

    def paint(self, painter: QPainter, option, widget=None) -> None:
        painter.setRenderHint(QPainter.Antialiasing)
        painter.setRenderHint(QPainter.TextAntialiasing)
        rect = self.rect()
        body = QPainterPath()
        body.addRoundedRect(rect, RADIUS, RADIUS)
        # A soft shadow lifts the blocks off the grid without a heavy border.
        painter.fillPath(body.translated(0, 2), QColor(0, 0, 0, 28))
        colors = canvas_colors(widget)
        painter.fillPath(body, colors.body)
        header = QPainterPath()
        header.addRect(rect.adjusted(0, 0, 0, -(BLOCK_H - HEADER_H)))
        painter.fillPath(body.intersected(header), self.color)

        selected = bool(option.state & QStyle.State_Selected)
        if self.issues:
            pen = QPen(INVALID_COLOR, 2.5)
        elif selected:
            pen = QPen(SELECTED_COLOR, 2.5)
        else:
            pen = QPen(self.color.darker(115), 1.2)
        painter.setPen(pen)
        painter.setBrush(Qt.NoBrush)
        painter.drawPath(body)
        if selected and self.issues:  # still show the selection inside the red outline
            painter.setPen(QPen(SELECTED_COLOR, 1.5, Qt.DashLine))
            painter.drawRoundedRect(rect.adjusted(3, 3, -3, -3), RADIUS - 2, RADIUS - 2)

        font = QFont(painter.font())
        font.setPointSizeF(9.0)
        font.setBold(True)
        painter.setFont(font)
        text_rect = QRectF(rect.left() + 10, rect.top(), rect.width() - 20, HEADER_H)
        painter.setPen(QColor("white"))
        painter.drawText(text_rect, Qt.AlignVCenter | Qt.AlignLeft, self.label)
        font.setBold(False)
        font.setPointSizeF(8.0)
        painter.setFont(font)
        label_w = QFontMetricsF(font).horizontalAdvance(self.label) * 1.15
        id_text = QFontMetricsF(font).elidedText(
            self.node_id, Qt.ElideMiddle, max(20.0, text_rect.width() - label_w - 16))
        painter.setPen(QColor(255, 255, 255, 210))
        painter.drawText(text_rect.adjusted(0, 0, -(14 if self.issues else 0), 0),
                         Qt.AlignVCenter | Qt.AlignRight, id_text)
        if self.issues:  # a warning mark, so invalid blocks stand out even when selected
            painter.setBrush(colors.body)
            painter.setPen(Qt.NoPen)
            centre = QPointF(rect.right() - 12, rect.top() + HEADER_H / 2)
            painter.drawEllipse(centre, 6.5, 6.5)
            painter.setPen(INVALID_COLOR)
            font.setBold(True)
            painter.setFont(font)
            painter.drawText(QRectF(centre.x() - 6.5, centre.y() - 6.5, 13, 13),
                             Qt.AlignCenter, "!")

        font.setBold(False)
        font.setPointSizeF(9.5)
        painter.setFont(font)
        body_rect = QRectF(rect.left() + 10, rect.top() + HEADER_H, rect.width() - 20,
                           BLOCK_H - HEADER_H)
        summary = QFontMetricsF(font).elidedText(self.summary, Qt.ElideRight, body_rect.width())
        painter.setPen(colors.text)
        painter.drawText(body_rect, Qt.AlignVCenter | Qt.AlignLeft, summary)

    def _adjust_edges(self) -> None:
        for edge in self.edges:
            edge.adjust()


class EdgeItem(QGraphicsPathItem):
    """A curved arrow from the source's output port to the target's input port."""

    def __init__(self, source: BlockItem, target: BlockItem):
        super().__init__()
        self.source, self.target = source, target
        self.setFlag(QGraphicsItem.ItemIsSelectable)
        self.setAcceptHoverEvents(True)
        self.setZValue(0.0)
        self._hover = False
        self._arrow = QPolygonF()
        self.setToolTip(f"{source.node_id} \u2192 {target.node_id}")
        source.edges.append(self)
        target.edges.append(self)
        self.adjust()

    @property
    def key(self) -> tuple[str, str]:
        return self.source.node_id, self.target.node_id

    def detach(self) -> None:
        for block in (self.source, self.target):
            if self in block.edges:
                block.edges.remove(self)

    def adjust(self) -> None:
        start = self.source.scenePos() + QPointF(0, BLOCK_H / 2 + PORT_R)
        end = self.target.scenePos() - QPointF(0, BLOCK_H / 2 + PORT_R + 1)
        self.prepareGeometryChange()
        self.setPath(edge_path(start, end))
        self._arrow = arrow_head(end, self.path().angleAtPercent(1.0))

    def shape(self) -> QPainterPath:
        stroker = QPainterPathStroker()
        stroker.setWidth(12)  # a thin curve is hard to click
        return stroker.createStroke(self.path())

    def boundingRect(self) -> QRectF:
        return super().boundingRect().united(self._arrow.boundingRect()).adjusted(-6, -6, 6, 6)

    def paint(self, painter: QPainter, option, widget=None) -> None:
        painter.setRenderHint(QPainter.Antialiasing)
        selected = self.isSelected()
        colors = canvas_colors(widget)
        color = SELECTED_COLOR if selected else colors.edge_hover if self._hover \
            else colors.edge
        painter.setPen(QPen(color, 3.0 if selected else 2.0, Qt.SolidLine, Qt.RoundCap))
        painter.setBrush(Qt.NoBrush)
        painter.drawPath(self.path())
        painter.setPen(Qt.NoPen)
        painter.setBrush(QBrush(color))
        painter.drawPolygon(self._arrow)

    def hoverEnterEvent(self, event):
        self._hover = True
        self.update()

    def hoverLeaveEvent(self, event):
        self._hover = False
        self.update()


def edge_path(start: QPointF, end: QPointF) -> QPainterPath:
    """A vertical S-curve, as data flows top to bottom on this canvas."""
    path = QPainterPath(start)
    dy = max(40.0, abs(end.y() - start.y()) * 0.5)
    path.cubicTo(start + QPointF(0, dy), end - QPointF(0, dy), end)
    return path


def arrow_head(tip: QPointF, angle_deg: float, size: float = 10.0) -> QPolygonF:
    # QPainterPath angles are counter-clockwise with y up; scene y points down.
    a = math.radians(angle_deg)
    direction = QPointF(math.cos(a), -math.sin(a))
    normal = QPointF(-direction.y(), direction.x())
    base = tip - direction * size
    return QPolygonF([tip + direction * 2, base + normal * (size * 0.5),
                      base - normal * (size * 0.5)])
