"""The inspector: a form for the selected block's parameters, or for the scenario settings.

Forms are built from the registry's ``ParamSpec``s.  Each committed change becomes one
``editor.set_params`` (one undo step); input that ``validate_params`` rejects shows a red
message under its field and is not pushed.  The form follows the document, so undo shows.
"""
from __future__ import annotations

import copy
import math

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from predictors.hardware.platforms import PLATFORM_PRESETS
from predictors.scenario.definition import TRAINING_DEFAULTS
from predictors.scenario.format import (
    DTYPES,
    INPUT_PIPELINES,
    OPTIMIZERS,
    REPLICATED,
    ROW_WISE,
)
from predictors.scenario.registry import BLOCK_KINDS, validate_params

from ..widgets.theme_colors import canvas_colors
from .inspector_fields import (
    ERROR_STYLE,
    ChoiceField,
    NumberField,
    ParamField,
    TablesField,
    TextField,
    make_field,
)

__all__ = ["Inspector", "ParamField"]

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
        self._committing = False  # inside our own set_params
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
        doc.sigParallelismChanged.connect(self._on_settings_changed)
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
        muted = canvas_colors(self).muted.name()
        self.title.setText(f"<b>{kind.label}</b> &nbsp;<span style='color:{muted}'>"
                           f"{self.node_id}</span><br><span style='color:{muted}'>"
                           f"{kind.doc}</span>")
        if not kind.params:
            form.addRow(QLabel("This block has no parameters."))
        for spec in kind.params:
            field = make_field(spec)
            self.fields[spec.name] = field
            label = QLabel(spec.name)
            label.setToolTip(spec.doc)
            if field.wide:
                form.addRow(label)
                form.addRow(field.container)
            else:
                form.addRow(label, field.container)
            field.sigCommitted.connect(lambda f=field: self._commit_param(f))
        self._load_params()

    def _load_params(self, only_changed: bool = False) -> None:
        """Show the block's parameters; ``only_changed``: leave fields that already show
        their value (or hold the user's unfinished text) alone, so that committing one
        cell does not rebuild the widget it is being edited in."""
        params = self.document.node(self.node_id)["params"]
        kind = self.document.node(self.node_id)["kind"]
        shown, _ = validate_params(kind, params, "params")  # defaults for missing entries
        for name, field in self.fields.items():
            value = params.get(name, shown.get(name))
            if only_changed:
                try:
                    if field.read() == value:
                        continue
                except ValueError:
                    continue
            field.set_value(value)
            field.set_error(None)

    def _build_settings(self, form: QFormLayout) -> None:
        self.title.setText(f"<b>{self.document.name or 'Scenario'}</b><br>"
                           f"<span style='color:{canvas_colors(self).muted.name()}'>"
                           "Training and platform settings. "
                           "Select a block to edit its parameters.</span>")
        fields = [
            NumberField("batch_size", 1, 2 ** 24, "samples per iteration (global)", True),
            ChoiceField("optimizer", OPTIMIZERS, "optimizer"),
            ChoiceField("dtype", DTYPES, "data type of weights and activations"),
            TextField("lr", "learning rate (does not change the time)", "e.g. 0.01"),
            ChoiceField("input_pipeline", INPUT_PIPELINES,
                        "resident: the batch is on the GPU when the step starts. torchrec: "
                        "TorchRec's TrainPipelineSparseDist, which in each step copies the "
                        "next batch from the host and sends its sparse features to the "
                        "GPUs that hold their tables (all-to-alls the host waits for)"),
            ChoiceField("preset", list(PLATFORM_PRESETS), "platform preset",
                         {n: f"{n} \u2014 {p.description}" for n, p in PLATFORM_PRESETS.items()}),
            NumberField("threads", 1, 1024, "CPU threads (local-cpu only)", True),
            NumberField("ranks", 1, 64, "processes on this host joined by gloo, each with "
                                        "the threads above (local-cpu only): a multi-rank "
                                        "job that `measure` runs for real", True),
        ]
        for field in fields:
            self.fields[field.name] = field
            form.addRow(QLabel(field.name.replace("_", " ")), field.container)
            commit = self._commit_platform if field.name in ("preset", "threads", "ranks") \
                else self._commit_training
            field.sigCommitted.connect(lambda f=field, c=commit: c(f))
        # the embedding sharding: "auto", or a plan applied from the Sharding dock
        self.sharding_label = QLabel()
        self.sharding_label.setWordWrap(True)
        self.sharding_reset = QPushButton("Reset to auto")
        self.sharding_reset.setToolTip("Let the predictor place the tables (greedy by "
                                       "predicted kernel time)")
        self.sharding_reset.clicked.connect(self._reset_sharding)
        box = QWidget()
        row = QHBoxLayout(box)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.sharding_label, 1)
        row.addWidget(self.sharding_reset)
        label = QLabel("sharding")
        label.setToolTip("parallelism.embedding_sharding: which GPU holds each embedding "
                         "table (Run ▸ Rank Shardings compares plans)")
        form.addRow(label, box)
        self._load_settings()

    def _load_settings(self) -> None:
        training, platform = self.document.training(), self.document.platform()
        for name in ("batch_size", "optimizer", "dtype", "lr", "input_pipeline"):
            self.fields[name].set_value(training.get(name, TRAINING_DEFAULTS.get(name)))
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
        for name in ("threads", "ranks"):
            self.fields[name].set_value(platform.get(name, 1))
            self.fields[name].widget.setEnabled(preset == "local-cpu")
        sharding = self.document.parallelism().get("embedding_sharding", "auto")
        if isinstance(sharding, dict):
            self.sharding_label.setText("a plan: " + _plan_summary(sharding))
        else:
            self.sharding_label.setText("auto (greedy by predicted kernel time)")
        self.sharding_reset.setEnabled(isinstance(sharding, dict))

    # -- committing -------------------------------------------------------------------------

    def _commit_param(self, field: ParamField) -> None:
        if self.node_id is None:
            return
        record = self.document.node(self.node_id)
        try:
            value = field.read()
        except ValueError as exc:
            if isinstance(field, TablesField) and field.table.rowCount() != len(
                    record["params"].get("tables", [])):
                # a row added or removed while a cell is invalid: the rows go back to the
                # document's, so that the widget never shows tables the model lacks
                field.set_value(record["params"].get("tables", []))
                field.set_error(f"{exc}: fix it before adding or removing tables")
                return
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
        self._committing = True
        try:
            self.editor.set_params(self.node_id, params)
        finally:
            self._committing = False

    def _commit_training(self, field: ParamField) -> None:
        training = self.document.training()
        value = field.read()
        if field.name == "lr":
            try:
                value = float(value)
            except ValueError:
                field.set_error(f"lr: {value!r} is not a number")
                return
            if not 0 < value < math.inf:  # "nan" and "inf" parse as floats
                field.set_error(f"lr: must be a positive number, got {value!r}")
                return
        field.set_error(None)
        training[field.name] = value
        self.editor.set_training(training)

    def _reset_sharding(self) -> None:
        parallelism = self.document.parallelism()
        parallelism["embedding_sharding"] = "auto"
        self.editor.set_parallelism(parallelism, "Reset sharding to auto")

    def _commit_platform(self, field: ParamField) -> None:
        platform = self.document.platform()
        if field.name == "preset":
            platform["preset"] = field.read()
            if platform["preset"] != "local-cpu":   # they only mean something on the CPU
                platform.pop("threads", None)
                platform.pop("ranks", None)
        elif field.name == "ranks" and field.read() == 1:
            platform.pop("ranks", None)
        else:
            platform[field.name] = field.read()
        self.editor.set_platform(platform)

    # -- following the document -------------------------------------------------------------

    def _on_node_changed(self, node_id: str) -> None:
        if node_id == self.node_id:  # our own commit: only what changed; undo: everything
            self._load_params(only_changed=self._committing)

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


_KIND_NAMES = {ROW_WISE: "row-wise", REPLICATED: "data-parallel", "cw": "column-wise",
               "twrw": "table-row-wise"}


def _plan_summary(sharding: dict) -> str:
    """``3 table(s) on 2 rank(s), 1 row-wise``: a scenario's sharding in a line."""
    ranks, kinds = set(), {}
    for value in sharding.values():
        kind = value.get("kind") if isinstance(value, dict) else value
        if kind == "tw" or not isinstance(kind, str):
            ranks.add(value.get("rank") if isinstance(value, dict) else value)
        else:
            kinds[kind] = kinds.get(kind, 0) + 1
    whole = len(sharding) - sum(kinds.values())
    parts = [f"{whole} table(s) on {len(ranks)} rank(s)"] if ranks else []
    parts += [f"{n} {_KIND_NAMES.get(k, k)}" for k, n in kinds.items()]
    return ", ".join(parts)
