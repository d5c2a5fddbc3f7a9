"""The Platform tab: a preset chooser, a palette of devices to drag onto the canvas, the
selected device's or link's settings, and a one-line summary of what the predictor sees."""
from __future__ import annotations

import re

from PySide6.QtCore import QMimeData, QPointF, Qt, QTimer, Signal
from PySide6.QtGui import QDrag, QPalette
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from predictors.hardware.platforms import (
    GPU_MODELS,
    LINK_KINDS,
    PLATFORM_PRESETS,
    resolve_platform,
)
from predictors.scenario.format import ScenarioError, validate_platform

from ..canvas.view import CanvasView
from ..widgets.theme_colors import style_by_theme
from .scene import DEVICE_KINDS, DEVICE_MIME, PlatformScene, link_text

__all__ = ["PlatformPage", "PlatformView", "DeviceButton"]


class DeviceButton(QPushButton):
    """A palette entry: click adds the device, drag drops it where the mouse lets go."""

    def __init__(self, kind: str, scene: PlatformScene, parent=None):
        super().__init__(DEVICE_KINDS[kind][0], parent)
        self.kind, self.scene = kind, scene
        self.setToolTip(f"Drag onto the canvas (or click) to add a {DEVICE_KINDS[kind][0]}")
        edge = DEVICE_KINDS[kind][1]
        style_by_theme(self, lambda dark: (
            f"QPushButton {{ border-left: 5px solid {edge}; padding: 3px 8px; "
            + ("background: #33373d; color: #e3e5e8; }" if dark else "}")))
        self._start = None
        self.clicked.connect(lambda: self.scene.add_device(self.kind))

    def mousePressEvent(self, event):
        self._start = event.position()
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event):
        if self._start is not None and (event.position() - self._start).manhattanLength() > 8:
            self._start = None
            self.setDown(False)
            mime = QMimeData()
            mime.setData(DEVICE_MIME, self.kind.encode())
            drag = QDrag(self)
            drag.setMimeData(mime)
            drag.exec(Qt.CopyAction)
            return
        super().mouseMoveEvent(event)


class PlatformView(CanvasView):
    """The platform canvas: device drops from the palette (zoom, pan and fit from
    :class:`~explorer.canvas.view.CanvasView`)."""

    drop_mime = DEVICE_MIME
    max_fit_scale = 1.0

    def dropped(self, text: str, pos: QPointF) -> bool:
        if text not in DEVICE_KINDS:
            return False
        self.scene().add_device(text, QPointF(pos))
        return True


class _SummaryLine(QLabel):
    """The line under the buttons; a left click on it says so."""

    clicked = Signal()

    def mousePressEvent(self, event):
        if event.button() == Qt.LeftButton:
            self.clicked.emit()
        super().mousePressEvent(event)


# an issue's path that names one device or link of a custom graph
_AT_FAULT = re.compile(r"^platform\.(nodes|edges)\[(\d+)\]")


class PlatformPage(QWidget):
    """The Platform tab; every change is one undoable edit of the document."""

    CUSTOM = "(custom platform graph)"

    def __init__(self, editor, parent: QWidget | None = None):
        super().__init__(parent)
        self.editor = editor
        self.scene = PlatformScene(editor, self)
        self.view = PlatformView(self.scene, self)
        self.combo = QComboBox(self)
        self.combo.setToolTip("Start from a preset (one undoable edit); editing its devices "
                              "or links makes it a custom graph")
        # as wide as its longest entry, "(custom platform graph)" included
        self.combo.setSizeAdjustPolicy(QComboBox.AdjustToContents)
        for name, p in PLATFORM_PRESETS.items():
            self.combo.addItem(name, name)
            self.combo.setItemData(self.combo.count() - 1, p.description, Qt.ToolTipRole)
        self.buttons = [DeviceButton(k, self.scene, self) for k in DEVICE_KINDS]
        # the selection's settings
        self.gpu_model = QComboBox(self)
        for key, name in GPU_MODELS.items():
            self.gpu_model.addItem(f"{key.upper()} ({name})", key)
        self.gpu_model.setToolTip("GPU model of every GPU (a platform has one)")
        self.gpu_model.setSizeAdjustPolicy(QComboBox.AdjustToContents)
        self.threads = QSpinBox(self)
        self.threads.setRange(1, 512)
        self.threads.setToolTip("CPU threads for the training step")
        self.link_kind = QComboBox(self)
        for kind in LINK_KINDS:
            self.link_kind.addItem(link_text(kind), kind)
        self.selection_label = QLabel("", self)
        self.description = _SummaryLine(self)
        self.description.setWordWrap(True)
        self.description.setForegroundRole(QPalette.PlaceholderText)
        # a platform the predictor cannot take reads in the error colour; a click on it
        # selects the device or link at fault
        style_by_theme(self.description, lambda dark: 'QLabel[problem="true"] { color: %s; }'
                       % ("#ff8a80" if dark else "#a4161a"))
        self.description.clicked.connect(self.show_fault)
        self._fault: tuple[str, int] | None = None
        self._selected = None
        self._fitted = False
        self._build_layout()
        self.combo.currentIndexChanged.connect(self._on_chosen)
        self.gpu_model.activated.connect(self._on_gpu_model)
        self.threads.editingFinished.connect(self._on_threads)
        self.link_kind.activated.connect(self._on_link_kind)
        self.scene.sigSelection.connect(self._on_selection)
        doc = editor.document
        doc.sigPlatformChanged.connect(self.refresh)
        doc.sigReset.connect(self.refresh)
        doc.sigReset.connect(lambda: QTimer.singleShot(0, self.view.fit_all))
        self.refresh()
        self._on_selection(None)

    def _build_layout(self) -> None:
        top = QHBoxLayout()
        top.addWidget(QLabel("Preset", self))
        top.addWidget(self.combo)
        top.addSpacing(16)
        top.addWidget(QLabel("Add", self))
        for b in self.buttons:
            top.addWidget(b)
        top.addStretch(1)
        sel = QHBoxLayout()
        sel.addWidget(self.selection_label)
        for w in (self.gpu_model, self.threads, self.link_kind):
            sel.addWidget(w)
        sel.addStretch(1)
        hint = QLabel("Drag devices in · Shift-drag between devices to link them · Delete "
                      "removes · F fits", self)
        hint.setForegroundRole(QPalette.PlaceholderText)
        sel.addWidget(hint)
        box = QVBoxLayout(self)
        box.setContentsMargins(8, 8, 8, 8)
        box.addLayout(top)
        box.addWidget(self.description)
        box.addLayout(sel)
        box.addWidget(self.view, 1)

    # --- follow the document ----------------------------------------------------------------

    def refresh(self) -> None:
        platform = self.editor.document.platform()
        preset = platform.get("preset") if isinstance(platform, dict) else None
        self.combo.blockSignals(True)
        custom = self.combo.findData(self.CUSTOM)
        if preset in PLATFORM_PRESETS:
            if custom >= 0:
                self.combo.removeItem(custom)
            self.combo.setCurrentIndex(self.combo.findData(preset))
        else:
            if custom < 0:
                self.combo.addItem(self.CUSTOM, self.CUSTOM)
            self.combo.setCurrentIndex(self.combo.findData(self.CUSTOM))
        self.combo.blockSignals(False)
        self.combo.setToolTip(f"{self.combo.currentText()}: start from a preset (one undoable "
                              "edit); editing its devices or links makes it a custom graph")
        text, self._fault = self.summary(platform)
        self.description.setText(text)
        problem = text.startswith("⚠")
        self.description.setToolTip("Click to select the device or link at fault"
                                    if self._fault else "")
        self.description.setCursor(Qt.PointingHandCursor if self._fault else Qt.ArrowCursor)
        if self.description.property("problem") != problem:
            self.description.setProperty("problem", problem)
            self.description.setForegroundRole(QPalette.WindowText if problem
                                               else QPalette.PlaceholderText)
            self.description.style().unpolish(self.description)
            self.description.style().polish(self.description)

    @staticmethod
    def summary(platform: dict) -> tuple[str, tuple[str, int] | None]:
        """What the predictor makes of the platform, or why it cannot; and the first
        device or link at fault (``("nodes"|"edges", index)``), if an issue names one."""
        try:
            p = resolve_platform(validate_platform(platform))
        except ScenarioError as exc:
            fault = next(((m[1], int(m[2])) for m in (
                _AT_FAULT.match(i.field) for i in exc.issues) if m), None)
            return "⚠ " + "; ".join(str(i) for i in exc.issues[:2]), fault
        if p.device == "cpu":
            return f"{p.description}: the CPU runs the step with {p.threads} thread(s).", None
        parts = [f"{p.gpus * p.nodes} × {p.device}", f"{p.nodes} node(s)"]
        parts.append(f"GPU links: {link_text(p.intra_link)}" if p.intra_link else
                     "no GPU links (PCIe 4.0 assumed)" if p.ranks > 1 else "one GPU")
        if p.inter_link:
            parts.append(f"network: {link_text(p.inter_link)} per GPU")
        return (p.description + ": " if "preset" in platform else "") + " · ".join(parts), None

    def show_fault(self) -> bool:
        """Select the device or link the summary line names, and scroll to it."""
        if self._fault is None:
            return False
        what, index = self._fault
        graph = self.scene.graph()
        item = None
        if what == "edges":
            item = next((x for x in self.scene.links if x.index == index), None)
        elif 0 <= index < len(graph["nodes"]):
            item = self.scene.devices.get(graph["nodes"][index].get("id"))
        if item is None:
            return False
        self.scene.clearSelection()
        item.setSelected(True)
        self.view.ensureVisible(item)
        return True

    def _on_selection(self, selected) -> None:
        self._selected = selected
        for w in (self.gpu_model, self.threads, self.link_kind):
            w.setVisible(False)
        if selected is None:
            self.selection_label.setText("Select a device or link to edit it.")
        elif isinstance(selected, tuple):
            self.selection_label.setText("Link kind")
            self.link_kind.setCurrentIndex(self.link_kind.findData(selected[2]))
            self.link_kind.setVisible(True)
        else:
            kind = selected.get("kind")
            self.selection_label.setText(f"{DEVICE_KINDS.get(kind, (kind,))[0]} "
                                         f"{selected.get('id')}")
            params = selected.get("params") or {}
            if kind == "gpu":
                model = str(params.get("model", "a100"))
                if self.gpu_model.findData(model) < 0:  # a full name from a file
                    self.gpu_model.addItem(model, model)
                self.gpu_model.setCurrentIndex(self.gpu_model.findData(model))
                self.gpu_model.setVisible(True)
            elif kind == "cpu" and self._cpu_only():
                try:
                    self.threads.setValue(int(params.get("threads", 1)))
                except (TypeError, ValueError):
                    self.threads.setValue(1)
                self.threads.setVisible(True)
            elif kind == "cpu":
                self.selection_label.setText(self.selection_label.text() + " (on a GPU "
                                             "platform its threads do not change the step)")

    def _cpu_only(self) -> bool:
        try:
            return resolve_platform(validate_platform(self.editor.document.platform())
                                    ).device == "cpu"
        except ScenarioError:
            return False

    def showEvent(self, event):
        super().showEvent(event)
        if not self._fitted:  # the first time it is laid out
            self._fitted = True
            QTimer.singleShot(0, self.view.fit_all)

    # --- edits ------------------------------------------------------------------------------

    def _on_chosen(self, index: int) -> None:
        name = self.combo.itemData(index)
        if name in PLATFORM_PRESETS:
            current = self.editor.document.platform()
            platform = {"preset": name}
            if name == "local-cpu" and "threads" in current:
                platform["threads"] = current["threads"]
            self.editor.set_platform(platform, {}, f"Use preset {name}")
            self.view.fit_all()

    def _on_gpu_model(self, _index: int) -> None:
        if isinstance(self._selected, dict) and self._selected.get("kind") == "gpu":
            self.scene.set_device_params(self._selected["id"],
                                         {"model": self.gpu_model.currentData()},
                                         all_gpus=True)

    def _on_threads(self) -> None:
        if not (isinstance(self._selected, dict) and self._selected.get("kind") == "cpu"):
            return
        platform = self.editor.document.platform()
        if platform.get("preset") == "local-cpu":  # the preset has its own threads
            if platform.get("threads", 1) != self.threads.value():
                self.editor.set_platform({"preset": "local-cpu",
                                          "threads": self.threads.value()},
                                         text="Change threads")
            return
        self.scene.set_device_params(self._selected["id"], {"threads": self.threads.value()})

    def _on_link_kind(self, _index: int) -> None:
        if isinstance(self._selected, tuple):
            self.scene.set_link_kind(self._selected[1], self.link_kind.currentData())
