"""The details of one device profile for the Profiles tab: its header, validation figures
per op class, other figures and provenance (:class:`ProfileDetails`), read from the profile's
JSON without loading its models (:func:`read_profile_info`)."""
from __future__ import annotations

import html
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QGroupBox,
    QHeaderView,
    QLabel,
    QSplitter,
    QStyledItemDelegate,
    QTableWidget,
    QTableWidgetItem,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from predictors.profiles import PROFILE_FORMAT, PROFILE_VERSION, load_profile

__all__ = ["ProfileInfo", "ProfileDetails", "read_profile_info", "KIND_LABELS", "KIND_SHORT",
           "KIND_COLORS"]

KIND_LABELS = {"measured": "measured on the device", "fitted": "fitted from public data",
               "datasheet": "datasheet only"}
KIND_SHORT = {"measured": "measured", "fitted": "fitted (public)",
              "datasheet": "datasheet only"}  # the list column; tooltips say it in full
# (text, background) of each kind's badge
KIND_COLORS = {"measured": ("#1b5e20", "#e3f4e4"), "fitted": ("#0d47a1", "#e3edfb"),
               "datasheet": ("#5d4037", "#f3ede8")}


@dataclass
class ProfileInfo:
    """What the panel shows of one profile file (read without loading its models)."""

    path: Path
    name: str = ""
    kind: str = ""
    device: str = ""
    device_kind: str = ""
    provenance: dict = field(default_factory=dict)
    validation: dict = field(default_factory=dict)
    kernel_models: list[str] = field(default_factory=list)
    bundled: bool = False
    error: str | None = None
    overheads_source: str = ""  # where the profile's T1-T5 table comes from
    overhead_ops: int = 0  # its per-op entries measured on ops

    @property
    def kind_label(self) -> str:
        return KIND_LABELS.get(self.kind, self.kind or "unknown")

    @property
    def title(self) -> str:
        return self.name or self.path.stem


def _object(doc: dict, key: str) -> dict:
    """``doc[key]`` when it is an object, ``{}`` when absent; ValueError otherwise."""
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{key}: expected an object, got {type(value).__name__}")
    return value


def read_profile_info(path: str | os.PathLike, bundled: bool = False) -> ProfileInfo:
    """Read the JSON part of a profile; a file that cannot be read comes back with ``error``."""
    path = Path(path)
    info = ProfileInfo(path, bundled=bundled)
    try:
        doc = json.loads(path.read_text())
        if not isinstance(doc, dict) or doc.get("format") != PROFILE_FORMAT:
            raise ValueError(f"not a device profile (format is not {PROFILE_FORMAT!r})")
        if doc.get("version") != PROFILE_VERSION:
            raise ValueError(f"profile version {doc.get('version')!r}; this program reads "
                             f"version {PROFILE_VERSION}")
        device = _object(doc, "device")
        info.name, info.kind = str(doc.get("name", "")), str(doc.get("kind", ""))
        info.device, info.device_kind = str(device.get("name", "")), str(device.get("kind", ""))
        info.provenance = _object(doc, "provenance")
        info.validation = _object(doc, "validation")
        info.kernel_models = sorted(str(k) for k in _object(doc, "kernel_models"))
        overheads = doc.get("overheads")
        if isinstance(overheads, dict):
            info.overheads_source = str(overheads.get("source") or "")
            # entries measured on ops (views carry zeros: they run inside the gaps)
            info.overhead_ops = sum(1 for e in _object(overheads, "per_op").values()
                                    if not isinstance(e, dict) or e.get("n", 1))
        if not bundled:  # a file the user added: everything a prediction will read
            load_profile(path)
    except (OSError, ValueError, AttributeError, TypeError, RecursionError) as exc:
        text = str(exc)  # a ProfileError names the whole path already: keep the file name
        info.error = f"{path.name}: {text.removeprefix(f'{path}: ')}"
    return info


def _percent(value) -> str:
    if isinstance(value, (int, float)) and math.isfinite(value):
        return f"{100 * value:.1f}"
    return "–"


_LABEL_KEYS = ("name", "scenario", "device", "op")  # what labels a record in a list
_SIGNED_FRACTIONS = ("error", "speed")  # validate's relative figures, e.g. +4.2 %
_FRACTIONS = ("gmae", "mape", "noise", "geomean", "worst") + _SIGNED_FRACTIONS


def _format_value(key: str, value) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        k = key.lower()
        if k.endswith(_FRACTIONS) and abs(value) < 100:
            signed = k.endswith(_SIGNED_FRACTIONS) and not any(
                w in k for w in ("abs", "mean", "worst"))  # averages of |error| have no sign
            return f"{100 * value:{'+' if signed else ''}.1f} %"
        return f"{value:.4g}"
    return str(value)


def _is_scalar(v) -> bool:
    return not isinstance(v, (dict, list))


def _fill_tree(parent: QTreeWidgetItem, value, depth: int = 0) -> None:
    """Key/value rows of any JSON value.  Lists of records are labelled by their name; a
    small record of plain figures also reads as one line (``n 1350 · gmae 3.2 %``)."""
    items = (value.items() if isinstance(value, dict) else
             ((next((str(v[k]) for k in _LABEL_KEYS if isinstance(v, dict) and k in v),
                    f"[{i}]"), v)
              for i, v in enumerate(value)))
    for key, v in items:
        key = str(key)
        child = QTreeWidgetItem(parent, [key])
        if isinstance(v, (dict, list)) and v:
            if isinstance(v, list) and all(_is_scalar(x) for x in v):
                child.setText(1, ", ".join(_format_value(key, x) for x in v))
            else:
                if isinstance(v, dict) and len(v) <= 8 and all(_is_scalar(x) for x in v.values()):
                    # a record in a list is labelled by its name: not repeated on its line
                    child.setText(1, " · ".join(
                        f"{k} {_format_value(str(k), x)}" for k, x in v.items()
                        if not (isinstance(value, list) and k in _LABEL_KEYS)))
                _fill_tree(child, v, depth + 1)
                child.setExpanded(not child.text(1) and depth < 2)
        else:
            child.setText(1, _format_value(key, v))
        child.setToolTip(1, child.text(1))


class _WrappingDelegate(QStyledItemDelegate):
    """Rows as tall as their wrapped value (QTreeView does not grow wrapped rows itself)."""

    def __init__(self, tree: QTreeWidget):
        super().__init__(tree)
        self.tree = tree

    def sizeHint(self, option, index):
        hint = super().sizeHint(option, index)
        if index.column() != 1:
            return hint
        width = max(40, self.tree.header().sectionSize(1) - 8)
        rect = option.fontMetrics.boundingRect(QRect(0, 0, width, 100000), Qt.TextWordWrap,
                                               str(index.data() or ""))
        return QSize(hint.width(), max(hint.height(), rect.height() + 4))


def _kv_tree(columns=("key", "value")) -> QTreeWidget:
    tree = QTreeWidget()
    tree.setMinimumHeight(60)
    tree.setHeaderLabels(list(columns))
    tree.setAlternatingRowColors(True)
    tree.setWordWrap(True)  # provenance values are often sentences
    tree.setUniformRowHeights(False)
    tree.setItemDelegate(_WrappingDelegate(tree))
    tree.header().setSectionResizeMode(0, QHeaderView.ResizeToContents)
    tree.header().setStretchLastSection(True)
    tree.header().sectionResized.connect(lambda *a: tree.doItemsLayout())
    return tree


_UNLIMITED = 16777215  # QWIDGETSIZE_MAX


class ProfileDetails(QWidget):
    """Header, validation figures per op class, other figures and provenance of a profile."""

    CLASS_COLUMNS = ("op class", "samples", "held out", "model", "GMAE %", "MAPE %",
                     "noise %")

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.header = QLabel(self)
        self.header.setTextFormat(Qt.RichText)
        self.header.setWordWrap(True)
        self.header.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.warning = QLabel(self)
        self.warning.setWordWrap(True)
        self.warning.setStyleSheet("background: #fff4e0; color: #7a4a00; border: 1px solid "
                                   "#f0d49c; padding: 4px 8px;")
        self.warning.hide()
        self.classes = QTableWidget(0, len(self.CLASS_COLUMNS), self)
        self.classes.setHorizontalHeaderLabels(list(self.CLASS_COLUMNS))
        self.classes.verticalHeader().hide()
        self.classes.verticalHeader().setDefaultSectionSize(22)
        self.classes.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.classes.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.classes.setAlternatingRowColors(True)
        self.classes.setVerticalScrollMode(QAbstractItemView.ScrollPerPixel)
        hh = self.classes.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeToContents)
        hh.setSectionResizeMode(0, QHeaderView.Stretch)  # figures stay beside their headers
        self.no_classes = QLabel("No per-op-class validation in this profile.", self)
        self.no_classes.setForegroundRole(QPalette.PlaceholderText)
        self.other = _kv_tree(("figure", "value"))
        self.provenance = _kv_tree()
        validation = self.validation_box = QGroupBox("Validation (held-out shapes)", self)
        vbox = QVBoxLayout(validation)
        vbox.setContentsMargins(6, 4, 6, 6)
        vbox.addWidget(self.classes, 0, Qt.AlignTop)  # no floating mid-box when alone
        vbox.addWidget(self.no_classes)
        self.other_label = QLabel("Other figures", self)
        self.other_label.setStyleSheet("font-weight: 600;")
        vbox.addWidget(self.other_label)
        vbox.addWidget(self.other)
        prov = QGroupBox("Provenance", self)
        pbox = QVBoxLayout(prov)
        pbox.setContentsMargins(6, 4, 6, 6)
        pbox.addWidget(self.provenance)
        split = QSplitter(Qt.Vertical, self)
        split.addWidget(validation)
        split.addWidget(prov)
        split.setChildrenCollapsible(False)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.header)
        box.addWidget(self.warning)
        box.addWidget(split, 1)
        self.show_info(None)

    def show_info(self, info: ProfileInfo | None, warning: str = "") -> None:
        self.classes.setRowCount(0)
        self.other.clear()
        self.provenance.clear()
        self.warning.setVisible(bool(warning))
        self.warning.setText(warning)
        if info is None:
            self.header.setText("<p style='color:#667'>Select a profile to see where it comes "
                                "from and how well it validates.</p>")
            self.no_classes.show()
            self.classes.hide()
            self._show_other(False)
            return
        fg, bg = KIND_COLORS.get(info.kind, ("#333", "#eee"))
        models = ", ".join(info.kernel_models) or "none (roofline)"
        self.header.setText(
            f"<div style='font-size:15px; font-weight:600'>{html.escape(info.title)} "
            f"<span style='background:{bg}; color:{fg}; font-size:12px; font-weight:500'>"
            f"&nbsp;{html.escape(info.kind_label)}&nbsp;</span></div>"
            f"<div style='color:#445'>device: {html.escape(info.device or '?')}"
            f" · learned kernel models: {html.escape(models)}</div>"
            f"<div style='color:#778'>{'bundled · ' if info.bundled else ''}"
            f"{html.escape(str(info.path))}</div>")
        if info.error:
            self.warning.setText(info.error)
            self.warning.show()
        classes = info.validation.get("classes")
        classes = classes if isinstance(classes, dict) else {}
        self._fill_classes(classes)
        other = {k: v for k, v in info.validation.items() if k != "classes"}
        if other:
            _fill_tree(self.other.invisibleRootItem(), other)
        self._show_other(bool(other))
        _fill_tree(self.provenance.invisibleRootItem(), info.provenance)

    def _show_other(self, visible: bool) -> None:
        self.other.setVisible(visible)
        self.other_label.setVisible(visible)
        # Without other figures the box holds only the table: no taller than it, so the
        # provenance below gets the room.
        fixed = (self.classes.maximumHeight() if self.classes.isVisibleTo(self)
                 else self.no_classes.sizeHint().height())
        self.validation_box.setMaximumHeight(_UNLIMITED if visible else fixed + 40)

    def _fill_classes(self, classes: dict) -> None:
        self.classes.setVisible(bool(classes))
        self.no_classes.setVisible(not classes)
        self.classes.setRowCount(len(classes))
        for row, (name, m) in enumerate(sorted(classes.items())):
            m = m if isinstance(m, dict) else {}
            chosen = str(m.get("chosen", ""))
            best = m.get(chosen) if isinstance(m.get(chosen), dict) else {}
            floor = m.get("noise_floor") if isinstance(m.get("noise_floor"), dict) else {}
            cells = [name, m.get("samples", ""), m.get("held_out", ""), chosen,
                     _percent(best.get("gmae")), _percent(best.get("mape")),
                     _percent(floor.get("gmae"))]
            tip = (f"{name}: {m.get('samples', '?')} samples, {m.get('held_out', '?')} held "
                   f"out; model used: {chosen or '?'}" +
                   "".join(f"\n{k}: GMAE {_percent(v.get('gmae'))} %, MAPE "
                           f"{_percent(v.get('mape'))} %" for k, v in m.items()
                           if isinstance(v, dict) and "gmae" in v and k != "noise_floor") +
                   "".join(f"\n{label}: model {_percent(best.get(key))} %, noise floor "
                           f"{_percent(floor.get(key))} %" for key, label in (
                               ("gmae_isolated", "microbenchmarks"),
                               ("gmae_in_context", "inside training steps"))
                           if key in best or key in floor))
            for col, value in enumerate(cells):
                item = QTableWidgetItem(str(value))
                item.setToolTip(tip)
                if col in (1, 2, 4, 5, 6):
                    item.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
                self.classes.setItem(row, col, item)
        self.classes.horizontalHeaderItem(4).setToolTip(
            "Geometric mean of |predicted / measured - 1| on held-out shapes")
        self.classes.horizontalHeaderItem(5).setToolTip("Mean of |predicted / measured - 1|")
        self.classes.horizontalHeaderItem(6).setToolTip(
            "Measurement noise floor: the GMAE a perfect model would score against these "
            "measurements, from repeated ones ('–': not measured by this profile's "
            "calibration)")
        self.classes.horizontalHeaderItem(3).setToolTip("The model the profile uses (mlp or "
                                                        "gbm); hover a row for both")
        # As tall as its rows (up to 8: every class of a CPU profile), so the figures
        # below keep their room.
        rows = min(len(classes), 8)
        height = (self.classes.horizontalHeader().sizeHint().height()
                  + 2 * self.classes.frameWidth()
                  + rows * self.classes.verticalHeader().defaultSectionSize())
        self.classes.setMinimumHeight(min(height, 90))
        self.classes.setMaximumHeight(height)
