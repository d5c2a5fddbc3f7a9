"""The totals per op of a selected time range, as Perfetto lists them under a drag: each
op's count and the time it ran inside the range (bars cut at its edges), on the CPU and on
the device apart, largest first.  The table sits under the timeline while a range is
selected; "Export CSV…" and "Copy" take it out of the app."""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QSplitter,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from predictors.engine.timeline import CATEGORIES

from ..widgets import EXPORT_ROLE, ErrorBar, TableExport, read_only_table
from .colors import CATEGORY_COLORS, CATEGORY_LABELS
from .range_selection import format_duration

__all__ = ["range_totals", "RangeTotals", "with_range_totals"]

# link lanes repeat the collectives of the streams: counted once, on the streams
_WHERE = {"cpu": "CPU", "stream": "device"}
COLUMNS = ["op", "category", "on", "count", "total (ms)", "share of range"]


def range_totals(timeline, t0_ms: float, t1_ms: float) -> list[dict]:
    """Per (op name, category, CPU or device): the events that overlap ``[t0, t1]`` and
    the milliseconds they spend inside it, largest first.  Idle gaps, zero-length views,
    memory counters, link lanes and annotations are left out."""
    if timeline is None or not len(timeline) or t1_ms <= t0_ms:
        return []
    t0, t1 = t0_ms * 1e3, t1_ms * 1e3
    start, end = timeline.start_us, timeline.start_us + timeline.dur_us
    where = np.array([_WHERE.get(lane.kind, "") for lane in timeline.lanes] or [""])
    on = where[timeline.lane]
    idle = CATEGORIES.index("idle") if "idle" in CATEGORIES else -1
    inside = np.minimum(end, t1) - np.maximum(start, t0)
    sel = np.flatnonzero((inside > 0) & (on != "") & (timeline.category != idle))
    if not len(sel):
        return []
    keys = np.stack([timeline.name_id[sel].astype(np.int64),
                     timeline.category[sel].astype(np.int64),
                     (on[sel] == "device").astype(np.int64)], axis=1)
    uniq, group = np.unique(keys, axis=0, return_inverse=True)
    group = group.ravel()
    total = np.bincount(group, weights=inside[sel], minlength=len(uniq))
    count = np.bincount(group, minlength=len(uniq))
    rows = [{"name": timeline.names[int(name)], "category": CATEGORIES[int(cat)],
             "on": "device" if dev else "CPU", "count": int(count[k]),
             "total_ms": float(total[k]) / 1e3, "share": float(total[k]) / (t1 - t0)}
            for k, (name, cat, dev) in enumerate(uniq)]
    rows.sort(key=lambda r: (-r["total_ms"], r["name"]))
    return rows


class RangeTotals(QWidget):
    """The table of :func:`range_totals` for the range selected on ``gantt``; hidden while
    no range is selected."""

    def __init__(self, gantt, parent: QWidget | None = None):
        super().__init__(parent)
        self.gantt = gantt
        self.rows: list[dict] = []
        self.caption = QLabel("", self)
        self.caption.setStyleSheet("font-weight: 600; padding: 2px 4px;")
        self.table = read_only_table(COLUMNS, self)
        self.error = ErrorBar(self)
        self.export = TableExport(self.table, self.export_name,
                                  lambda message: self.error.show_error(message, kind="file"),
                                  self)
        head = QHBoxLayout()
        head.setContentsMargins(0, 0, 0, 0)
        head.addWidget(self.caption, 1)
        for b in self.export.buttons():
            head.addWidget(b)
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(2)
        box.addLayout(head)
        box.addWidget(self.error)
        box.addWidget(self.table, 1)
        gantt.sigTimeRangeSelected.connect(self.show_range)
        self.hide()

    def export_name(self) -> str:
        title = getattr(self.gantt.timeline, "title", "") or "timeline"
        return f"{title}-range-totals"

    def show_range(self, rng) -> None:
        """Fill the table for ``(t0_ms, t1_ms)``; ``None`` hides it."""
        if rng is None or self.gantt.timeline is None:
            self.rows = []
            self.table.setRowCount(0)
            self.hide()
            return
        t0, t1 = rng
        self.rows = range_totals(self.gantt.timeline, t0, t1)
        self.caption.setText(f"Ops in {t0:.3f} – {t1:.3f} ms ({format_duration(t1 - t0)}): "
                             f"{len(self.rows)} op(s), largest first")
        self.table.setSortingEnabled(False)
        self.table.setRowCount(len(self.rows))
        for r, row in enumerate(self.rows):
            label = CATEGORY_LABELS.get(row["category"], row["category"])
            cells = [row["name"], label, row["on"], f"{row['count']:,}",
                     f"{row['total_ms']:.3f}", f"{100 * row['share']:.1f} %"]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c >= 3:
                    item.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
                if c == 0:
                    item.setToolTip(row["name"])
                if c == 1:
                    item.setForeground(QColor(CATEGORY_COLORS.get(row["category"], "#888")))
                    item.setData(EXPORT_ROLE, label)
                self.table.setItem(r, c, item)
        self.show()


def with_range_totals(gantt, parent: QWidget | None = None) -> tuple[QWidget, RangeTotals]:
    """``gantt`` above its :class:`RangeTotals` (in a splitter), and the totals."""
    split = QSplitter(Qt.Vertical, parent)
    split.addWidget(gantt)
    totals = RangeTotals(gantt, split)
    split.addWidget(totals)
    split.setStretchFactor(0, 3)
    split.setStretchFactor(1, 1)
    split.setChildrenCollapsible(False)
    return split, totals
