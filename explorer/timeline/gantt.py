"""The Gantt view of a Timeline: one row per lane, grouped per rank, x in milliseconds.

Drawing follows pyqtgraph's fast path: one ``BarGraphItem`` per category with ``pen=None``
(a million bars stay interactive).  Hover and click look events up with a per-lane sorted
start array and ``numpy.searchsorted`` instead of one QGraphicsItem per bar.  The critical
path (``timeline.meta["critical_path"]``) is one more ``BarGraphItem`` drawn on top.
"""
from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QCursor
from PySide6.QtWidgets import (
    QGraphicsRectItem,
    QHBoxLayout,
    QLabel,
    QMenu,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from predictors.engine.timeline import CATEGORIES, LINKS_RANK, Timeline, group_name

from .colors import CATEGORY_COLORS, CATEGORY_LABELS, COUNTER_COLOR
from .events import EventIndex, critical_events, format_us, path_predecessor
from .flows import FlowArrows
from .lane_axis import AxisRows, LaneAxis, axis_rows
from .lane_bars import LaneBarsItem
from .level_of_detail import PixelColumns
from .op_search import OpSearch
from .lane_rows import EDGE, MIN_ROW_PX, ROW_ZOOM, LaneRows
from .layout import LaneLayout, counter_curves, lane_title, node_groups
from .range_selection import TimeRangeSelection, TimeRangeViewBox, format_duration
from .time_grid import TimeGrid

__all__ = ["GanttWidget", "MIN_ROW_PX", "ROW_ZOOM"]

BAR_HEIGHT = 0.78
STALE_OPACITY = 0.28
CRITICAL_DIM = 0.35        # opacity of the bars off the critical path while it is shown
CRITICAL_PEN = "#d4145a"   # outline of the critical-path bars
# translucent, so that the bands show on a light and on a dark background alike
BAND_COLOR = QColor(90, 120, 170, 20)
NO_CRITICAL_PATH = "This timeline has no critical path (recorded traces have none)."
MAX_EXPANDED_RANKS = 4  # more ranks open folded, all but the slowest


class GanttViewBox(TimeRangeViewBox):
    """The Gantt's ViewBox: the wheel scrolls rows, Ctrl+wheel changes the lane height,
    the wheel over the time axis zooms time, a sideways wheel pans time."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.gantt = None  # the GanttWidget that handles vertical scrolling and lane height

    def wheelEvent(self, ev, axis=None):
        g = self.gantt
        if g is None or axis == 0:
            super().wheelEvent(ev, axis)   # over the time axis: zoom time, as always
            return
        ev.accept()
        delta = ev.delta() / 120.0
        if ev.orientation() == Qt.Horizontal:
            g.pan(-0.1 * delta)
        elif ev.modifiers() & Qt.ControlModifier:
            anchor = self.mapSceneToView(ev.scenePos()).y()
            g.zoom_rows(ROW_ZOOM ** delta, anchor)
        else:
            g.scroll_rows(-3.0 * delta)


class GanttWidget(QWidget):
    """Gantt chart of a :class:`Timeline` with legend, hover tooltips and click details.

    Keys as in Perfetto: W/S zoom in/out at the mouse, A/D pan; the wheel over the time
    axis zooms time.  A left-drag selects a time range and shows its duration, Esc clears it;
    a shift-drag, a middle-drag or a drag on the time axis pans.  ``F`` or a double click
    fits the whole iteration.

    Rows are at least ``MIN_ROW_PX`` tall; when they do not all fit, the view scrolls: the
    wheel, the scroll bar, Up/Down and Page Up/Page Down move through the rows, Home/End go
    to the first/last.  Ctrl+wheel (over the plot or the lane names), ``+``/``-`` or the
    buttons above the scroll bar make rows taller or shorter (:class:`LaneRows`).  The left
    column names every row: ``rank N`` (a click folds or unfolds it), each lane of an
    expanded rank, and ``node K`` when ranks are grouped per node.

    Signals
    -------
    sigEventHovered(int)  event index under the mouse, -1 when none
    sigEventClicked(int)  event index clicked, -1 when empty space was clicked
    sigTimeRangeSelected(object)  ``(t0_ms, t1_ms)`` when a range is selected, ``None`` when
        the selection is cleared
    sigCriticalPathAvailable(bool)  whether the new timeline has a critical path
    sigRedrawn()  the rows were rebuilt (a new timeline, a fold, or none): the lane-name
        column and the time limits may have changed

    The critical path, when shown (:meth:`set_critical_path_shown`), is drawn on top with a
    strong outline and the other bars are dimmed, as in Perfetto; the choice stays while
    new timelines arrive.
    """

    sigEventHovered = Signal(int)
    sigEventClicked = Signal(int)
    sigTimeRangeSelected = Signal(object)
    sigCriticalPathAvailable = Signal(bool)
    sigRedrawn = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.timeline: Timeline | None = None
        self.layout_: LaneLayout | None = None
        self._index: EventIndex | None = None
        self._bars: dict[str, pg.BarGraphItem] = {}
        self._bands: list = []      # drawn items that are not bars: rank bands, counters
        self._counter_items: list = []
        self._critical = np.zeros(0, np.int64)    # the timeline's critical path, sorted
        self._critical_item: pg.BarGraphItem | None = None
        self.critical_path_shown = False
        self._present: list[str] = []   # the categories in the legend
        self._stale = False
        self._mouse_x: float | None = None
        self._hovered = -1
        self.selected = -1
        self.collapsed: set[int] = set()  # ranks folded to one row
        self.ranks_per_node: int | None = None

        self.legend = QLabel(self)
        self.legend.setObjectName("ganttLegend")
        self.legend.setTextFormat(Qt.RichText)
        self.legend.setWordWrap(True)
        self.lane_axis = LaneAxis()
        self.lane_axis.on_rank_clicked = self.toggle_rank
        self.plot = pg.PlotWidget(self, background="w", viewBox=GanttViewBox(),
                                  axisItems={"left": self.lane_axis})
        self.plot.setFocusPolicy(Qt.StrongFocus)
        self.rows = LaneRows(self.plot.getPlotItem().getViewBox(), self)
        self.scroll = self.rows.scroll
        self.details = QLabel("Hover a bar for its details; click to pin them here.", self)
        self.details.setObjectName("ganttDetails")
        self.details.setTextFormat(Qt.RichText)
        self.details.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.details.setStyleSheet("padding: 2px 4px;")   # the palette's text colour
        box = QVBoxLayout(self)
        box.setContentsMargins(2, 2, 2, 2)
        box.setSpacing(2)
        box.addWidget(self.legend)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(0)
        row.addWidget(self.plot, 1)
        row.addWidget(self.rows)
        box.addLayout(row, 1)
        self.search = OpSearch(self, BAR_HEIGHT, self)   # Find op (Ctrl+F), by the details
        bottom = QHBoxLayout()
        bottom.addWidget(self.details, 1)
        bottom.addWidget(self.search, 0, Qt.AlignTop)
        box.addLayout(bottom)

        pi = self.plot.getPlotItem()
        pi.invertY(True)
        pi.setLabel("bottom", "time", units="ms")
        pi.getAxis("bottom").enableAutoSIPrefix(False)
        pi.hideButtons()
        pi.setMenuEnabled(False)
        left = pi.getAxis("left")
        left.setStyle(tickLength=0)
        left.setWidth(130)
        for name in ("left", "bottom"):
            ax = pi.getAxis(name)
            ax.setPen(pg.mkPen("#888"))
            ax.setTextPen(pg.mkPen("#333"))
        self.vb = pi.getViewBox()
        self.vb.gantt = self
        self.vb.setMouseEnabled(x=True, y=False)
        self.vb.sigResized.connect(lambda *_: self.rows.apply())
        self.vb.sigRangeChanged.connect(self._place_stale_text)
        self.vb.setDefaultPadding(0.0)

        self._empty = pg.TextItem("No prediction yet", color="#888", anchor=(0.5, 0.5))
        self._stale_text = pg.TextItem("out of date", color="#777", anchor=(1, 0))
        self._stale_text.setZValue(20)
        from ..window.theme import outline_pen   # here: the window package imports gantt
        self._hover_box = QGraphicsRectItem()
        self._hover_box.setPen(outline_pen(self._hover_box, 1.5))
        self._hover_box.setBrush(QBrush(Qt.NoBrush))
        self._hover_box.setZValue(10)
        self._sel_box = QGraphicsRectItem()
        self._sel_box.setPen(outline_pen(self._sel_box, 2.5, strong=True))
        self._sel_box.setBrush(QBrush(QColor(255, 255, 255, 60)))
        self._sel_box.setZValue(11)
        for item in (self._hover_box, self._sel_box):
            item.setVisible(False)
            pi.addItem(item, ignoreBounds=True)
        pi.addItem(self._empty, ignoreBounds=True)
        # a line at each time tick; pyqtgraph's own grid cost half a frame (time_grid)
        self.grid = TimeGrid(pi.getAxis("bottom"), alpha=0.18)
        pi.addItem(self.grid, ignoreBounds=True)
        self.range_selection = TimeRangeSelection(pi, self)
        self.vb.sigRangeDragged.connect(self.range_selection.on_drag)
        self.range_selection.sigChanged.connect(self._on_time_range)

        self.plot.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.plot.scene().sigMouseClicked.connect(self._on_mouse_clicked)
        self.plot.installEventFilter(self)
        self.flows = FlowArrows(self)   # launch -> kernel arrows of the clicked bar
        self._show_empty()

    def _show_empty(self) -> None:
        """The state without a timeline: the placeholder centred, no lane labels."""
        self.layout_ = None
        # a unit view with the text in its middle: at (0, 0) half of it fell off the corner;
        # the last timeline's limits would keep the view on its time span
        self.vb.setLimits(xMin=None, xMax=None, minXRange=None, yMin=None, yMax=None)
        self.vb.setRange(xRange=(0.0, 1.0), yRange=(0.0, 1.0), padding=0.0)
        self._empty.setPos(0.5, 0.5)
        self._empty.setVisible(True)
        self.lane_axis.set_rows(AxisRows())
        self.rows.set_layout(None)
        self._update_legend([])
        self.search.redraw()   # no timeline: no matches
        self.set_stale(False)
        self.sigRedrawn.emit()

    # --- public API -----------------------------------------------------------------------

    def set_timeline(self, timeline: Timeline | None, ranks_per_node: int | None = None) -> None:
        """Show ``timeline`` (``None`` clears), fitting the whole iteration, not stale.

        ``ranks_per_node`` (the platform's GPUs per node; else the timeline's
        ``meta["gpus_per_node"]`` when it has one) groups the ranks per node; without it the
        ranks are not grouped."""
        if ranks_per_node is None and timeline is not None:
            ranks_per_node = timeline.meta.get("gpus_per_node") or None
        self.ranks_per_node = int(ranks_per_node) if ranks_per_node else None
        pi = self.plot.getPlotItem()
        for item in list(self._bars.values()) + self._bands:
            pi.removeItem(item)
        self._bars.clear()
        self._bands.clear()
        self._counter_items = []
        self.timeline, self._index = timeline, None
        self._critical = critical_events(timeline)
        self._critical_item = None
        self._hovered = self.selected = -1
        self.range_selection.clear()
        self._hover_box.setVisible(False)
        self._sel_box.setVisible(False)
        self.details.setText("Hover a bar for its details; click to pin them here.")
        self.sigCriticalPathAvailable.emit(self.has_critical_path())
        if timeline is None or not len(timeline.lanes):
            self._show_empty()
            return
        self._empty.setVisible(False)
        ranks = timeline.ranks
        self.collapsed = set()
        if len(ranks) > MAX_EXPANDED_RANKS:  # many ranks: the slowest one open, the rest folded
            slowest = max(ranks, key=timeline.span_ms)
            self.collapsed = {r for r in ranks if r != slowest}
        self._draw()
        self.fit()
        self.set_stale(False)

    def set_collapsed(self, ranks) -> None:
        """Fold ``ranks`` to one row each (their streams together), keeping the view."""
        if self.timeline is None:
            return
        self.collapsed = set(ranks) & set(self.groups())
        (x0, x1), _ = self.vb.viewRange()
        self._hovered = -1
        self._hover_box.setVisible(False)
        self._draw()
        self.vb.setXRange(x0, x1, padding=0)
        self.rows.apply()
        if self.selected >= 0 and np.isfinite(self.layout_.y[self.timeline.lane[self.selected]]):
            self._sel_box.setRect(self._rect_of(self.selected))
        else:
            self._sel_box.setVisible(False)

    def toggle_rank(self, rank: int) -> None:
        self.set_collapsed(self.collapsed ^ {rank})

    def groups(self) -> list[int]:
        """The ranks, and ``LINKS_RANK`` when the timeline has link lanes: what folds."""
        if self.timeline is None:
            return []
        links = any(lane.rank == LINKS_RANK for lane in self.timeline.lanes)
        return self.timeline.ranks + ([LINKS_RANK] if links else [])

    def _draw(self) -> None:
        """(Re)build the bars, bands and labels of the current timeline and folds."""
        timeline, pi = self.timeline, self.plot.getPlotItem()
        for item in list(self._bars.values()) + self._bands:
            pi.removeItem(item)
        self._bars.clear()
        self._bands.clear()
        self._counter_items = []
        self._critical_item = None
        lay = self.layout_ = LaneLayout.of(timeline, frozenset(self.collapsed))
        self.rows.set_layout(lay)
        start_ms = timeline.start_us / 1e3
        # Sub-pixel events would vanish at full zoom-out; BarGraphItem draws them at >= 0 width.
        width_ms = timeline.dur_us / 1e3
        y0 = lay.y[timeline.lane] - BAR_HEIGHT / 2 if len(timeline) else np.zeros(0)
        t0, t1 = timeline.begin_us / 1e3, timeline.end_us / 1e3
        if len(lay.groups) > 1:
            # Alternate light bands per rank make the grouping readable at a glance.
            band = [(top, bottom) for k, (_, top, bottom) in enumerate(lay.groups) if k % 2 == 0]
            if band:
                span = max(t1 - t0, 1e-6)
                item = pg.BarGraphItem(x0=[t0 - span] * len(band), width=[3 * span] * len(band),
                                       y0=[b[0] - 0.15 for b in band],
                                       height=[b[1] - b[0] + 0.3 for b in band],
                                       pen=None, brush=BAND_COLOR)
                item.setZValue(-10)
                pi.addItem(item)
                self._bands.append(item)
        present = []
        shown = np.isfinite(y0)  # a folded rank's CPU threads are not drawn
        columns = PixelColumns()   # the categories split each pixel column of a row
        for c, cat in enumerate(CATEGORIES):
            sel = np.flatnonzero((timeline.category == c) & shown)
            if not len(sel):
                continue
            present.append(cat)
            # only what is in view, per pixel column: a million bars stay fluid
            z = {"idle": 0, "cpu_overhead": 2}.get(cat, 1)
            item = LaneBarsItem(x0=start_ms[sel], width=width_ms[sel], y0=y0[sel],
                                height=BAR_HEIGHT, pen=None, brush=QColor(CATEGORY_COLORS[cat]),
                                columns=columns, key=cat, z=z)
            item.setZValue(z)
            pi.addItem(item)
            self._bars[cat] = item
        self._draw_critical_path(start_ms, width_ms, y0, shown)
        self._draw_counters(lay, t1)
        self._draw_node_separators(lay, t0, t1)
        self.lane_axis.set_rows(axis_rows(lay, self.collapsed, self.node_groups(lay)))
        self._update_legend(present)
        span = max(t1 - t0, 1e-3)
        self.vb.setLimits(xMin=t0 - 0.5 * span, xMax=t1 + 0.5 * span,
                          minXRange=1e-6, yMin=-EDGE, yMax=lay.height + EDGE)
        self.search.redraw()   # the found ops' bars on the new rows; the opacity
        self.sigRedrawn.emit()

    # --- critical path ----------------------------------------------------------------------

    def has_critical_path(self) -> bool:
        """Whether the current timeline has a critical path to show."""
        return len(self._critical) > 0

    def critical_path(self) -> np.ndarray:
        """The event indices on the current timeline's critical path, sorted."""
        return self._critical.copy()

    def on_critical_path(self, i: int) -> bool:
        k = int(np.searchsorted(self._critical, i))
        return k < len(self._critical) and int(self._critical[k]) == i

    def critical_predecessor(self, i: int) -> int | None:
        """The critical-path event that starts last before event ``i`` does (``None`` for
        the first one, or when ``i`` is not on the path)."""
        if not self.on_critical_path(i):
            return None
        return path_predecessor(self.timeline, self._critical, i)

    def set_critical_path_shown(self, shown: bool) -> None:
        """Highlight the critical path (outlined on top, the other bars dimmed) or not."""
        self.critical_path_shown = bool(shown)
        if self._critical_item is not None:
            self._critical_item.setVisible(self.critical_path_shown)
            self._update_legend(self._present)
        self.apply_opacity()

    def _draw_critical_path(self, start_ms, width_ms, y0, shown) -> None:
        """One bar item for every critical-path bar, in its category colour and outlined."""
        path = self._critical[shown[self._critical]] if len(self._critical) else self._critical
        if not len(path):
            return
        colors = {c: QColor(CATEGORY_COLORS[cat]) for c, cat in enumerate(CATEGORIES)}
        item = pg.BarGraphItem(x0=start_ms[path], width=width_ms[path], y0=y0[path],
                               height=BAR_HEIGHT,
                               pen=pg.mkPen(CRITICAL_PEN, width=2, cosmetic=True),
                               brushes=[colors[int(c)] for c in self.timeline.category[path]])
        item.setZValue(5)
        item.setVisible(self.critical_path_shown)
        self.plot.getPlotItem().addItem(item)
        self._bands.append(item)
        self._critical_item = item

    def apply_opacity(self) -> None:
        """Grey everything while stale; dim the bars off the critical path while it shows,
        and those a search does not find while it marks some."""
        base = STALE_OPACITY if self._stale else 1.0
        dim = CRITICAL_DIM if (self.critical_path_shown and self._critical_item is not None
                               or self.search.active()) else 1.0
        for item in self._bars.values():
            item.setOpacity(base * dim)
        for item in self._counter_items:
            item.setOpacity(base)
        if self._critical_item is not None:
            self._critical_item.setOpacity(base)

    def _draw_counters(self, lay: LaneLayout, end_ms: float) -> None:
        """Each shown counter (allocated memory) as a filled step curve in its row, from
        its lowest value to its highest (:func:`counter_range`; the row's label says
        which)."""
        color = QColor(COUNTER_COLOR)
        fill = QColor(color)
        fill.setAlpha(60)
        for _lane, xs, ys, base in counter_curves(self.timeline, lay, end_ms):
            item = pg.PlotDataItem(xs, ys, pen=pg.mkPen(color, width=1.2), fillLevel=base,
                                   brush=fill)
            self.plot.getPlotItem().addItem(item)
            self._bands.append(item)
            self._counter_items.append(item)

    def _faded(self) -> list:
        """What greys out while stale: the bars, the critical path and the counter curves."""
        extra = [self._critical_item] if self._critical_item is not None else []
        return list(self._bars.values()) + extra + self._counter_items

    def counter_text(self, lane: int, t_ms: float) -> str:
        """``rank 0 · memory allocated at 1.200 ms: 46.5 MB (peak 46.5 MB)``."""
        from predictors.utils.formatting import format_bytes

        tl = self.timeline
        value = tl.counter_at(lane, t_ms * 1e3)
        name = tl.lanes[lane]
        peak = float(tl.counters[lane][1].max())
        now = "–" if value is None else format_bytes(value)
        return (f"rank {name.rank} · {name.name} at {t_ms:.3f} ms: {now} "
                f"(peak {format_bytes(peak)})")

    def fit(self) -> None:
        """Show the whole iteration and every lane."""
        if self.timeline is None or self.layout_ is None:
            return
        t0, t1 = self.timeline.begin_us / 1e3, self.timeline.end_us / 1e3
        pad = max(t1 - t0, 1e-3) * 0.01
        self.vb.setXRange(t0 - pad, t1 + pad, padding=0)
        self.rows.to_top()

    # --- rows: names, node groups, vertical scrolling and lane height --------------------

    def node_groups(self, lay: LaneLayout | None = None) -> list[tuple[int, float, float]]:
        """``(node, top, bottom)`` of each node's ranks (see :func:`node_groups`)."""
        return node_groups(lay or self.layout_, self.ranks_per_node)

    def _draw_node_separators(self, lay: LaneLayout, t0: float, t1: float) -> None:
        """A line across the plot between two nodes' ranks."""
        nodes = self.node_groups(lay)
        for (_, _, bottom), (_, top, _) in zip(nodes, nodes[1:]):
            line = pg.InfiniteLine(pos=(bottom + top) / 2, angle=0,
                                   pen=pg.mkPen("#8a94a6", width=1.5, cosmetic=True))
            line.setZValue(-5)
            self.plot.getPlotItem().addItem(line, ignoreBounds=True)
            self._bands.append(line)

    def row_height_px(self) -> float:
        """The height of a row on screen (:meth:`LaneRows.row_height_px`)."""
        return self.rows.row_height_px()

    def y_range(self) -> tuple[float, float]:
        """The visible rows' span in view coordinates (top, bottom)."""
        return self.rows.y_range()

    def visible_lanes(self) -> list[int]:
        """The lanes whose rows are whole in view, top to bottom."""
        return self.rows.visible_lanes()

    def scroll_rows(self, rows: float) -> None:
        """Scroll the view down by ``rows`` (negative: up)."""
        self.rows.scroll_by(rows)

    def zoom_rows(self, factor: float, anchor_y: float | None = None) -> None:
        """Make rows ``factor`` times taller, keeping the row at ``anchor_y`` in place
        (:meth:`LaneRows.zoom`)."""
        self.rows.zoom(factor, anchor_y)

    def x_range(self) -> tuple[float, float]:
        """The visible time range in ms."""
        (x0, x1), _ = self.vb.viewRange()
        return float(x0), float(x1)

    def set_stale(self, stale: bool) -> None:
        """Grey the bars while a newer prediction is on its way."""
        self._stale = bool(stale)
        self.apply_opacity()
        pi = self.plot.getPlotItem()
        if stale and self.timeline is not None:
            if self._stale_text.scene() is None:
                pi.addItem(self._stale_text, ignoreBounds=True)
            (x0, x1), (y0, y1) = self.vb.viewRange()
            self._stale_text.setPos(x1, min(y0, y1))
            self._stale_text.setVisible(True)
        else:
            self._stale_text.setVisible(False)

    def _place_stale_text(self, *_args) -> None:
        """Keep "out of date" in the top right corner while the view moves."""
        if self._stale_text.isVisible():
            (_, x1), (y0, y1) = self.vb.viewRange()
            self._stale_text.setPos(x1, min(y0, y1))

    def is_stale(self) -> bool:
        return self._stale

    def time_range(self) -> tuple[float, float] | None:
        """The selected time range in ms, ``None`` when nothing is selected."""
        return self.range_selection.range

    def select_time_range(self, t0_ms: float, t1_ms: float) -> None:
        """Select ``[t0_ms, t1_ms]`` as a drag would."""
        self.range_selection.set_range(t0_ms, t1_ms)
        if self.range_selection.range is not None:
            self._on_time_range(self.range_selection.range)

    def clear_time_range(self) -> None:
        self.range_selection.clear()

    def event_at(self, lane: int | None, t_ms: float, tol_ms: float = 0.0) -> int | None:
        """Index of the event of ``lane`` at time ``t_ms`` (see :class:`EventIndex`)."""
        if self.timeline is None or lane is None:
            return None
        if self._index is None:
            self._index = EventIndex(self.timeline)
        return self._index.event_at(lane, t_ms * 1e3, tol_ms * 1e3)

    def event_at_point(self, x_ms: float, y: float, tol_ms: float = 0.0) -> int | None:
        """Index of the event drawn at view coordinates (``x_ms``, ``y``)."""
        if self.layout_ is None:
            return None
        lane = self.layout_.lane_at(y)
        if lane is None or abs(self.layout_.y[lane] - y) > BAR_HEIGHT / 2 + 0.05:
            return None
        for lane in self.layout_.lanes_at(y):  # a folded rank draws several on one row
            i = self.event_at(lane, x_ms, tol_ms)
            if i is not None:
                return i
        return None

    def describe(self, i: int, rich: bool = True) -> str:
        """Name, category, lane, shapes, start and duration of event ``i``."""
        tl = self.timeline
        name = tl.names[tl.name_id[i]]
        detail = tl.details[tl.detail_id[i]]
        lane = tl.lanes[tl.lane[i]]
        cat = CATEGORY_LABELS[CATEGORIES[tl.category[i]]]
        start, dur = float(tl.start_us[i]), float(tl.dur_us[i])
        where = lane_title(lane)
        what = "traffic" if lane.kind == "link" else "shapes"   # a link bar: bytes, use
        if not where.startswith("rank"):
            where = f"{group_name(lane.rank)} · {where}"
        critical = self.on_critical_path(i)
        pred = self.critical_predecessor(i) if critical else None
        pred_name = tl.names[tl.name_id[pred]] if pred is not None else None
        if not rich:
            parts = [name, cat, where]
            if detail:
                parts.append(f"{what} {detail}")
            parts.append(f"start {start / 1e3:.3f} ms, duration {format_us(dur)}")
            if critical:
                parts.append("on the critical path" + (f", after {pred_name}" if pred_name
                                                        else ""))
            return " | ".join(parts)
        e = html.escape
        swatch = CATEGORY_COLORS[CATEGORIES[tl.category[i]]]
        text = (f"<b>{e(name)}</b> &nbsp;<span style='color:{swatch}'>■</span> {e(cat)}"
                f" &nbsp;·&nbsp; {e(where)}")
        if detail:
            text += f"<br>{what}: <tt>{e(detail)}</tt>"
        text += (f"<br>start {start / 1e3:.3f} ms &nbsp;·&nbsp; duration <b>{format_us(dur)}</b>"
                 f" &nbsp;·&nbsp; end {(start + dur) / 1e3:.3f} ms")
        if critical:
            text += (f"<br><b style='color:{CRITICAL_PEN}'>on the critical path</b>"
                     + (f" &nbsp;·&nbsp; after {e(pred_name)}" if pred_name else ""))
        return text

    def select_event(self, i: int) -> None:
        """Pin event ``i``'s details (``-1`` clears)."""
        self.selected = i
        if i is None or i < 0 or self.timeline is None:
            self.selected = -1
            self._sel_box.setVisible(False)
            self.details.setText("Hover a bar for its details; click to pin them here.")
            return
        self._sel_box.setRect(self._rect_of(i))
        self._sel_box.setVisible(True)
        self.details.setText(self.describe(i))

    def reveal_event(self, i: int) -> None:
        """Bring event ``i`` into view (its rank unfolded, its row scrolled to, the time
        centred on it and zoomed to at most a hundred times its length, or out to show it
        whole) and pin its details."""
        tl = self.timeline
        rank = int(tl.lanes[int(tl.lane[i])].rank)
        if rank in self.collapsed and not np.isfinite(self.layout_.y[tl.lane[i]]):
            self.toggle_rank(rank)
        s, e = tl.start_us[i] / 1e3, (tl.start_us[i] + tl.dur_us[i]) / 1e3
        x0, x1 = self.x_range()
        length = max(e - s, 1e-3)
        half = max(min((x1 - x0) / 2, 50 * length), 0.6 * length)
        self.vb.setXRange((s + e) / 2 - half, (s + e) / 2 + half, padding=0)
        y, (y0, y1) = float(self.layout_.y[tl.lane[i]]), self.y_range()
        if not y0 <= y <= y1:
            self.rows.top = y - (y1 - y0) / 2
            self.rows.apply()
        self.select_event(i)

    # --- navigation -------------------------------------------------------------------------

    def zoom(self, factor: float, center_ms: float | None = None) -> None:
        """Scale the visible time range by ``factor`` (< 1 zooms in) around ``center_ms``."""
        x0, x1 = self.x_range()
        c = center_ms if center_ms is not None and x0 <= center_ms <= x1 else (x0 + x1) / 2
        self.vb.setXRange(c - (c - x0) * factor, c + (x1 - c) * factor, padding=0)

    def pan(self, fraction: float) -> None:
        """Move the visible range by ``fraction`` of its width (positive: later)."""
        x0, x1 = self.x_range()
        d = (x1 - x0) * fraction
        self.vb.setXRange(x0 + d, x1 + d, padding=0)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if obj is self.plot and event.type() == QEvent.KeyPress:
            key = event.key()
            if key == Qt.Key_W:
                self.zoom(0.8, self._mouse_x)
            elif key == Qt.Key_S:
                self.zoom(1.25, self._mouse_x)
            elif key == Qt.Key_A:
                self.pan(-0.15)
            elif key == Qt.Key_D:
                self.pan(0.15)
            elif key == Qt.Key_F:
                self.fit()
            elif key == Qt.Key_Up:
                self.scroll_rows(-1)
            elif key == Qt.Key_Down:
                self.scroll_rows(1)
            elif key in (Qt.Key_PageUp, Qt.Key_PageDown):
                y0, y1 = self.y_range()
                self.scroll_rows((y1 - y0) * (-0.9 if key == Qt.Key_PageUp else 0.9))
            elif key in (Qt.Key_Home, Qt.Key_End):
                self.scroll_rows(-1e9 if key == Qt.Key_Home else 1e9)
            elif key in (Qt.Key_Plus, Qt.Key_Equal):
                self.zoom_rows(ROW_ZOOM)
            elif key == Qt.Key_Minus:
                self.zoom_rows(1 / ROW_ZOOM)
            elif key == Qt.Key_Escape:
                self.clear_time_range()
                self.select_event(-1)
            else:
                return False
            return True
        return super().eventFilter(obj, event)

    # --- mouse ------------------------------------------------------------------------------

    def _tolerance_ms(self) -> float:
        # Three pixels, so that bars thinner than a pixel can still be hovered.
        px = self.vb.viewPixelSize()[0]
        return 3.0 * px

    def _rect_of(self, i: int) -> QRectF:
        tl = self.timeline
        y = self.layout_.y[tl.lane[i]]
        w = max(float(tl.dur_us[i]) / 1e3, self.vb.viewPixelSize()[0])
        return QRectF(float(tl.start_us[i]) / 1e3, y - BAR_HEIGHT / 2, w, BAR_HEIGHT)

    def _on_mouse_moved(self, pos: QPointF) -> None:
        if self.timeline is None or not self.vb.sceneBoundingRect().contains(pos):
            self._mouse_x = None
            self._set_hovered(-1)
            return
        p = self.vb.mapSceneToView(pos)
        self._mouse_x = p.x()
        i = self.event_at_point(p.x(), p.y(), self._tolerance_ms())
        self._set_hovered(-1 if i is None else i)
        lane = self.layout_.lane_at(p.y()) if i is None and self.layout_ else None
        if lane is not None and lane in self.timeline.counters:
            QToolTip.showText(QCursor.pos(), self.counter_text(lane, p.x()), self.plot)
        elif i is None:
            QToolTip.hideText()   # off the counter row: its value no longer applies

    def _rank_menu(self, rank, where) -> None:
        """Fold or unfold ranks (Perfetto's collapsible process tracks)."""
        menu = QMenu(self)
        if rank is not None:
            folded = rank in self.collapsed
            menu.addAction(f"{'Expand' if folded else 'Collapse'} {group_name(rank)}",
                           lambda: self.toggle_rank(rank))
            menu.addAction(f"Collapse all but {group_name(rank)}", lambda: self.set_collapsed(
                set(self.groups()) - {rank}))
        menu.addAction("Expand all ranks", lambda: self.set_collapsed(set()))
        menu.addAction("Collapse all ranks", lambda: self.set_collapsed(set(self.timeline.ranks)))
        menu.popup(where)
        self._menu = menu  # kept for tests and so it is not collected while open

    def _set_hovered(self, i: int) -> None:
        if i == self._hovered:
            return
        self._hovered = i
        self.sigEventHovered.emit(i)
        if i < 0:
            self._hover_box.setVisible(False)
            QToolTip.hideText()
            return
        self._hover_box.setRect(self._rect_of(i))
        self._hover_box.setVisible(True)
        QToolTip.showText(QCursor.pos(), self.describe(i), self.plot)

    def _on_mouse_clicked(self, ev) -> None:
        if self.timeline is not None and ev.button() == Qt.RightButton \
                and len(self.timeline.ranks) > 1:
            p = self.vb.mapSceneToView(ev.scenePos())
            self._rank_menu(self.layout_.rank_at(p.y()), ev.screenPos().toPoint())
            return
        if self.timeline is None or ev.button() != Qt.LeftButton:
            return
        if ev.double():
            self.fit()
            return
        pos = ev.scenePos()
        if not self.vb.sceneBoundingRect().contains(pos):
            return
        p = self.vb.mapSceneToView(pos)
        i = self.event_at_point(p.x(), p.y(), self._tolerance_ms())
        self.select_event(-1 if i is None else i)
        self.sigEventClicked.emit(-1 if i is None else i)

    def _on_time_range(self, rng) -> None:
        if rng is None:
            if self.selected < 0:
                self.details.setText("Hover a bar for its details; click to pin them here.")
            self.sigTimeRangeSelected.emit(None)
            return
        t0, t1 = rng
        self.details.setText(f"Selected <b>{format_duration(t1 - t0)}</b> &nbsp;·&nbsp; "
                             f"{t0:.3f} – {t1:.3f} ms &nbsp;·&nbsp; Esc clears")
        self.sigTimeRangeSelected.emit(rng)

    def _update_legend(self, present: list[str]) -> None:
        self._present = cats = present or []
        if not cats:
            self.legend.setText("<span style='color:#888'>no events</span>")
            return
        # a chip never splits; the legend wraps between chips in a narrow window
        chips = [f"<span style='color:{CATEGORY_COLORS[c]}; font-size:14px'>■</span>&nbsp;"
                 f"{html.escape(CATEGORY_LABELS[c]).replace(' ', '&nbsp;')}" for c in cats]
        if self.critical_path_shown and self._critical_item is not None:
            chips.append(f"<span style='color:{CRITICAL_PEN}; font-size:14px'>□</span>&nbsp;"
                         "<b>critical&nbsp;path</b>")
        self.legend.setText("&nbsp;&nbsp; ".join(chips))
