"""Where the platform canvas draws its links and their labels, so that no device box hides
a link and none covers a label.

A link is a straight line between its devices' centres while that line passes no other
device; otherwise it bows out (a quadratic curve whose control point sits ``bend`` pixels
off the line's middle, on the side away from the drawing's centre) just far enough to clear
them, and further for each further device it would cross, so that parallel detours keep
apart; where no curve clears them all (a row of devices between its ends), it crosses as
few as it can.  Labels go at the first spot along their link that neither a device nor an earlier
label covers; a link without such a spot has none (its tooltip still names it).
"""
from __future__ import annotations

import math

from PySide6.QtCore import QPointF, QRectF
from PySide6.QtGui import QPainterPath

__all__ = ["curve_point", "link_path", "route_bend", "label_box", "place_labels",
           "LABEL_W", "LABEL_H"]

LABEL_W, LABEL_H = 124.0, 16.0
CLEARANCE = 8.0            # px a link keeps from the boxes it passes
_SAMPLES = 32
_LABEL_SPOTS = (0.5, 0.3, 0.7, 0.4, 0.6, 0.2, 0.8)


def _normal(p1: QPointF, p2: QPointF) -> QPointF:
    dx, dy = p2.x() - p1.x(), p2.y() - p1.y()
    length = math.hypot(dx, dy) or 1.0
    return QPointF(-dy / length, dx / length)


def _control(p1: QPointF, p2: QPointF, bend: float) -> QPointF:
    mid = (p1 + p2) * 0.5
    return mid + _normal(p1, p2) * bend


def curve_point(p1: QPointF, p2: QPointF, bend: float, t: float) -> QPointF:
    """The point at ``t`` (0..1) along the link from ``p1`` to ``p2`` bent by ``bend``."""
    c = _control(p1, p2, bend)
    u = 1.0 - t
    return p1 * (u * u) + c * (2 * u * t) + p2 * (t * t)


def link_path(p1: QPointF, p2: QPointF, bend: float) -> QPainterPath:
    path = QPainterPath(p1)
    if bend:
        path.quadTo(_control(p1, p2, bend), p2)
    else:
        path.lineTo(p2)
    return path


def _crossed(p1: QPointF, p2: QPointF, bend: float, boxes: list[QRectF]) -> list[int]:
    """Indices of ``boxes`` the link passes through (its ends' boxes excluded by the
    caller)."""
    grown = [b.adjusted(-CLEARANCE, -CLEARANCE, CLEARANCE, CLEARANCE) for b in boxes]
    hit = set()
    for k in range(1, _SAMPLES):
        p = curve_point(p1, p2, bend, k / _SAMPLES)
        for i, b in enumerate(grown):
            if i not in hit and b.contains(p):
                hit.add(i)
    return sorted(hit)


def route_bend(p1: QPointF, p2: QPointF, boxes: list[QRectF],
               centre: QPointF | None = None, step: float = 12.0,
               most: float = 600.0) -> float:
    """The bend of a link from ``p1`` to ``p2`` that clears ``boxes`` (the other devices):
    0 when the straight line does; else the smallest that does, on the side away from
    ``centre`` first, plus a margin per extra device the straight line crossed; where none
    does (a row of devices between the ends), the smallest that crosses the fewest."""
    crossed = _crossed(p1, p2, 0.0, boxes)
    if not crossed:
        return 0.0
    side = 1.0
    if centre is not None:
        mid = (p1 + p2) * 0.5
        n = _normal(p1, p2)
        if (mid.x() - centre.x()) * n.x() + (mid.y() - centre.y()) * n.y() < 0:
            side = -1.0
    extra = 40.0 * (len(crossed) - 1)
    best = (len(crossed), 0.0)   # where no bend clears: the one that crosses fewest
    for sign in (side, -side):
        bend = step
        while bend <= most:
            hits = len(_crossed(p1, p2, sign * bend, boxes))
            if not hits:
                return sign * (bend + extra)
            if hits < best[0]:
                best = (hits, sign * bend)
            bend += step
    return best[1]


def label_box(point: QPointF) -> QRectF:
    return QRectF(point.x() - LABEL_W / 2, point.y() - LABEL_H / 2, LABEL_W, LABEL_H)


def place_labels(links: list[tuple[QPointF, QPointF, float]], boxes: list[QRectF],
                 wanted: list[bool]) -> list[float | None]:
    """For each link ``(p1, p2, bend)`` whose ``wanted`` is true, the ``t`` of a label
    spot that no device box and no earlier label covers; None where there is none."""
    taken: list[QRectF] = []
    out: list[float | None] = []
    for (p1, p2, bend), want in zip(links, wanted):
        spot = None
        if want:
            for t in _LABEL_SPOTS:
                box = label_box(curve_point(p1, p2, bend, t)).adjusted(-2, -2, 2, 2)
                if not any(box.intersects(b) for b in boxes) and \
                        not any(box.intersects(b) for b in taken):
                    spot = t
                    taken.append(box)
                    break
        out.append(spot)
    return out
