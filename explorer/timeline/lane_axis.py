"""The left column of the Gantt: the name of every visible row, in up to three columns.

``node K`` (written upwards beside its ranks, when the ranks are grouped per node),
``▾ rank N`` at the top of an expanded rank's group (it stays in view while the group is
scrolled through) or ``▸ rank N`` on a folded rank's single row (``links`` for the
physical links' group after the ranks), and each lane's name
(elided when long; the full name is in the row's tooltip).  Only the rows in view are
painted, so the column stays cheap however many ranks there are.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPen

from predictors.engine.timeline import LINKS_RANK, group_name

__all__ = ["LaneAxis", "AxisRows", "axis_rows"]

NODE_COL = 18       # px: the rotated "node K" column
PAD = 6             # px between columns and at the edges
MAX_LANE_COL = 190  # px: longer lane names are elided


@dataclass
class AxisRows:
    """What the column shows: rows, rank groups and node groups, in view coordinates
    (row centres, group tops and bottoms)."""

    rows: list[tuple[float, str]] = field(default_factory=list)   # (centre, lane name)
    ranks: list[tuple[int, float, float, bool]] = field(default_factory=list)
    # (rank, top, bottom, folded)
    nodes: list[tuple[int, float, float]] = field(default_factory=list)  # (node, top, bottom)

    @property
    def multi(self) -> bool:
        return len(self.ranks) > 1


def axis_rows(lay, collapsed=frozenset(), nodes=()) -> AxisRows:
    """The names of the column for a :class:`~explorer.timeline.layout.LaneLayout`: each
    lane's (a folded rank's row has none: its ``rank N`` names it), each rank's group,
    folded when in ``collapsed``, and ``nodes`` (``(node, top, bottom)``)."""
    multi = len(lay.groups) > 1
    rows = []
    for lane, label in zip(lay.order, lay.labels):
        if label.endswith("(collapsed)"):
            name = "" if multi else "streams"
        else:
            name = label.split(" · ", 1)[-1] if multi else label
        rows.append((float(lay.y[lane]), name))
    ranks = [(rank, top, bottom, rank in collapsed) for rank, top, bottom in lay.groups]
    return AxisRows(rows, ranks, list(nodes))


class LaneAxis(pg.AxisItem):
    """A left axis that names rows instead of drawing numeric ticks."""

    def __init__(self, **kwargs):
        super().__init__("left", **kwargs)
        self.rows = AxisRows()
        self._rank_w = 0
        self._lane_w = 0
        self.natural_width = 60   # px the names need
        self.min_width = 0        # px: a floor shared with other views read against this one

    # --- content ------------------------------------------------------------------------

    def set_rows(self, rows: AxisRows) -> None:
        """Show ``rows`` and size the column to fit them."""
        self.rows = rows
        fm = QFontMetrics(self._font())
        bold = QFontMetrics(self._font(bold=True))
        if rows.multi:
            self._rank_w = max(bold.horizontalAdvance(f"▾ {group_name(r)}")
                               for r, *_ in rows.ranks)
        else:
            self._rank_w = 0
        names = [t for _, t in rows.rows if t]
        widest = max((fm.horizontalAdvance(t) for t in names), default=0)
        self._lane_w = min(MAX_LANE_COL, widest)
        width = PAD + self._lane_w + PAD
        if self._rank_w:
            width += self._rank_w + PAD
        if rows.nodes:
            width += NODE_COL
        self.natural_width = max(60, int(width))
        self.setWidth(max(self.natural_width, self.min_width))
        # the same names as pyqtgraph tick levels (ranks, then lanes, the links' among
        # them), for readers of the axis's ticks; the painting above does not use them
        if rows.multi:
            self.setTicks([[((top + bottom) / 2, group_name(r))
                            for r, top, bottom, _ in rows.ranks if r != LINKS_RANK],
                           [(y, t or "streams") for y, t in rows.rows]])
        else:
            self.setTicks([list(rows.rows), []])
        self.picture = None
        self.update()

    def set_min_width(self, px: int) -> None:
        """Make the column at least ``px`` wide (the extra goes to the lane names), so
        that stacked views with a linked time axis start their plots at the same x."""
        self.min_width = int(px)
        self.setWidth(max(self.natural_width, self.min_width))

    def column_x(self) -> tuple[float, float, float]:
        """Left edges of the node, rank and lane columns (pixels in the axis)."""
        x_node = 0.0
        x_rank = float(NODE_COL if self.rows.nodes else 0) + PAD
        x_lane = x_rank + (self._rank_w + PAD if self._rank_w else 0)
        return x_node, x_rank, x_lane

    def _font(self, bold: bool = False) -> QFont:
        font = QFont(self.style["tickFont"]) if self.style["tickFont"] else QFont()
        font.setBold(bold)
        return font

    def _y_px(self, y: float) -> float:
        """Axis pixel of view coordinate ``y``."""
        view = self.linkedView()
        return self.mapFromScene(view.mapViewToScene(QPointF(0.0, y))).y()

    def visible_texts(self) -> list[tuple[str, str, str, QRectF]]:
        """``(kind, name, shown text, rect)`` of every name in view (kind ``node``, ``rank``
        or ``lane``; the shown text is elided when the name is too long)."""
        _, _, specs = self.generateDrawSpecs(None)
        return [(kind, full, label, rect) for kind, rect, _, label, _, _, full in specs]

    def text_at(self, pos: QPointF) -> tuple[str, object] | None:
        """``("rank", N)`` (``LINKS_RANK`` for the links) or ``("lane", name)`` for a
        point of the axis, else None."""
        for kind, text, _, rect in self.visible_texts():
            if kind != "node" and rect.adjusted(-2, -2, 2, 2).contains(pos):
                if kind == "rank":
                    return kind, LINKS_RANK if text == "links" else int(text.split()[-1])
                return kind, text
        return None

    # --- painting -----------------------------------------------------------------------

    def generateDrawSpecs(self, p):
        """Texts of the rows in view: ``(kind, rect, flags, text, font, colour)``."""
        view = self.linkedView()
        bounds = self.mapRectFromParent(self.geometry())
        axis = (pg.mkPen("#bbb"), QPointF(bounds.right(), bounds.top()),
                QPointF(bounds.right(), bounds.bottom()))
        if view is None or not self.rows.rows:
            return axis, [], []
        (_, _), (v0, v1) = view.viewRange()
        top_px, bottom_px = bounds.top(), bounds.bottom()
        normal, bold = self._font(), self._font(bold=True)
        fm = QFontMetrics(normal)
        line_h = fm.height()
        x_node, x_rank, x_lane = self.column_x()
        lane_w = max(10.0, bounds.right() - PAD - x_lane)
        # the axis's text colour (the theme's), the lanes a little fainter than the ranks
        text = QColor(self.textPen().color())
        muted = QColor(text)
        muted.setAlphaF(0.8)
        specs = []
        visible = lambda a, b: b >= v0 and a <= v1
        for y, name in self.rows.rows:
            if not name or not v0 - 0.5 <= y <= v1 + 0.5:
                continue
            cy = self._y_px(y)
            rect = QRectF(x_lane, cy - line_h / 2, lane_w, line_h)
            elided = fm.elidedText(name, Qt.ElideRight, int(lane_w))
            specs.append(("lane", rect, Qt.AlignLeft | Qt.AlignVCenter, elided, normal,
                          muted if self.rows.multi else text, name))
        for rank, top, bottom, folded in self.rows.ranks if self.rows.multi else []:
            if not visible(top, bottom):
                continue
            # the label sits in the group's first row, or in its first row in view
            row_top = max(top, v0)
            cy = self._y_px(min(row_top + 0.5, bottom - 0.5) if not folded else top + 0.5)
            # kept in view, but pushed out with the last of its group (never over the next)
            cy = min(max(cy, top_px + line_h / 2), bottom_px - line_h / 2,
                     self._y_px(bottom) - line_h / 2)
            label = f"{'▸' if folded else '▾'} {group_name(rank)}"
            rect = QRectF(x_rank, cy - line_h / 2, self._rank_w + 2, line_h)
            specs.append(("rank", rect, Qt.AlignLeft | Qt.AlignVCenter, label, bold, text,
                          group_name(rank)))
        for node, top, bottom in self.rows.nodes:
            if not visible(top, bottom):
                continue
            a = max(self._y_px(top), top_px)
            b = min(self._y_px(bottom), bottom_px)
            specs.append(("node", QRectF(x_node, a, NODE_COL, b - a), Qt.AlignCenter,
                          f"node {node}", bold, text, f"node {node}"))
        return axis, [], specs

    def drawPicture(self, p, axisSpec, tickSpecs, textSpecs):
        p.setRenderHint(p.RenderHint.Antialiasing, False)
        p.setRenderHint(p.RenderHint.TextAntialiasing, True)
        pen, p1, p2 = axisSpec
        p.setPen(pen)
        p.drawLine(p1, p2)
        p.setClipRect(self.boundingRect().toAlignedRect())
        for kind, rect, flags, label, font, colour, full in textSpecs:
            p.setFont(font)
            if kind == "node":
                # a bracket along the node's ranks, its name written upwards beside it
                p.setPen(QPen(QColor("#999"), 1))
                x = rect.right() - 3
                p.drawLine(QPointF(x, rect.top() + 2), QPointF(x, rect.bottom() - 2))
                p.setPen(colour)
                p.save()
                p.translate(rect.center())
                p.rotate(-90)
                p.drawText(QRectF(-rect.height() / 2, -rect.width() / 2, rect.height(),
                                  rect.width()), int(flags), label)
                p.restore()
            else:
                p.setPen(colour)
                p.drawText(rect, int(flags), label)

    # --- mouse --------------------------------------------------------------------------

    def hoverEvent(self, event):
        hit = None if event.isExit() else self.text_at(event.pos())
        if hit is None:
            self.setToolTip("")
        elif hit[0] == "rank":
            self.setToolTip(f"{group_name(hit[1])}: click to fold or unfold")
        else:
            self.setToolTip(hit[1])

    def mouseClickEvent(self, event):
        hit = self.text_at(event.pos())
        if hit is not None and hit[0] == "rank" and event.button() == Qt.LeftButton \
                and self.on_rank_clicked is not None:
            event.accept()
            self.on_rank_clicked(hit[1])
            return
        super().mouseClickEvent(event)

    on_rank_clicked = None  # callable(rank): a click on a rank's name folds or unfolds it
