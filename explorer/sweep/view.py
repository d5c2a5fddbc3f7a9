"""The Sweep dock: one setting of the scenario swept over values, side by side.

The table gives each value's predicted iteration, throughput (samples/s, the batch over
the iteration), the gap to the best, device-active share and exposed communication; a
value that cannot run says why.  Beside it, throughput against the value: a line over
batch sizes (log scale), or over platforms, dtypes and optimizers a horizontal bar per
value named on the left axis; the selected value marked.  "Export CSV…" and "Copy" take
the table out of the app.
"""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QComboBox, QLineEdit, QPushButton, QWidget

from predictors.plan.sweep import SWEEPABLE

from ..run.results_dock import ResultsView, memory_text

__all__ = ["SweepView", "COLUMNS"]

COLUMNS = ("#", "Value", "Iteration (ms)", "Samples/s", "vs best", "Device active",
           "Exposed comm (ms)", "Peak memory", "Ranks")
COLUMN_TIPS = ("Order of the values", "The value of the swept setting",
               "Predicted iteration time of the slowest rank",
               "Throughput: the global batch over the iteration",
               "Throughput against the best value's",
               "Busy share of the slowest rank's device streams",
               "Communication of the slowest rank that no kernel overlaps",
               "Allocated device memory at the step's peak, on the rank that needs most; a "
               "value that does not fit is not picked as the best",
               "Ranks the platform runs")
EMPTY_TEXT = ("Run ▸ Sweep predicts the scenario once per value of one setting (batch size, "
              "platform, dtype, optimizer or input pipeline) and compares the iterations, "
              "throughput and peak memory here. Pick the setting and the values, then Sweep.")
LABELS = {"batch_size": "batch size", "platform": "platform", "dtype": "dtype",
          "optimizer": "optimizer", "input_pipeline": "input pipeline"}
ACCENT = "#4e79a7"


def tick_text(value, limit: int = 16) -> str:
    """A categorical value as an axis tick: its name, elided past ``limit`` characters."""
    text = str(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def none_text(result) -> str:
    """Why a sweep has no best value: nothing ran, or nothing that ran fits."""
    if any(not r.error for r in result.rows):
        return "none fits the device's memory"
    return "none can run"


class SweepView(ResultsView):
    """A :class:`~predictors.plan.sweep.SweepResult` as a table and a throughput chart.

    Signals
    -------
    sigParamChanged(str)   the user picked another setting to sweep
    sigFitRequested()      sweep batch sizes up to the largest that fits the GPUs
    """

    sigParamChanged = Signal(str)
    sigFitRequested = Signal()

    def __init__(self, parent: QWidget | None = None):
        self.param_box = QComboBox()
        for name in SWEEPABLE:
            self.param_box.addItem(LABELS.get(name, name), name)
        self.param_box.setToolTip("The setting to sweep")
        self.values_edit = QLineEdit()
        self.values_edit.setMinimumWidth(150)
        self.values_edit.setToolTip("Values, separated by commas")
        self.fit_button = QPushButton("Up to What Fits")
        self.fit_button.setToolTip("Find the largest batch whose step fits every GPU's "
                                   "memory, then sweep batch sizes up to it")
        super().__init__(COLUMNS, COLUMN_TIPS, EMPTY_TEXT,
                         ("Sweep", "Predict the scenario for each value (Run ▸ Sweep)"),
                         ("Apply Value", "Set the selected value in the scenario (undoable)"),
                         controls=(self.param_box, self.values_edit, self.fit_button),
                         parent=parent)
        self.fit_button.clicked.connect(self.sigFitRequested)
        # the intro and the sweep's summary in the theme's secondary text colour
        self.header.setStyleSheet("")
        self.header.setForegroundRole(QPalette.PlaceholderText)
        self.plot.setLabel("left", "samples/s")
        self.param_box.currentIndexChanged.connect(self._on_param_box)
        self.values_edit.returnPressed.connect(self.sigRunRequested)

    def changeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().changeEvent(event)
        if event.type() == QEvent.PaletteChange and getattr(self, "shown", None) is not None:
            self.draw(self.selected())   # the theme changed: the title's colour

    def _on_param_box(self, _index: int) -> None:
        self.fit_button.setVisible(self.param() == "batch_size")
        self.sigParamChanged.emit(self.param())

    def param(self) -> str:
        return self.param_box.currentData()

    def set_values(self, values: list) -> None:
        self.values_edit.setText(", ".join(str(v) for v in values))

    def header_text(self) -> str:
        r = self.shown
        best = r.best()
        text = (f"{LABELS.get(r.param, r.param)} of {r.scenario_name or 'this scenario'}: "
                f"{len(r.rows)} value(s)"
                + (f", fastest {best.value} at {best.records_per_s:,.0f} samples/s."
                   if best is not None else f", {none_text(r)}."))
        if self.stale:
            text = "Out of date (the scenario changed): sweep again. " + text
        return text

    def export_name(self) -> str:
        r = self.shown
        if r is None:
            return "sweep"
        return f"{r.scenario_name or 'scenario'}-sweep-{r.param}"

    def set_sweep(self, result) -> None:
        """Show a :class:`~predictors.plan.sweep.SweepResult`."""
        best = result.best()
        # the gap to the best value that fits; to the fastest that ran when none fits
        ran = [r.records_per_s for r in result.rows if r.records_per_s]
        top = best.records_per_s if best is not None else max(ran, default=0.0)
        rows, tips = [], []
        for i, r in enumerate(result.rows):
            if r.error:
                rows.append([str(i + 1), str(r.value), "–", "–", "cannot run", "–", "–", "–",
                             "–"])
                tips.append(r.error)
                continue
            share = r.device_active_ms / r.iteration_ms if r.iteration_ms else 0.0
            rows.append([str(i + 1), str(r.value), f"{r.iteration_ms:.3f}",
                         f"{r.records_per_s:,.0f}",
                         "best" if r is best else (
                             f"{100 * (r.records_per_s / top - 1):+.1f} %" if top else "–"),
                         f"{100 * share:.0f} %", f"{r.exposed_comm_ms:.3f}",
                         memory_text(r.peak_memory_bytes, r.fits), str(r.ranks)])
            tips.append(f"{result.param} = {r.value}" + (
                "; does not fit the device's memory" if r.fits is False else ""))
        errors = [f"{r.value}: {r.error}" for r in result.rows if r.error]
        self.show_rows(result, result.rows, rows, tips,
                       ("Cannot run: " + "; ".join(errors)) if errors else "",
                       select=result.rows.index(best) if best is not None else None)

    def can_apply(self, row) -> bool:
        return not row.error

    def mark_applied(self, value) -> None:
        """Tag the value the scenario uses now."""
        self._applied = value
        for i, row in enumerate(self.results):
            item = self.table.item(self.row_of(i), 1)
            if item is not None:
                item.setText(str(row.value) + ("  ✓ current" if row.value == value else ""))

    def after_sort(self) -> None:
        if hasattr(self, "_applied"):
            self.mark_applied(self._applied)

    def draw(self, selected) -> None:
        """Throughput per value; the selected one highlighted.  Batch sizes are a line
        over a log axis; other values (platforms, dtypes, optimizers) are horizontal bars,
        each named on the left axis, so long names never run into each other."""
        self.clear_plot()
        result = self.shown
        ok = [(i, r) for i, r in enumerate(result.rows) if not r.error] if result else []
        left, bottom = self.plot.getAxis("left"), self.plot.getAxis("bottom")
        if not ok:
            self.plot.setTitle("")
            return
        ys = np.array([r.records_per_s for _, r in ok])
        numeric = result.param == "batch_size"
        label = LABELS.get(result.param, result.param)
        k = (next(j for j, (_, r) in enumerate(ok) if r is selected)
             if selected is not None and not selected.error else None)
        mark = dict(symbol="o", size=13, pen=pg.mkPen("#d32f2f", width=2), brush=None)
        if numeric:
            xs = np.array([math.log2(r.value) for _, r in ok])
            self.plot.getPlotItem().invertY(False)
            self.add_plot_item(pg.PlotDataItem(xs, ys, pen=pg.mkPen(ACCENT, width=2),
                                               symbol="o", symbolBrush=ACCENT, symbolSize=7))
            if k is not None:
                self.add_plot_item(pg.ScatterPlotItem(x=[xs[k]], y=[ys[k]], **mark))
            left.setTicks(None)
            bottom.setTicks([[(x, str(r.value)) for x, (_, r) in zip(xs, ok)]])
            self.plot.setLabel("left", "samples/s")
            self.plot.setLabel("bottom", label)
            pad = 0.5 if len(xs) > 1 else 1.0
            self.plot.setXRange(float(xs.min()) - pad, float(xs.max()) + pad, padding=0)
            self.plot.setYRange(0, float(ys.max()) * 1.15, padding=0)
        else:
            rows = np.arange(len(ok), dtype=float)   # the first value on top
            self.plot.getPlotItem().invertY(True)
            self.add_plot_item(pg.BarGraphItem(x0=0, y=rows, height=0.6, width=ys,
                                               brush=ACCENT))
            if k is not None:
                self.add_plot_item(pg.ScatterPlotItem(x=[ys[k]], y=[rows[k]], **mark))
            left.setTicks([[(float(j), tick_text(r.value)) for j, (_, r) in enumerate(ok)]])
            bottom.setTicks(None)
            self.plot.setLabel("left", label)
            self.plot.setLabel("bottom", "samples/s")
            self.plot.setYRange(-0.6, len(ok) - 0.4, padding=0)
            self.plot.setXRange(0, float(ys.max()) * 1.15, padding=0)
        self.plot.setTitle("throughput by " + label, size="9pt",
                           color=self.palette().color(QPalette.WindowText))   # the theme's
