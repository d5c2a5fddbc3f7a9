"""The Compare dock: the predicted timeline above the recorded one on a linked time axis,
the headline figures, and a table of the largest differences per op class and per lane,
which "Export CSV…" and "Copy" take out of the app."""
from __future__ import annotations

import html
import os

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QColor, QFont, QPalette
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from predictors.traces.compare import Comparison, compare_timelines
from predictors.utils.formatting import format_bytes

from ..timeline.colors import CATEGORY_COLORS, CATEGORY_LABELS
from ..timeline.gantt import GanttWidget
from ..widgets import EXPORT_ROLE, ElidedLabel, ErrorBar, TableExport, read_only_table, stacked
from .align import aligned_on_step

__all__ = ["CompareView"]

_CAPTION = ("QLabel#compareCaption {{ color: {text}; font-weight: 600; padding: 3px 6px;"
            " background: {band}; border-left: 3px solid {edge}; }}")
_FIGURE = ("<span style='color:{muted}'>{cap}</span><br>"
           "<span style='font-size:16px; font-weight:600; color:{col}'>{val}</span>")


# text colours on a light and on a dark palette (the theme's, View ▸ Theme)
_LIGHT = {"text": "#1f2d3d", "muted": "#667", "band": "#eef2f7", "busy": "#445",
          "good": "#2e7d32", "bad": "#c62828", "more": "#1565c0", "warn": "#b45309"}
_DARK = {"text": "#e3e7ec", "muted": "#9aa4af", "band": "#353b43", "busy": "#b9c0c8",
         "good": "#6cc070", "bad": "#f0625f", "more": "#6aaaf0", "warn": "#f0a64a"}


def _tones(widget: QWidget) -> dict:
    dark = widget.palette().color(QPalette.Window).lightness() < 128
    return _DARK if dark else _LIGHT


def _ms(v: float) -> str:
    return f"{v:.3f} ms" if abs(v) < 1000 else f"{v / 1e3:.3f} s"


def _pct(v) -> str:
    return "–" if v is None else f"{v:+.1f}%"


class CompareView(QWidget):
    """Prediction and recording, stacked, with a linked time axis.

    Signals
    -------
    sigImportRequested()   the user asked to pick trace files
    sigCancelRequested()   the user cancelled a load in progress
    """

    sigImportRequested = Signal()
    sigCancelRequested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.prediction = None
        self.recording = None
        self.comparison: Comparison | None = None

        self.figures = QLabel(self)
        self.figures.setObjectName("compareFigures")
        self.figures.setTextFormat(Qt.RichText)
        self.figures.setWordWrap(True)  # long notes wrap rather than widen the window
        self.import_button = QPushButton("Import Trace…", self)
        self.import_button.setToolTip("Load Kineto traces (several files: the ranks of one "
                                      "job); or drop them on the window")
        self.import_button.clicked.connect(self.sigImportRequested)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 1000)
        self.progress.setMaximumWidth(200)
        self.progress_label = ElidedLabel("", self, Qt.ElideRight)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.clicked.connect(self.sigCancelRequested)
        top = QHBoxLayout()
        top.setContentsMargins(4, 2, 4, 2)
        top.addWidget(self.figures, 1)
        top.addWidget(self.progress_label)
        top.addWidget(self.progress)
        top.addWidget(self.cancel_button)
        top.addWidget(self.import_button)
        self.error = ErrorBar(self)

        self.predicted = GanttWidget(self)
        self.recorded = GanttWidget(self)
        self.recorded._empty.setText("Import a recorded trace (File ▸ Import Trace…) or drop "
                                     "trace files here")
        self.recorded.vb.setXLink(self.predicted.vb)
        self._x_limits: tuple[float, float] | None = None   # shared by both panes
        self._aligned_ranks = 0   # recorded ranks moved by their own step
        for gantt in (self.predicted, self.recorded):
            gantt.sigRedrawn.connect(self._align_panes)
        self.predicted_caption = self._caption("Predicted", CATEGORY_COLORS["gemm"])
        self.recorded_caption = self._caption("Recorded", CATEGORY_COLORS["communication"])
        stack = QSplitter(Qt.Vertical, self)
        for cap, gantt in ((self.predicted_caption, self.predicted),
                           (self.recorded_caption, self.recorded)):
            stack.addWidget(stacked(cap, gantt, stack))

        self.table = read_only_table(["Where", "Predicted", "Recorded", "Δ", "Error"], self)
        # "Where" keeps a readable width (long lane pairs elide; the tooltip has them) and the
        # figures their own; a dock narrower than that scrolls sideways, squeezing nothing
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.Interactive)
        header.resizeSection(0, 150)
        self.table_caption = self._caption("Largest differences", "#888")
        self.export = TableExport(self.table, self.export_name,
                                  lambda message: self.error.show_error(message, kind="file"),
                                  self)
        caption_row = QHBoxLayout()
        caption_row.setContentsMargins(0, 0, 0, 0)
        caption_row.setSpacing(2)
        caption_row.addWidget(self.table_caption, 1)
        for b in self.export.buttons():
            caption_row.addWidget(b)
        side = QWidget(self)
        sbox = QVBoxLayout(side)
        sbox.setContentsMargins(0, 0, 0, 0)
        sbox.setSpacing(0)
        sbox.addLayout(caption_row)
        sbox.addWidget(self.table, 1)

        split = QSplitter(Qt.Horizontal, self)
        split.addWidget(stack)
        split.addWidget(side)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)
        split.setSizes([900, 450])
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(2)
        box.addLayout(top)
        box.addWidget(self.error)
        box.addWidget(split, 1)
        self.set_loading(False)
        self._apply_tones()

    def _caption(self, text: str, color: str) -> ElidedLabel:
        # elided, never wider than the dock: the whole text is in the tooltip
        label = ElidedLabel(text, self)
        label.setObjectName("compareCaption")
        label.setProperty("edge", color)
        return label

    def _apply_tones(self) -> None:
        """Text colours for the palette in use (light or dark)."""
        t = _tones(self)
        for label in (self.predicted_caption, self.recorded_caption, self.table_caption):
            label.setStyleSheet(_CAPTION.format(edge=label.property("edge"), **t))
        self.progress_label.setStyleSheet(f"color: {t['busy']};")
        self._update_figures()
        self._fill_table()

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.PaletteChange:   # the theme changed
            self._apply_tones()

    # --- public API ---------------------------------------------------------------------

    def set_prediction(self, prediction) -> None:
        """Show a :class:`~predictors.engine.predict.Prediction` (``None`` clears)."""
        self.prediction = prediction
        self._refresh()

    def set_recording(self, recording) -> None:
        """Show a :class:`~predictors.traces.Recording` (``None`` clears)."""
        self.recording = recording
        self.error.clear()
        self._refresh()

    def recorded_timeline(self):
        """The recorded Timeline as loaded (its own clock), or None."""
        return None if self.recording is None else self.recording.timeline

    def set_loading(self, busy: bool, text: str = "") -> None:
        for w in (self.progress, self.cancel_button, self.progress_label):
            w.setVisible(busy)
        self.progress_label.setText(text)
        if busy:
            self.progress.setValue(0)

    def set_progress(self, fraction: float, stage: str) -> None:
        self.progress.setValue(int(1000 * max(0.0, min(1.0, fraction))))
        self.progress_label.setText(stage)

    def show_error(self, message: str) -> None:
        self.error.show_error(message)

    def set_stale(self, stale: bool) -> None:
        self.predicted.set_stale(stale)

    def export_name(self) -> str:
        name = getattr(self.prediction, "scenario_name", "") or "scenario"
        return f"{name}-compare"

    # --- internals ----------------------------------------------------------------------

    def _refresh(self) -> None:
        pred_tl = None if self.prediction is None else self.prediction.timeline
        rec_tl = self.recorded_timeline()
        self.comparison = None
        self._aligned_ranks = 0
        self._x_limits = None
        rec_end = None
        if pred_tl is not None and rec_tl is not None and len(rec_tl):
            c = self.comparison = compare_timelines(pred_tl, rec_tl)
            p0 = pred_tl.begin_us if len(pred_tl) else 0.0
            rec_tl, self._aligned_ranks = aligned_on_step(rec_tl, c.recorded_step, p0,
                                                          c.offset_us)
            ends = [s.end_us for s in rec_tl.steps if s.name == c.recorded_step]
            rec_end = max(ends) / 1e3 if ends else p0 / 1e3 + c.recorded_ms
        elif rec_tl is not None and len(rec_tl):
            rec_tl = rec_tl.shifted(-rec_tl.begin_us)
        if rec_tl is not None:
            # Threads, streams and memory: annotation rows have no counterpart in a
            # prediction.
            rec_tl = rec_tl.with_lanes([i for i, l in enumerate(rec_tl.lanes)
                                        if l.kind in ("cpu", "stream", "counter")])
            if rec_end is None and len(rec_tl):
                rec_end = rec_tl.end_us / 1e3
        self.predicted.set_timeline(pred_tl)
        self.recorded.set_timeline(rec_tl)
        # The link makes both views follow one range: show the predicted iteration and the
        # recorded one it is compared with (its longest rank), from 0.
        ends = [0.0]
        if pred_tl is not None and len(pred_tl):
            ends.append(pred_tl.end_us / 1e3)
        if rec_end is not None:
            ends.append(rec_end)
        if len(ends) > 1:
            self._x_limits = (-0.5 * max(ends), 2.0 * max(ends) + 1e-3)
            self._align_panes()
            self.predicted.vb.setXRange(-0.01 * max(ends), max(ends) * 1.01, padding=0)
        self._update_captions()
        self._update_figures()
        self._fill_table()

    def _align_panes(self) -> None:
        """One lane-name width and one time limit for both panes, so that equal times sit
        at the same x; reapplied whenever either pane redraws (a new timeline, a fold)."""
        axes = [g.lane_axis for g in (self.predicted, self.recorded)]
        width = max(a.natural_width for a in axes)
        for a in axes:
            a.set_min_width(width)
        if self._x_limits is not None:
            x0, x1 = self._x_limits
            for g in (self.predicted, self.recorded):
                g.vb.setLimits(xMin=x0, xMax=x1)

    def _update_captions(self) -> None:
        p = self.prediction
        self.predicted_caption.setText(
            "Predicted" if p is None else
            f"Predicted — {p.scenario_name} on {p.platform} ({p.device})")
        r = self.recording
        if r is None:
            self.recorded_caption.setText("Recorded — no trace loaded")
            return
        files = [os.path.basename(f) for f in r.files]
        what = files[0] if len(files) == 1 else f"{len(files)} ranks ({files[0]} …)"
        step = ""
        if self.comparison is not None:
            own = "each rank aligned on its own" if self._aligned_ranks > 1 else "aligned on"
            step = f" · {own} {self.comparison.recorded_step}"
        self.recorded_caption.setText(f"Recorded — {what} ({r.timeline.meta.get('device')})"
                                      f"{step}")

    def _update_figures(self) -> None:
        c, t = self.comparison, _tones(self)

        def fig(cap: str, val: str, col: str = t["text"]) -> str:
            return _FIGURE.format(cap=cap, val=val, col=col, muted=t["muted"])

        if c is None:
            hint = ("Predict a scenario and import a trace recorded from it to compare them."
                    if self.recording is None else
                    "Waiting for a prediction to compare with.")
            self.figures.setText(f"<span style='color:{t['muted']}'>{html.escape(hint)}</span>")
            return
        err = c.error_pct
        col = t["good"] if err is not None and abs(err) <= 10 else t["bad"]
        cells = [fig("predicted iteration", _ms(c.predicted_ms)),
                 fig(f"recorded ({html.escape(c.recorded_step)})", _ms(c.recorded_ms))]
        tip = ""
        if c.unprofiled_ms:   # measure --trace: the step as it runs without the profiler
            cells.append(fig("measured without profiler", _ms(c.unprofiled_ms)))
            runs = (self.recording.timeline.meta.get("unprofiled") or {}).get("iterations")
            tip = (f"The trace carries the median of {runs or 'several'} untraced steps of "
                   f"the same run (measure --trace). The profiler made the recorded step "
                   f"{c.profiler_cost_pct:+.0f} % longer, and every recorded op with it; "
                   f"the error is against the untraced median.")
        self.figures.setToolTip(tip)
        cells += [fig("error vs measured" if c.unprofiled_ms else "error", _pct(err), col),
                  fig("device active, predicted / recorded",
                      f"{_ms(c.predicted_active_ms)} / {_ms(c.recorded_active_ms)}")]
        m = c.memory
        if m is not None:   # peaks where the recording's counter is absolute (CUDA)
            peak = "recorded_peak_bytes" in m
            what, p, r = (("peak", m["predicted_peak_bytes"], m["recorded_peak_bytes"])
                          if peak else ("swing", m["predicted_swing_bytes"],
                                        m["recorded_swing_bytes"]))
            cells.append(fig(f"memory {what}, predicted / recorded",
                             f"{format_bytes(p)} / {format_bytes(r)}"))
        notes = "".join(f"<div style='color:{t['warn']}'>⚠ {html.escape(n)}</div>"
                        for n in c.notes)
        self.figures.setText("<table cellspacing='0' cellpadding='0'><tr>" + "".join(
            f"<td style='padding-right:26px'>{x}</td>" for x in cells) + "</tr></table>"
            + notes)

    def _fill_table(self) -> None:
        rows = [] if self.comparison is None else self.comparison.rows[2:]
        t = _tones(self)
        self.table.setRowCount(len(rows))
        bold = QFont()
        bold.setBold(True)
        for i, row in enumerate(rows):
            if row["group"] == "op class":
                label = CATEGORY_LABELS.get(row["key"], row["key"])
                where = QTableWidgetItem(f"■  {label}")
                where.setForeground(QColor(CATEGORY_COLORS.get(row["key"], "#888")))
                where.setToolTip(f"op class {label}: summed device time")
                where.setData(EXPORT_ROLE, label)
            else:
                where = QTableWidgetItem(f"☰  {row['key']}")
                where.setToolTip(f"{row['key']}: lane busy time (predicted ↔ recorded)")
                where.setData(EXPORT_ROLE, str(row["key"]))
            self.table.setItem(i, 0, where)
            for j, v in enumerate((row["predicted_ms"], row["recorded_ms"])):
                item = QTableWidgetItem(_ms(v))
                item.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
                self.table.setItem(i, 1 + j, item)
            d = QTableWidgetItem(f"{row['diff_ms']:+.3f} ms")
            d.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
            d.setForeground(QColor(t["bad"] if row["diff_ms"] < 0 else t["more"]))
            self.table.setItem(i, 3, d)
            e = QTableWidgetItem(_pct(row["error_pct"]))
            e.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
            if row["error_pct"] is not None and abs(row["error_pct"]) > 25:
                e.setFont(bold)
            self.table.setItem(i, 4, e)
