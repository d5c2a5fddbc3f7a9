"""The Summary dock: headline numbers of a prediction and its most expensive ops, which
"Export CSV…" and "Copy" take out of the app."""
from __future__ import annotations

import html

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QColor, QIcon, QPalette, QPixmap
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from predictors.engine.uncertainty import range_remark
from predictors.utils.formatting import format_bytes

from ..timeline.colors import CATEGORY_COLORS, CATEGORY_LABELS
from ..widgets import ErrorBar, FlowLayout, TableExport, WrappingLabel, read_only_table

__all__ = ["SummaryPanel", "device_active_fraction"]


def device_active_fraction(prediction) -> float | None:
    """Mean over ranks of device busy time / iteration time (None when unknown)."""
    rows = [r for r in (prediction.per_rank or []) if r.get("iteration_ms")]
    if not rows:
        return None
    return sum(r.get("device_active_ms", 0.0) / r["iteration_ms"] for r in rows) / len(rows)


def _swatch(color: str) -> QIcon:
    pm = QPixmap(10, 10)
    pm.fill(QColor(color))
    return QIcon(pm)


VALUE_STYLE = "font-size: 17px; font-weight: 600; border: none; color: {};"
CAPTION_STYLE = "border: none; color: {};"
CARD_STYLE = ("#summaryFigure {{ background: {}; border: 1px solid {};"
              " border-radius: 4px; }}")
OVER_COLOR = "#c0392b"   # a step that does not fit its device's memory


def css(color: QColor) -> str:
    """``color`` for a style sheet, its alpha kept (placeholder text is translucent)."""
    return f"rgba({color.red()}, {color.green()}, {color.blue()}, {color.alpha()})"


def tones(palette: QPalette, stale: bool) -> dict[str, str]:
    """Text and card colours from ``palette`` (light or dark theme); greyed out while a
    newer prediction is on its way."""
    if stale:
        grey = css(palette.color(QPalette.Disabled, QPalette.Text))
        text = muted = grey
    else:
        text = css(palette.color(QPalette.Text))
        muted = css(palette.color(QPalette.PlaceholderText))
    return {"value": text, "caption": muted, "text": text,
            "card": css(palette.color(QPalette.AlternateBase)),
            "edge": css(palette.color(QPalette.Midlight))}


class _Figure(QFrame):
    """A headline number with its caption."""

    def __init__(self, caption: str, parent=None):
        super().__init__(parent)
        self.setObjectName("summaryFigure")
        self.palette_ = QPalette(self.palette())   # the theme's; set by the panel
        self.value = QLabel("–", self)
        self.caption = QLabel(caption, self)
        for label in (self.value, self.caption):
            label.setTextFormat(Qt.PlainText)   # names shown as written
        # One line each: in a narrow dock the figures wrap onto more rows (FlowLayout)
        box = QVBoxLayout(self)
        box.setContentsMargins(10, 6, 10, 6)
        box.setSpacing(0)
        box.addWidget(self.value)
        box.addWidget(self.caption)
        self.stale = False
        self.alert = False   # the value in red: a figure that means trouble
        self.tip = ""
        self._restyle()

    def set_stale(self, stale: bool) -> None:
        """Grey the number out; the style sheets' colours win over a disabled palette, so
        the colours themselves change."""
        self.stale = bool(stale)
        self._restyle()

    def set_alert(self, alert: bool) -> None:
        self.alert = bool(alert)
        self._restyle()

    def set_tip(self, tip: str) -> None:
        """The tooltip of a fresh figure (a stale one says why it is grey instead)."""
        self.tip = tip
        self._restyle()

    def set_palette(self, palette: QPalette) -> None:
        """Take the card's and the text's colours from ``palette`` (the theme's)."""
        self.palette_ = QPalette(palette)
        self._restyle()

    def _restyle(self) -> None:
        t = tones(self.palette_, self.stale)
        value = OVER_COLOR if self.alert and not self.stale else t["value"]
        self.setStyleSheet(CARD_STYLE.format(t["card"], t["edge"]))
        self.value.setStyleSheet(VALUE_STYLE.format(value))
        self.caption.setStyleSheet(CAPTION_STYLE.format(t["caption"]))
        self.setToolTip("Out of date: a new prediction is on its way" if self.stale
                        else self.tip)


class SummaryPanel(QWidget):
    """Iteration time, device active share, op count, notes and a top-ops table."""

    COLUMNS = ("op", "category", "total (ms)", "count", "share")

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.prediction = None
        self.iteration = _Figure("iteration (slowest rank)")
        self.active = _Figure("device active")
        self.comm = _Figure("exposed comm")
        self.memory = _Figure("peak memory")
        self.ops = _Figure("ops")
        self.where = _Figure("platform")
        figures = FlowLayout(spacing=8)  # wraps onto a second row in a narrow dock
        for f in self.figures():
            figures.addWidget(f)
        self.verdict = WrappingLabel("", self)   # what bounds the step; what-ifs on hover
        self.verdict.setObjectName("summaryVerdict")
        self.verdict.setTextFormat(Qt.PlainText)   # shown as written: no entities
        self.verdict.setStyleSheet("font-weight: bold;")
        self.notes = WrappingLabel("", self)
        self.notes.setObjectName("summaryNotes")
        self.notes.setTextFormat(Qt.RichText)
        self.table = read_only_table(list(self.COLUMNS), self)
        self.error = ErrorBar(self)
        self.export = TableExport(self.table, self.export_name,
                                  lambda message: self.error.show_error(message, kind="file"),
                                  self)
        under = QHBoxLayout()
        under.addWidget(self.notes, 1)
        for b in self.export.buttons():
            under.addWidget(b, 0, Qt.AlignBottom)
        inner = QWidget(self)
        box = QVBoxLayout(inner)
        box.setContentsMargins(6, 6, 6, 6)
        box.addLayout(figures)
        box.addWidget(self.verdict)
        box.addLayout(under)
        box.addWidget(self.error)
        box.addWidget(self.table, 1)
        # A dock too short for the wrapped figures and the notes scrolls; it never draws
        # one over the other, nor makes the window taller than the screen.
        scroll = QScrollArea(self)
        scroll.setFrameShape(QFrame.NoFrame)
        scroll.setWidgetResizable(True)
        scroll.setWidget(inner)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)
        self.clear()

    def clear(self) -> None:
        """Back to the empty state."""
        self.prediction = None
        for f in self.figures():
            f.value.setText("–")
            f.set_tip("")
            f.set_alert(False)
        self.memory.caption.setText("peak memory")
        self.ops.caption.setText("ops")
        self.where.caption.setText("platform")
        self.iteration.caption.setText("iteration (slowest rank)")
        self.verdict.setText("")
        self.verdict.setToolTip("")
        self.notes.setText("No prediction yet.")
        self.table.setRowCount(0)
        self.set_stale(False)

    def export_name(self) -> str:
        name = getattr(self.prediction, "scenario_name", "") or "scenario"
        return f"{name}-top-ops"

    def set_stale(self, stale: bool) -> None:
        """Grey the figures, notes and table while a newer prediction is on its way."""
        stale = bool(stale)
        self.setProperty("stale", stale)
        for f in self.figures():
            f.set_stale(stale)
            f.setEnabled(not stale)
        self.table.setEnabled(not stale)
        self._retone()

    def _retone(self) -> None:
        """Text and card colours from the palette (the theme's) and the staleness."""
        palette = self.palette()
        t = tones(palette, self.is_stale())
        for f in self.figures():
            f.set_palette(palette)
        self.notes.setStyleSheet(f"color: {t['text']};")
        self.verdict.setStyleSheet(f"font-weight: bold; color: {t['text']};")

    def changeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().changeEvent(event)
        if event.type() == QEvent.PaletteChange and hasattr(self, "verdict"):
            self._retone()   # the theme changed

    def is_stale(self) -> bool:
        return bool(self.property("stale"))

    def figures(self) -> tuple:
        """The headline figures: iteration, device active, exposed communication, peak
        memory, ops, platform."""
        return (self.iteration, self.active, self.comm, self.memory, self.ops, self.where)

    def set_prediction(self, prediction) -> None:
        """Show ``prediction`` (a :class:`predictors.engine.predict.Prediction`)."""
        self.prediction = prediction
        self.iteration.value.setText(f"{prediction.iteration_ms:.3f} ms")
        low = getattr(prediction, "iteration_ms_low", None)
        high = getattr(prediction, "iteration_ms_high", None)
        remark = range_remark(prediction.iteration_ms, low, high)
        self.iteration.caption.setText(
            "iteration (slowest rank)" if low is None else
            f"iteration · 80 % range {low:.3g}–{high:.3g} ms"
            + (f" ({remark})" if remark else ""))
        self.iteration.set_tip("" if low is None else
                               "80 % of measured steps of this kind of prediction fell in "
                               "this range (see the notes for the validation it comes from)")
        verdict = getattr(prediction, "verdict", None) or {}
        self.verdict.setText(verdict.get("text", ""))
        self.verdict.setToolTip("What would move it:\n" + "\n".join(
            f"• {w}" for w in verdict.get("what_if", [])) if verdict.get("what_if") else "")
        frac = device_active_fraction(prediction)
        self.active.value.setText("–" if frac is None else f"{100 * frac:.0f} %")
        ranks = len(prediction.per_rank or [])
        slowest = max(prediction.per_rank or [{}], key=lambda r: r.get("iteration_ms", 0.0))
        comm = slowest.get("exposed_comm_ms")
        self.comm.value.setText("–" if ranks < 2 or comm is None else f"{comm:.3f} ms")
        self.comm.set_tip("Communication on the slowest rank that no kernel overlaps "
                             "(waiting for peers included)" if ranks > 1
                             else "One rank: no collectives")
        self._show_memory(prediction.per_rank or [])
        self.ops.value.setText(f"{prediction.num_ops:,}")
        self.ops.caption.setText(f"ops · {len(prediction.timeline):,} events")
        self.where.value.setText(str(prediction.platform))
        self.where.caption.setText(f"{prediction.device} · {ranks} rank{'s' * (ranks != 1)}")
        notes = [f"<span style='color:{OVER_COLOR}'>• {html.escape(n)}</span>"
                 if n.startswith("does not fit") else f"• {html.escape(n)}"
                 for n in prediction.notes or []]
        foot = f"predicted in {prediction.elapsed_s:.2f} s"
        self.notes.setText("<br>".join(notes + [f"<span style='color:#889'>{foot}</span>"]))
        rows = prediction.top_ops or []
        self.table.setRowCount(len(rows))
        it = prediction.iteration_ms or 0.0
        for r, op in enumerate(rows):
            cat = op.get("category", "other")
            cells = [op.get("name", ""), CATEGORY_LABELS.get(cat, cat),
                     f"{op.get('total_ms', 0.0):.3f}", f"{op.get('count', 0):,}",
                     f"{100 * op.get('total_ms', 0.0) / it:.1f} %" if it else "–"]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c >= 2:
                    item.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
                if c == 1:
                    item.setIcon(_swatch(CATEGORY_COLORS.get(cat, CATEGORY_COLORS["other"])))
                self.table.setItem(r, c, item)
        self.set_stale(False)

    def _show_memory(self, per_rank: list[dict]) -> None:
        """The highest rank's peak, its share of the device, and the breakdown as a tip."""
        ranks = [r for r in per_rank if "peak_memory_bytes" in r]
        if not ranks:
            self.memory.value.setText("–")
            self.memory.caption.setText("peak memory")
            self.memory.set_tip("")
            self.memory.set_alert(False)
            return
        top = max(ranks, key=lambda r: r["peak_memory_bytes"])
        figures = top["memory"]
        self.memory.value.setText(format_bytes(top["peak_memory_bytes"]))
        device = figures.get("device_bytes")
        caption = "peak memory" + (f" · rank {top['rank']}" if len(ranks) > 1 else "")
        if device:
            share = 100 * top["peak_memory_bytes"] / device
            share_text = f"{share:.1f}" if share < 10 else f"{share:.0f}"
            caption += (f" · {share_text} % of {format_bytes(device)}" if figures["fits"]
                        else f" · does not fit {format_bytes(device)}")
        self.memory.caption.setText(caption)
        self.memory.set_alert(bool(device) and not figures["fits"])
        lines = [f"Peak at {figures['peak_op']}"]
        parts = {**figures["resident_bytes"], **figures["at_peak_bytes"]}
        labels = {"activations": "activations and temporaries",
                  "gradients": "gradients so far"}
        for name, nbytes in sorted(parts.items(), key=lambda kv: -kv[1]):
            if nbytes:
                lines.append(f"  {labels.get(name, name)}: {format_bytes(nbytes)}")
        lines.append("Tensor memory as torch.cuda.max_memory_allocated counts it; not "
                     "counted: the CUDA context, cuBLAS workspaces, NCCL buffers, and "
                     "blocks the allocator caches.")
        self.memory.set_tip("\n".join(lines))
