"""Timeline pictures for slides: PNG, SVG and PDF drawn by one QPainter routine.

The picture is standalone (title, legend, lane labels, ms axis) rather than a grab of the
Gantt widget, so that it looks the same from the GUI and the command line, and vector formats
stay small: bars narrower than a pixel are merged per lane, category and pixel column.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from PySide6.QtCore import (
    QBuffer,
    QIODevice,
    QMarginsF,
    QPointF,
    QRectF,
    QSize,
    QSizeF,
    Qt,
)
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetricsF,
    QGuiApplication,
    QImage,
    QPageLayout,
    QPageSize,
    QPainter,
    QPdfWriter,
    QPen,
    QPolygonF,
)

from predictors.engine.timeline import CATEGORIES, Timeline
from predictors.utils.fileio import atomic_write_bytes

from .colors import CATEGORY_COLORS, CATEGORY_LABELS, COUNTER_COLOR
from .layout import LaneLayout, counter_curves, nice_step

__all__ = ["export_timeline_image", "render_timeline", "picture_size", "EXPORT_FORMATS"]

EXPORT_FORMATS = {".png": "PNG image", ".svg": "SVG drawing", ".pdf": "PDF document"}

WIDTH = 1600
ROW_PX = 22.0
MARGIN = 24.0
HEADER = 78.0
AXIS = 46.0
_app = None  # a QGuiApplication made here when the caller has none (fonts need one)


def _ensure_app() -> None:
    global _app
    if QGuiApplication.instance() is None:
        _app = QGuiApplication([])


def _row_px(rows: float) -> float:
    # Few lanes get taller rows so that a one-rank picture is not a thin strip on a slide.
    return max(ROW_PX, min(2.2 * ROW_PX, 330.0 / max(rows, 1.0)))


def picture_size(timeline: Timeline, width: int = WIDTH) -> QSize:
    """The size in pixels (points for PDF) of the picture of ``timeline``."""
    rows = LaneLayout.of(timeline).height if timeline.lanes else 1.0
    return QSize(int(width), int(MARGIN * 2 + HEADER + rows * _row_px(rows) + AXIS))


def _font(size: float, bold: bool = False) -> QFont:
    f = QFont()
    f.setPointSizeF(size)
    f.setBold(bold)
    return f


def render_timeline(painter: QPainter, size: QSize, timeline: Timeline, *,
                    x_range: tuple[float, float] | None = None, title: str | None = None) -> None:
    """Draw ``timeline`` into ``painter`` over a ``size`` canvas (origin top left).

    ``x_range`` is the time window in ms (default: the whole iteration).
    """
    w, h = float(size.width()), float(size.height())
    painter.setRenderHint(QPainter.Antialiasing, False)
    painter.setRenderHint(QPainter.TextAntialiasing, True)
    painter.fillRect(QRectF(0, 0, w, h), QColor("white"))
    lay = LaneLayout.of(timeline)
    if x_range is None:
        t0, t1 = timeline.begin_us / 1e3, timeline.end_us / 1e3
        if 0.0 <= t0 <= 0.05 * (t1 - t0):
            t0 = 0.0  # the iteration starts at zero: show the origin
    else:
        t0, t1 = x_range
    if t1 <= t0:
        t1 = t0 + 1e-3

    # Header: title, then a legend of the categories present.
    painter.setFont(_font(9.5))
    painter.setPen(QColor("#555"))
    sub = f"{t1 - t0:.3f} ms shown"
    if x_range is None:
        sub = f"iteration span {timeline.span_ms():.3f} ms · {len(timeline):,} events"
    painter.drawText(QRectF(MARGIN, MARGIN - 4, w - 2 * MARGIN, 28),
                     Qt.AlignRight | Qt.AlignVCenter, sub)
    room = w - 2 * MARGIN - QFontMetricsF(painter.font()).horizontalAdvance(sub) - 24
    painter.setPen(QColor("#222"))
    painter.setFont(_font(15, True))
    text = title if title is not None else (timeline.title or "Timeline")
    # a long title is cut short of the span figure on its right, never drawn over it
    text = QFontMetricsF(painter.font()).elidedText(text, Qt.ElideRight, max(room, 80.0))
    painter.drawText(QRectF(MARGIN, MARGIN - 4, w - 2 * MARGIN, 28),
                     Qt.AlignLeft | Qt.AlignVCenter, text)
    present = [c for k, c in enumerate(CATEGORIES) if np.any(timeline.category == k)]
    fm = QFontMetricsF(painter.font())
    x, y = MARGIN, MARGIN + 34
    for cat in present:
        label = CATEGORY_LABELS[cat]
        painter.fillRect(QRectF(x, y + 3, 12, 12), QColor(CATEGORY_COLORS[cat]))
        painter.setPen(QColor("#333"))
        painter.drawText(QPointF(x + 17, y + 13), label)
        x += 17 + fm.horizontalAdvance(label) + 18

    row_px = _row_px(lay.height)
    # Plot area.
    painter.setFont(_font(9))
    fm = QFontMetricsF(painter.font())
    label_w = min(260.0, max([fm.horizontalAdvance(s) for s in lay.labels] + [40.0]) + 14)
    left, top = MARGIN + label_w, MARGIN + HEADER
    right, bottom = w - MARGIN, top + lay.height * row_px
    pw = right - left
    scale = pw / (t1 - t0)

    def px(t_ms):
        return left + (t_ms - t0) * scale

    # Rank bands, lane labels and separators.
    for k, (rank, g0, g1) in enumerate(lay.groups):
        if len(lay.groups) > 1 and k % 2 == 0:
            painter.fillRect(QRectF(MARGIN, top + g0 * row_px - 3, w - 2 * MARGIN,
                                    (g1 - g0) * row_px + 6), QColor(240, 243, 248))
    painter.setPen(QColor("#333"))
    for lane, label in zip(lay.order, lay.labels):
        yc = top + lay.y[lane] * row_px
        painter.drawText(QRectF(MARGIN, yc - row_px / 2, label_w - 10, row_px),
                         Qt.AlignRight | Qt.AlignVCenter, label)

    # Grid and x axis.
    step = nice_step(t1 - t0, max(4, int(pw / 130)))
    first = np.ceil(t0 / step) * step
    ticks = np.arange(first, t1 + step * 1e-6, step)
    decimals = max(0, int(-np.floor(np.log10(step)))) if step < 1 else 0
    painter.setPen(QPen(QColor("#e6e6e6"), 1))
    for t in ticks:
        painter.drawLine(QPointF(px(t), top), QPointF(px(t), bottom))
    painter.setPen(QPen(QColor("#888"), 1))
    painter.drawLine(QPointF(left, bottom), QPointF(right, bottom))
    painter.drawLine(QPointF(left, top), QPointF(left, bottom))
    painter.setPen(QColor("#333"))
    for t in ticks:
        painter.drawLine(QPointF(px(t), bottom), QPointF(px(t), bottom + 4))
        painter.drawText(QRectF(px(t) - 50, bottom + 5, 100, 16), Qt.AlignHCenter | Qt.AlignTop,
                         f"{t:.{decimals}f}")
    painter.drawText(QRectF(left, bottom + 22, pw, 18), Qt.AlignHCenter | Qt.AlignTop, "time (ms)")

    painter.save()
    painter.setClipRect(QRectF(left, top, pw, bottom - top))
    _draw_counters(painter, timeline, lay, t1, lambda t: px(t), lambda y: top + y * row_px)
    # Bars, clipped to the plot area; sub-pixel bars merged into one-pixel columns.
    if not len(timeline):
        painter.restore()
        return
    painter.setPen(Qt.NoPen)
    s = timeline.start_us / 1e3
    e = s + timeline.dur_us / 1e3
    vis = (e >= t0) & (s <= t1)
    x0 = np.clip(px(s[vis]), left - 1, right + 1)
    x1 = np.clip(px(e[vis]), left - 1, right + 1)
    rows = lay.y[timeline.lane[vis]]
    cats = timeline.category[vis]
    bar_h = row_px * 0.78
    for k, cat in enumerate(CATEGORIES):
        sel = cats == k
        if not sel.any():
            continue
        painter.setBrush(QColor(CATEGORY_COLORS[cat]))
        cx0, cx1, cy = x0[sel], x1[sel], rows[sel]
        wide = (cx1 - cx0) >= 1.0
        rects = [QRectF(a, top + r * row_px - bar_h / 2, b - a, bar_h)
                 for a, b, r in zip(cx0[wide], cx1[wide], cy[wide])]
        narrow = ~wide
        if narrow.any():
            cols = np.unique(np.stack([cy[narrow], np.floor(cx0[narrow])], axis=1), axis=0)
            rects += [QRectF(c, top + r * row_px - bar_h / 2, 1.0, bar_h) for r, c in cols]
        if rects:
            painter.drawRects(rects)
    painter.restore()


def _draw_counters(painter: QPainter, timeline: Timeline, lay: LaneLayout, end_ms: float,
                   px, py) -> None:
    """Counters (allocated memory) as filled step curves, each over its own range."""
    color = QColor(COUNTER_COLOR)
    fill = QColor(color)
    fill.setAlpha(60)
    for _lane, xs, ys, base in counter_curves(timeline, lay, end_ms):
        points = [QPointF(px(x), py(y)) for x, y in zip(xs, ys)]
        polygon = QPolygonF([QPointF(points[0].x(), py(base)), *points,
                             QPointF(points[-1].x(), py(base))])
        painter.setPen(Qt.NoPen)
        painter.setBrush(fill)
        painter.drawPolygon(polygon)
        painter.setPen(QPen(color, 1.2))
        painter.drawPolyline(QPolygonF(points))


def export_timeline_image(timeline: Timeline, path: str | os.PathLike, *,
                          x_range: tuple[float, float] | None = None,
                          title: str | None = None, width: int = WIDTH) -> Path:
    """Write a picture of ``timeline`` to ``path`` (``.png``, ``.svg`` or ``.pdf``).

    The file is written atomically.  ``x_range`` (ms) limits the picture to a window, e.g.
    the Gantt's visible range; the default is the whole iteration.

    Examples
    --------
    >>> export_timeline_image(prediction.timeline, "iteration.svg")  # doctest: +SKIP
    """
    _ensure_app()
    path = Path(path)
    ext = path.suffix.lower()
    if ext not in EXPORT_FORMATS:
        raise ValueError(f"unsupported image format {path.suffix!r}: use .png, .svg or .pdf")
    size = picture_size(timeline, width)
    # Render into memory, then write atomically with the usual 0666 & ~umask permissions
    # (a temporary file from mkstemp would leave the export readable by its owner only).
    buffer = QBuffer()
    buffer.open(QIODevice.WriteOnly)
    if ext == ".png":
        ratio = 2  # crisp on slides and HiDPI screens
        image = QImage(size * ratio, QImage.Format_ARGB32)
        image.setDevicePixelRatio(ratio)
        image.fill(QColor("white"))
        painter = QPainter(image)
        render_timeline(painter, size, timeline, x_range=x_range, title=title)
        painter.end()
        if not image.save(buffer, "PNG"):
            raise OSError(f"could not encode {path}")
    elif ext == ".svg":
        from PySide6.QtSvg import QSvgGenerator

        gen = QSvgGenerator()
        gen.setOutputDevice(buffer)
        gen.setSize(size)
        gen.setViewBox(QRectF(0, 0, size.width(), size.height()))
        gen.setTitle(title or timeline.title or "Timeline")
        gen.setDescription("Predicted training-iteration timeline")
        painter = QPainter(gen)
        render_timeline(painter, size, timeline, x_range=x_range, title=title)
        painter.end()
    else:
        writer = QPdfWriter(buffer)
        writer.setResolution(72)  # one unit = one point = one picture pixel
        writer.setTitle(title or timeline.title or "Timeline")
        writer.setCreator("ml-dse explorer")
        writer.setPageLayout(QPageLayout(
            QPageSize(QSizeF(size.width(), size.height()), QPageSize.Point, "",
                      QPageSize.ExactMatch),
            QPageLayout.Portrait, QMarginsF(0, 0, 0, 0)))
        painter = QPainter(writer)
        render_timeline(painter, size, timeline, x_range=x_range, title=title)
        painter.end()
        del painter, writer  # the writer finishes the document when it goes
    buffer.close()
    data = bytes(buffer.data())
    if not data:
        raise OSError(f"could not render {path}")
    atomic_write_bytes(path, data)
    return path
