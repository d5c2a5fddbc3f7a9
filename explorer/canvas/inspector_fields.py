"""Editor widgets of the inspector, one per parameter type, each with its red message.

``make_field`` picks the widget for a registry ``ParamSpec``.  Every widget may shrink to the
inspector dock's width: long choices are elided rather than widening the form.
"""
from __future__ import annotations

import copy
import re

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QStyle,
    QStyleOptionComboBox,
    QStylePainter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from predictors.scenario.registry import DEFAULT_TABLE, ParamSpec

__all__ = ["ParamField", "NumberField", "TextField", "ChoiceField", "IntListField",
           "TablesField", "make_field", "ERROR_STYLE"]

INT_MAX = 2 ** 31 - 1
ERROR_STYLE = "color: #d93025;"
TABLE_COLUMNS = ("rows", "dim", "pooling", "distribution", "alpha")
# Short headers so that the five columns fit a narrow dock; the tooltips say it in full.
TABLE_HEADERS = {"rows": ("rows", "rows of the table"),
                 "dim": ("dim", "embedding dimension"),
                 "pooling": ("pool", "pooling: lookups per sample"),
                 "distribution": ("dist.", "distribution of the looked-up rows"),
                 "alpha": ("\u03b1", "Zipf exponent (zipf only)")}
DEFAULT_ALPHA = 1.05
MIN_FIELD_WIDTH = 60
MAX_VISIBLE_TABLES = 12


class ParamField(QObject):
    """One editor widget plus the red message under it.

    ``read()`` returns the value or raises ``ValueError`` with a message naming the problem;
    ``sigCommitted`` fires when the user finishes an edit.
    """

    sigCommitted = Signal()
    #: True for editors that need the form's whole width (their label goes above them)
    wide = False

    def __init__(self, name: str, widget: QWidget, doc: str = ""):
        super().__init__(widget)
        self.name, self.widget = name, widget
        # Fill the dock's width and shrink with it, never widening the form past the dock.
        widget.setSizePolicy(QSizePolicy.Expanding, widget.sizePolicy().verticalPolicy())
        widget.setMinimumWidth(MIN_FIELD_WIDTH)
        self.container = QWidget()
        self.container.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Preferred)
        box = QVBoxLayout(self.container)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(2)
        box.addWidget(widget)
        self.error_label = QLabel()
        self.error_label.setStyleSheet(ERROR_STYLE)
        self.error_label.setWordWrap(True)
        self.error_label.hide()
        box.addWidget(self.error_label)
        widget.setToolTip(doc)

    def set_error(self, message: str | None) -> None:
        self.error_label.setText(message or "")
        self.error_label.setVisible(bool(message))

    @property
    def error(self) -> str | None:
        return self.error_label.text() or None

    def set_value(self, value) -> None:
        self.widget.blockSignals(True)  # a refresh is not an edit
        try:
            self._show(value)
        finally:
            self.widget.blockSignals(False)

    def _show(self, value) -> None:
        raise NotImplementedError

    def read(self):
        raise NotImplementedError


_NUMBER = re.compile(r"[-+]?(\d[\d,]*)?(\.\d*)?([eE][-+]?\d+)?")


def _range_checked(base):
    """A spin box that keeps a typed number outside its range in the editor and says so
    (``sigOutOfRange``) when the edit ends, instead of silently dropping digits or signs;
    the value stays the last one in range."""

    class RangeChecked(base):
        sigOutOfRange = Signal(str)

        def validate(self, text, pos):
            state = super().validate(text, pos)
            if state[0] == QValidator.Invalid and _NUMBER.fullmatch(self._bare(text)):
                return QValidator.Intermediate, text, pos
            return state

        def fixup(self, text):
            bare = self._bare(text).replace(",", "")
            try:
                typed = float(bare)
            except ValueError:
                typed = None
            if typed is not None and not self.minimum() <= typed <= self.maximum():
                shown = f"{int(typed):,}" if typed.is_integer() else f"{typed:g}"
                low, high = (f"{v:,}" if isinstance(v, int) else f"{v:g}"
                             for v in (self.minimum(), self.maximum()))
                self.sigOutOfRange.emit(f"{shown} is out of range ({low} to {high}); "
                                        "the value is unchanged")
            return super().fixup(text)

        def _bare(self, text: str) -> str:
            return text.removeprefix(self.prefix()).removesuffix(self.suffix()).strip()

    return RangeChecked


RangeSpinBox = _range_checked(QSpinBox)
RangeDoubleSpinBox = _range_checked(QDoubleSpinBox)


class NumberField(ParamField):
    def __init__(self, name: str, spec_min, spec_max, doc: str, integer: bool):
        widget = RangeSpinBox() if integer else RangeDoubleSpinBox()
        if not integer:
            widget.setDecimals(4)
            widget.setSingleStep(0.05)
        low = -INT_MAX if spec_min is None else spec_min
        high = INT_MAX if spec_max is None else spec_max
        widget.setRange(int(low) if integer else float(low), int(high) if integer else float(high))
        # Only Enter, focus loss and arrow steps commit, not every keystroke.
        widget.setKeyboardTracking(False)
        super().__init__(name, widget, doc)
        widget.valueChanged.connect(self.sigCommitted)
        widget.sigOutOfRange.connect(lambda message: self.set_error(f"{name}: {message}"))

    def _show(self, value):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            self.widget.setValue(value)

    def read(self):
        return self.widget.value()


class TextField(ParamField):
    def __init__(self, name: str, doc: str, placeholder: str = ""):
        widget = QLineEdit()
        widget.setPlaceholderText(placeholder)
        super().__init__(name, widget, doc)
        widget.editingFinished.connect(self.sigCommitted)

    def _show(self, value):
        self.widget.setText("" if value is None else str(value))

    def read(self):
        return self.widget.text()


class ElidingComboBox(QComboBox):
    """A combo box that ends a current text too long for it with "…" instead of cutting it."""

    def paintEvent(self, event):
        painter = QStylePainter(self)
        opt = QStyleOptionComboBox()
        self.initStyleOption(opt)
        painter.drawComplexControl(QStyle.CC_ComboBox, opt)
        rect = self.style().subControlRect(QStyle.CC_ComboBox, opt,
                                           QStyle.SC_ComboBoxEditField, self)
        opt.currentText = self.fontMetrics().elidedText(opt.currentText, Qt.ElideRight,
                                                        rect.width())
        painter.drawControl(QStyle.CE_ComboBoxLabel, opt)


class ChoiceField(ParamField):
    def __init__(self, name: str, choices, doc: str, labels: dict | None = None):
        widget = ElidingComboBox()
        # Size to a few characters, not to the longest item: long labels are elided in the box
        # and shown in full in the popup and the tooltip.
        widget.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        widget.setMinimumContentsLength(6)
        for choice in choices:
            text = (labels or {}).get(choice, "none" if choice is None else str(choice))
            widget.addItem(text, choice)
            widget.setItemData(widget.count() - 1, text, Qt.ToolTipRole)
        super().__init__(name, widget, doc)
        view = widget.view()
        view.setTextElideMode(Qt.ElideNone)
        view.setMinimumWidth(view.sizeHintForColumn(0) + 24)
        widget.currentIndexChanged.connect(self.sigCommitted)

    def _show(self, value):
        index = self.widget.findData(value)
        if index < 0:  # an invalid value from the file: show it rather than hide it
            self.widget.addItem(f"{value!r} (invalid)", value)
            index = self.widget.count() - 1
        self.widget.setCurrentIndex(index)

    def read(self):
        return self.widget.currentData()


class IntListField(TextField):
    def __init__(self, name: str, doc: str):
        super().__init__(name, doc, "e.g. 512, 256, 64")

    def _show(self, value):
        self.widget.setText(", ".join(str(v) for v in value) if isinstance(value, list)
                            else str(value))

    def read(self):
        parts = [p.strip() for p in self.widget.text().replace(";", ",").split(",")]
        if parts == [""]:
            raise ValueError(f"{self.name}: enter at least one integer")
        out = []
        for i, part in enumerate(parts):
            try:
                out.append(int(part))
            except ValueError:
                raise ValueError(f"{self.name}[{i}]: {part!r} is not an integer") from None
        return out


class TablesField(ParamField):
    """Embedding tables: one row per table, with add and remove buttons."""

    wide = True

    def __init__(self, name: str, doc: str):
        self.table = QTableWidget(0, len(TABLE_COLUMNS))
        for col, key in enumerate(TABLE_COLUMNS):
            text, tip = TABLE_HEADERS[key]
            item = QTableWidgetItem(text)
            item.setToolTip(tip)
            self.table.setHorizontalHeaderItem(col, item)
        header = self.table.horizontalHeader()
        # Numbers keep their full width and the last column takes what is left; a dock too
        # narrow for all of them scrolls the table rather than cutting numbers short.
        header.setSectionResizeMode(QHeaderView.ResizeToContents)
        header.setSectionResizeMode(len(TABLE_COLUMNS) - 1, QHeaderView.Stretch)
        header.setMinimumSectionSize(30)
        self.table.verticalHeader().setDefaultSectionSize(24)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.add_button = QPushButton("Add table")
        self.remove_button = QPushButton("Remove")
        frame = QWidget()
        box = QVBoxLayout(frame)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.table)
        buttons = QHBoxLayout()
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        box.addLayout(buttons)
        super().__init__(name, frame, doc)
        self.table.itemChanged.connect(self.sigCommitted)
        self.add_button.clicked.connect(self._add_row)
        self.remove_button.clicked.connect(self._remove_rows)

    def set_value(self, value) -> None:
        self.table.blockSignals(True)
        try:
            self._show(value)
        finally:
            self.table.blockSignals(False)

    def _show(self, tables):
        tables = tables if isinstance(tables, list) else []
        self.table.setRowCount(0)
        for t in tables:
            self._append(t if isinstance(t, dict) else {})
        self.remove_button.setEnabled(self.table.rowCount() > 1)
        self._fit_height()

    def _fit_height(self) -> None:
        """Show up to ``MAX_VISIBLE_TABLES`` rows without a vertical scroll bar."""
        rows = max(3, min(self.table.rowCount(), MAX_VISIBLE_TABLES))
        height = (self.table.horizontalHeader().sizeHint().height()
                  + rows * self.table.verticalHeader().defaultSectionSize()
                  + 2 * self.table.frameWidth()
                  + self.table.horizontalScrollBar().sizeHint().height())
        self.table.setMinimumHeight(height)

    def _append(self, t: dict) -> None:
        row = self.table.rowCount()
        self.table.insertRow(row)
        t = dict(DEFAULT_TABLE, **t)
        for col, key in enumerate(("rows", "dim", "pooling")):
            self.table.setItem(row, col, QTableWidgetItem(str(t[key])))
        dist = t["distribution"] if isinstance(t["distribution"], dict) else {}
        combo = QComboBox()
        combo.setFrame(False)
        combo.addItems(["uniform", "zipf"])
        combo.setCurrentText(dist.get("kind", "uniform"))
        combo.currentTextChanged.connect(lambda _text, c=combo: self._on_distribution(c))
        self.table.setCellWidget(row, 3, combo)
        alpha = QTableWidgetItem("" if dist.get("kind") != "zipf" else str(dist.get("alpha", "")))
        self._set_alpha_editable(alpha, dist.get("kind") == "zipf")
        self.table.setItem(row, 4, alpha)

    @staticmethod
    def _set_alpha_editable(item: QTableWidgetItem, on: bool) -> None:
        flags = item.flags()
        item.setFlags(flags | Qt.ItemIsEditable if on else flags & ~Qt.ItemIsEditable)

    def _on_distribution(self, combo: QComboBox) -> None:
        for row in range(self.table.rowCount()):
            if self.table.cellWidget(row, 3) is combo:
                item = self.table.item(row, 4)
                zipf = combo.currentText() == "zipf"
                self.table.blockSignals(True)
                self._set_alpha_editable(item, zipf)
                item.setText(str(DEFAULT_ALPHA) if zipf and not item.text() else
                             item.text() if zipf else "")
                self.table.blockSignals(False)
        self.sigCommitted.emit()

    def _add_row(self) -> None:
        last = self.row_table(self.table.rowCount() - 1) if self.table.rowCount() else {}
        self.table.blockSignals(True)
        self._append(last or copy.deepcopy(DEFAULT_TABLE))
        self.table.blockSignals(False)
        self.remove_button.setEnabled(self.table.rowCount() > 1)
        self._fit_height()
        self.sigCommitted.emit()

    def _remove_rows(self) -> None:
        rows = sorted({i.row() for i in self.table.selectedIndexes()}, reverse=True) or \
            [self.table.rowCount() - 1]
        rows = rows[: self.table.rowCount() - 1]  # keep at least one table
        for row in rows:
            self.table.removeRow(row)
        self.remove_button.setEnabled(self.table.rowCount() > 1)
        self._fit_height()
        self.sigCommitted.emit()

    def row_table(self, row: int) -> dict:
        """Row ``row`` as a table record; raises ``ValueError`` naming the bad cell."""
        out = {}
        for col, key in enumerate(("rows", "dim", "pooling")):
            text = self.table.item(row, col).text().strip().replace("_", "")
            try:
                out[key] = int(text)
            except ValueError:
                raise ValueError(f"table {row + 1}, {key}: {text!r} is not an integer") from None
        kind = self.table.cellWidget(row, 3).currentText()
        if kind == "zipf":
            text = self.table.item(row, 4).text().strip()
            try:
                out["distribution"] = {"kind": "zipf", "alpha": float(text)}
            except ValueError:
                raise ValueError(f"table {row + 1}, alpha: {text!r} is not a number") from None
        else:
            out["distribution"] = {"kind": "uniform"}
        return out

    def read(self):
        return [self.row_table(r) for r in range(self.table.rowCount())]


def make_field(spec: ParamSpec) -> ParamField:
    """The editor widget for one parameter spec."""
    if spec.type in ("int", "float"):
        return NumberField(spec.name, spec.minimum, spec.maximum, spec.doc, spec.type == "int")
    if spec.type == "choice":
        choices = list(spec.choices)
        if spec.optional and None not in choices:
            choices.insert(0, None)
        return ChoiceField(spec.name, choices, spec.doc)
    if spec.type == "int_list":
        return IntListField(spec.name, spec.doc)
    if spec.type == "tables":
        return TablesField(spec.name, spec.doc)
    return TextField(spec.name, spec.doc)
