"""The inspector: a form for the selected block's parameters, or for the scenario settings.

Forms are built from the registry's ``ParamSpec``s.  Each committed change becomes one
``editor.set_params`` (one undo step); input that ``validate_params`` rejects shows a red
message under its field and is not pushed.  The form follows the document, so undo shows.
"""
from __future__ import annotations

import copy

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QDoubleSpinBox, QFormLayout,
                               QFrame, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QPushButton,
                               QScrollArea, QSpinBox, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from predictors.devices.platforms import PLATFORM_PRESETS
from predictors.registry import BLOCK_KINDS, DEFAULT_TABLE, ParamSpec, validate_params
from predictors.scenario import DTYPES, OPTIMIZERS

__all__ = ["Inspector", "ParamField"]

INT_MAX = 2 ** 31 - 1
ERROR_STYLE = "color: #d93025;"
TABLE_COLUMNS = ("rows", "dim", "pooling", "distribution", "alpha")
DEFAULT_ALPHA = 1.05


class ParamField(QObject):
    """One editor widget plus the red message under it.

    ``read()`` returns the value or raises ``ValueError`` with a message naming the problem;
    ``sigCommitted`` fires when the user finishes an edit.
    """

    sigCommitted = Signal()

    def __init__(self, name: str, widget: QWidget, doc: str = ""):
        super().__init__(widget)
        self.name, self.widget = name, widget
        self.container = QWidget()
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


class _NumberField(ParamField):
    def __init__(self, name: str, spec_min, spec_max, doc: str, integer: bool):
        widget = QSpinBox() if integer else QDoubleSpinBox()
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

    def _show(self, value):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            self.widget.setValue(value)

    def read(self):
        return self.widget.value()


class _TextField(ParamField):
    def __init__(self, name: str, doc: str, placeholder: str = ""):
        widget = QLineEdit()
        widget.setPlaceholderText(placeholder)
        super().__init__(name, widget, doc)
        widget.editingFinished.connect(self.sigCommitted)

    def _show(self, value):
        self.widget.setText("" if value is None else str(value))

    def read(self):
        return self.widget.text()


class _ChoiceField(ParamField):
    def __init__(self, name: str, choices, doc: str, labels: dict | None = None):
        widget = QComboBox()
        for choice in choices:
            widget.addItem((labels or {}).get(choice, "none" if choice is None else str(choice)),
                           choice)
        super().__init__(name, widget, doc)
        widget.currentIndexChanged.connect(self.sigCommitted)

    def _show(self, value):
        index = self.widget.findData(value)
        if index < 0:  # an invalid value from the file: show it rather than hide it
            self.widget.addItem(f"{value!r} (invalid)", value)
            index = self.widget.count() - 1
        self.widget.setCurrentIndex(index)

    def read(self):
        return self.widget.currentData()


class _IntListField(_TextField):
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


class _TablesField(ParamField):
    """Embedding tables: one row per table, with add and remove buttons."""

    def __init__(self, name: str, doc: str):
        self.table = QTableWidget(0, len(TABLE_COLUMNS))
        self.table.setHorizontalHeaderLabels(list(TABLE_COLUMNS))
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.Stretch)
        self.table.horizontalHeader().setSectionResizeMode(3, QHeaderView.ResizeToContents)
        self.table.verticalHeader().setDefaultSectionSize(24)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setMinimumHeight(220)
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

    def _append(self, t: dict) -> None:
        row = self.table.rowCount()
        self.table.insertRow(row)
        t = dict(DEFAULT_TABLE, **t)
        for col, key in enumerate(("rows", "dim", "pooling")):
            self.table.setItem(row, col, QTableWidgetItem(str(t[key])))
        dist = t["distribution"] if isinstance(t["distribution"], dict) else {}
        combo = QComboBox()
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
        self.sigCommitted.emit()

    def _remove_rows(self) -> None:
        rows = sorted({i.row() for i in self.table.selectedIndexes()}, reverse=True) or \
            [self.table.rowCount() - 1]
        rows = rows[: self.table.rowCount() - 1]  # keep at least one table
        for row in rows:
            self.table.removeRow(row)
        self.remove_button.setEnabled(self.table.rowCount() > 1)
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
        return _NumberField(spec.name, spec.minimum, spec.maximum, spec.doc, spec.type == "int")
    if spec.type == "choice":
        choices = list(spec.choices)
        if spec.optional and None not in choices:
            choices.insert(0, None)
        return _ChoiceField(spec.name, choices, spec.doc)
    if spec.type == "int_list":
        return _IntListField(spec.name, spec.doc)
    if spec.type == "tables":
        return _TablesField(spec.name, spec.doc)
    return _TextField(spec.name, spec.doc)


def _relative(field_path: str) -> str:
    return field_path.split(".", 1)[1] if "." in field_path else field_path


class Inspector(QWidget):
    """Parameters of the selected block (``set_node``), or the scenario settings if none."""

    def __init__(self, editor, parent: QWidget | None = None):
        super().__init__(parent)
        self.editor = editor
        self.document = editor.document
        self.node_id: str | None = None
        self.fields: dict[str, ParamField] = {}
        self._content: QWidget | None = None
        self.scroll = QScrollArea(self)
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.scroll)
        self.title = QLabel()
        self.issues_label = QLabel()
        doc = self.document
        doc.sigNodeChanged.connect(self._on_node_changed)
        doc.sigNodeRemoved.connect(lambda i: self.set_node(None) if i == self.node_id else None)
        doc.sigReset.connect(lambda: self.set_node(None))
        doc.sigTrainingChanged.connect(self._on_settings_changed)
        doc.sigPlatformChanged.connect(self._on_settings_changed)
        doc.sigChanged.connect(self._show_issues)
        self.set_node(None)

    # -- building ---------------------------------------------------------------------------

    def follow_selection(self, ids: list) -> None:
        """Slot for ``ModelScene.sigSelectionChangedIds``: one block, or the settings."""
        self.set_node(ids[0] if len(ids) == 1 else None)

    def set_node(self, node_id: str | None) -> None:
        if node_id is not None and not self.document.has_node(node_id):
            node_id = None
        self.node_id = node_id
        self.fields = {}
        content = QWidget()
        box = QVBoxLayout(content)
        box.setContentsMargins(10, 10, 10, 10)
        self.title = QLabel()
        self.title.setTextFormat(Qt.RichText)
        self.title.setWordWrap(True)
        box.addWidget(self.title)
        self.issues_label = QLabel()
        self.issues_label.setStyleSheet(ERROR_STYLE)
        self.issues_label.setWordWrap(True)
        box.addWidget(self.issues_label)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.AllNonFixedFieldsGrow)
        box.addLayout(form)
        if node_id is None:
            self._build_settings(form)
        else:
            self._build_node(form)
        box.addStretch(1)
        if self._content is not None:
            self._content.deleteLater()  # later: a field's own signal may still be running
        self._content = content
        self.scroll.setWidget(content)
        self._show_issues()

    def _build_node(self, form: QFormLayout) -> None:
        record = self.document.node(self.node_id)
        kind = BLOCK_KINDS.get(record["kind"])
        if kind is None:
            self.title.setText(f"<b>{self.node_id}</b><br>unknown kind {record['kind']!r}")
            return
        self.title.setText(f"<b>{kind.label}</b> &nbsp;<span style='color:#5f6673'>"
                           f"{self.node_id}</span><br><span style='color:#5f6673'>"
                           f"{kind.doc}</span>")
        if not kind.params:
            form.addRow(QLabel("This block has no parameters."))
        for spec in kind.params:
            field = make_field(spec)
            self.fields[spec.name] = field
            label = QLabel(spec.name)
            label.setToolTip(spec.doc)
            form.addRow(label, field.container)
            field.sigCommitted.connect(lambda f=field: self._commit_param(f))
        self._load_params()

    def _load_params(self) -> None:
        params = self.document.node(self.node_id)["params"]
        kind = self.document.node(self.node_id)["kind"]
        shown, _ = validate_params(kind, params, "params")  # defaults for missing entries
        for name, field in self.fields.items():
            field.set_value(params.get(name, shown.get(name)))
            field.set_error(None)

    def _build_settings(self, form: QFormLayout) -> None:
        self.title.setText(f"<b>{self.document.name or 'Scenario'}</b><br>"
                           "<span style='color:#5f6673'>Training and platform settings. "
                           "Select a block to edit its parameters.</span>")
        fields = [
            _NumberField("batch_size", 1, 2 ** 24, "samples per iteration (global)", True),
            _ChoiceField("optimizer", OPTIMIZERS, "optimizer"),
            _ChoiceField("dtype", DTYPES, "data type of weights and activations"),
            _TextField("lr", "learning rate (does not change the time)", "e.g. 0.01"),
            _ChoiceField("preset", list(PLATFORM_PRESETS), "platform preset",
                         {n: f"{n} \u2014 {p.description}" for n, p in PLATFORM_PRESETS.items()}),
            _NumberField("threads", 1, 1024, "CPU threads (local-cpu only)", True),
        ]
        for field in fields:
            self.fields[field.name] = field
            form.addRow(QLabel(field.name.replace("_", " ")), field.container)
            commit = self._commit_platform if field.name in ("preset", "threads") \
                else self._commit_training
            field.sigCommitted.connect(lambda f=field, c=commit: c(f))
        self._load_settings()

    def _load_settings(self) -> None:
        training, platform = self.document.training(), self.document.platform()
        for name in ("batch_size", "optimizer", "dtype", "lr"):
            self.fields[name].set_value(training.get(name))
            self.fields[name].set_error(None)
        preset = platform.get("preset")
        if preset is None:  # a platform graph: edited on its own canvas, not here
            combo = self.fields["preset"].widget
            combo.blockSignals(True)
            if combo.findData("__custom__") < 0:
                combo.addItem(f"custom ({len(platform.get('nodes', []))} devices)", "__custom__")
            combo.setCurrentIndex(combo.findData("__custom__"))
            combo.blockSignals(False)
        else:
            self.fields["preset"].set_value(preset)
        self.fields["preset"].widget.setEnabled(preset is not None)
        self.fields["threads"].set_value(platform.get("threads", 1))
        self.fields["threads"].widget.setEnabled(preset == "local-cpu")

    # -- committing -------------------------------------------------------------------------

    def _commit_param(self, field: ParamField) -> None:
        if self.node_id is None:
            return
        record = self.document.node(self.node_id)
        try:
            value = field.read()
        except ValueError as exc:
            field.set_error(str(exc))
            return
        params = copy.deepcopy(record["params"])
        params[field.name] = value
        _, errors = validate_params(record["kind"], params, "params")
        # Only this field's problems block the edit; others were already in the document.
        mine = [f"{_relative(path)}: {msg}" for path, msg in errors
                if path == f"params.{field.name}" or path.startswith(f"params.{field.name}[")
                or path.startswith(f"params.{field.name}.")]
        if mine:
            field.set_error("\n".join(mine))
            return
        field.set_error(None)
        self.editor.set_params(self.node_id, params)

    def _commit_training(self, field: ParamField) -> None:
        training = self.document.training()
        value = field.read()
        if field.name == "lr":
            try:
                value = float(value)
            except ValueError:
                field.set_error(f"lr: {value!r} is not a number")
                return
            if value <= 0:
                field.set_error(f"lr: must be a positive number, got {value!r}")
                return
        field.set_error(None)
        training[field.name] = value
        self.editor.set_training(training)

    def _commit_platform(self, field: ParamField) -> None:
        platform = self.document.platform()
        if field.name == "preset":
            platform["preset"] = field.read()
            if platform["preset"] != "local-cpu":
                platform.pop("threads", None)  # threads only mean something on the CPU
        else:
            platform["threads"] = field.read()
        self.editor.set_platform(platform)

    # -- following the document -------------------------------------------------------------

    def _on_node_changed(self, node_id: str) -> None:
        if node_id == self.node_id:
            self._load_params()

    def _on_settings_changed(self) -> None:
        if self.node_id is None:
            self._load_settings()

    def _show_issues(self) -> None:
        if self.node_id is not None:
            issues = self.document.node_issues(self.node_id)
        else:
            issues = [i for i in self.document.issues() if not i.field.startswith("model")]
        self.issues_label.setText("\n".join(str(i) for i in issues))
        self.issues_label.setVisible(bool(issues))
