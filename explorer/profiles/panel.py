"""The Profiles tab: the device profiles the predictor can use, what each one is made of and
how well it validates, and which one predictions use.

The choice is a view setting (kept in ``QSettings``, never in the scenario): ``None`` for the
bundled profile of the platform's device, ``"roofline"`` for datasheet figures only, or the
path of a profile file.

The CPU overheads (T1-T5 per op) come from that profile, or, until the app closes, from a GPU
trace the user recorded on their own host (``predict`` then gets ``overheads=``): the trace
is read and measured in a worker thread (:class:`~explorer.compare.loader.TraceLoader` with
:func:`measure_trace_overheads`).  Like the profile, it is a setting of the running app,
never part of the scenario; it applies to GPU platforms only.
"""
from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QPalette
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFrame,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSplitter,
    QToolButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from predictors.profiles import OverheadTable, bundled_profiles

from ..compare.loader import TraceLoader
from .details import (
    KIND_COLORS,
    KIND_SHORT,
    ProfileDetails,
    ProfileInfo,
    read_profile_info,
)
from .user_overheads import TraceOverheads, measure_trace_overheads

__all__ = ["ProfilesPanel", "AUTOMATIC",
           "ROOFLINE", "TRACE_FILTER"]

AUTOMATIC = "auto"  # settings value of the automatic choice (predict gets profile=None)
ROOFLINE = "roofline"
_SETTINGS_CHOICE = "profiles/choice"
_SETTINGS_ADDED = "profiles/added"
TRACE_FILTER = "Kineto traces (*.json *.json.gz);;All files (*)"
_ERROR_STYLE = "color: #a4161a;"
_NOTE_STYLE = "color: #7a4a00;"


class ProfilesPanel(QWidget):
    """Lists bundled and added profiles, shows the selected one, and holds the choice of
    profile for predictions.

    Also holds the CPU overheads' source: the profile's table, or one measured from a
    recorded GPU trace (until the app closes; GPU platforms only).

    Parameters
    ----------
    settings : where the choice and the added profiles persist
    measure_fn : reads trace files and measures their overheads, like
        :func:`measure_trace_overheads` (tests inject fakes)

    Signals
    -------
    sigChoiceChanged(object)   what ``predict`` gets as ``profile``: None, "roofline" or a path
    sigError(str)              a profile file that could not be read
    sigCalibrateRequested()    the user asked to calibrate this device
    sigOverheadsChanged(object)  the trace's :class:`TraceOverheads`, or None (profile's)
    sigOverheadsFailed(str)    a trace that could not be used, in one line
    """

    sigChoiceChanged = Signal(object)
    sigError = Signal(str)
    sigCalibrateRequested = Signal()
    sigOverheadsChanged = Signal(object)
    sigOverheadsFailed = Signal(str)

    def __init__(self, settings: QSettings, parent: QWidget | None = None,
                 measure_fn: Callable | None = None):
        super().__init__(parent)
        self.settings = settings
        self.infos: list[ProfileInfo] = []
        self.platform: dict | None = None
        self._trace: TraceOverheads | None = None
        self.loader = TraceLoader(measure_fn or measure_trace_overheads, self)
        self.choice_combo = QComboBox(self)
        self.choice_combo.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.choice_combo.setMinimumContentsLength(24)
        self.resolved = QLabel(self)
        self.resolved.setWordWrap(True)
        self.resolved.setForegroundRole(QPalette.PlaceholderText)
        self.tree = QTreeWidget(self)
        self.tree.setHeaderLabels(["profile", "kind"])
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.setTextElideMode(Qt.ElideMiddle)  # "NVIDIA A1…-40GB" tells GPUs apart
        self.tree.header().setSectionResizeMode(0, QHeaderView.Stretch)
        self.tree.header().setSectionResizeMode(1, QHeaderView.ResizeToContents)
        self.add_button = QPushButton("Add Profile…", self)
        self.add_button.setToolTip("Add a device profile file (JSON) to this list")
        self.remove_button = QPushButton("Remove", self)
        self.remove_button.setToolTip("Remove an added profile from this list (the file stays)")
        self.use_button = QPushButton("Use This Profile", self)
        self.calibrate_button = QPushButton("Calibrate…", self)
        self.details = ProfileDetails(self)

        choose = QGroupBox("Predictions use", self)
        cbox = QVBoxLayout(choose)
        cbox.addWidget(self.choice_combo)
        cbox.addWidget(self.resolved)
        cbox.addStretch(1)
        overheads = self._build_overheads(self)
        self.use_button.setToolTip("Predict with the selected profile")
        self.calibrate_button.setToolTip("Measure this CPU and make a profile of it")
        self.tree.setMinimumHeight(70)
        buttons = QGridLayout()
        buttons.setSpacing(4)
        buttons.addWidget(self.add_button, 0, 0)
        buttons.addWidget(self.remove_button, 0, 1)
        buttons.addWidget(self.use_button, 1, 0)
        buttons.addWidget(self.calibrate_button, 1, 1)
        left = QWidget(self)
        lbox = QVBoxLayout(left)
        lbox.setContentsMargins(0, 0, 0, 0)
        lbox.addWidget(QLabel("<b>Profiles</b>", self))
        lbox.addWidget(self.tree, 1)
        lbox.addLayout(buttons)
        split = QSplitter(Qt.Horizontal, self)
        # Scrolls instead of forcing its minimum height on the window (1280x800 must fit).
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.NoFrame)
        scroll.setWidget(self.details)
        split.addWidget(left)
        split.addWidget(scroll)
        split.setChildrenCollapsible(False)
        split.setStretchFactor(1, 1)
        left.setMinimumWidth(260)
        split.setSizes([290, 660])
        # The running app's choices across the top: they hold for every profile in the list.
        top = QHBoxLayout()
        top.setSpacing(8)
        top.addWidget(choose, 2)
        top.addWidget(overheads, 3)
        box = QVBoxLayout(self)
        box.setContentsMargins(10, 10, 10, 10)
        box.addLayout(top)
        box.addWidget(split, 1)

        self.tree.currentItemChanged.connect(self._on_selected)
        self.choice_combo.activated.connect(self._on_choice_activated)
        self.add_button.clicked.connect(self.add_dialog)
        self.remove_button.clicked.connect(self.remove_selected)
        self.use_button.clicked.connect(self._use_selected)
        self.calibrate_button.clicked.connect(self.sigCalibrateRequested)
        self.trace_button.clicked.connect(self.overheads_dialog)
        self.profile_overheads_button.clicked.connect(self.clear_overheads)
        self.overheads_cancel.clicked.connect(self.loader.cancel)
        self.loader.sigStarted.connect(self._on_load_started)
        self.loader.sigProgress.connect(self._on_load_progress)
        self.loader.sigFinished.connect(self._on_load_finished)
        self.loader.sigFailed.connect(self._on_load_failed)
        self.loader.sigCancelled.connect(self._on_load_cancelled)
        self._choice = self._stored_choice()
        self.reload()

    def _build_overheads(self, parent: QWidget) -> QGroupBox:
        """The "CPU overheads" choice: where they come from, the trace and profile buttons,
        progress of a trace being read, and the last error."""
        group = QGroupBox("CPU overheads (T1–T5 per op)", parent)
        group.setToolTip(
            "The CPU time around each op: the gap before it, dispatch, kernel launches.\n"
            "Per-op dispatch costs differ up to ~5x between hosts; a GPU profile's pooled\n"
            "table takes each cost from the public host that spent least on it, not from\n"
            "yours; a trace recorded on your own host makes GPU predictions right for it.")
        self.overheads_label = QLabel(group)
        self.overheads_label.setObjectName("overheadsSource")
        self.overheads_label.setWordWrap(True)
        self.overheads_label.setTextFormat(Qt.RichText)
        self.overheads_label.setForegroundRole(QPalette.PlaceholderText)
        self.overheads_note = QLabel(group)  # not used on the CPU / the last error
        self.overheads_note.setWordWrap(True)
        for label in (self.overheads_label, self.overheads_note):
            label.setMinimumWidth(60)  # a long file name must not widen the window
        self.overheads_note.hide()
        self.overheads_progress = QProgressBar(group)
        self.overheads_progress.setRange(0, 100)
        self.overheads_progress.setTextVisible(True)
        self.overheads_progress.setMaximumHeight(16)
        self.overheads_cancel = QToolButton(group)
        self.overheads_cancel.setText("Cancel")
        self.overheads_cancel.setToolTip("Stop reading the trace; the overheads stay as they "
                                         "are")
        self.overheads_busy = QWidget(group)
        busy = QHBoxLayout(self.overheads_busy)
        busy.setContentsMargins(0, 0, 0, 0)
        busy.addWidget(self.overheads_progress, 1)
        busy.addWidget(self.overheads_cancel)
        self.overheads_busy.hide()
        self.trace_button = QPushButton("From recorded trace…", group)
        self.trace_button.setToolTip(
            "Measure the CPU overheads from a Kineto trace (.json, .json.gz) that you\n"
            "recorded with torch.profiler on your own host; choose several files for the\n"
            "ranks of one job.  The trace must record the GPU.  Used for GPU platforms,\n"
            "until the app closes; the scenario is not changed.")
        self.profile_overheads_button = QPushButton("Use profile's", group)
        self.profile_overheads_button.setToolTip(
            "Use the CPU overheads stored in the profile again (for the bundled GPU\n"
            "profiles: pooled over public traces of several hosts)")
        text = QVBoxLayout()
        text.setSpacing(3)
        text.addWidget(self.overheads_label)
        text.addWidget(self.overheads_note)
        text.addWidget(self.overheads_busy)
        text.addStretch(1)
        buttons = QVBoxLayout()
        buttons.setSpacing(4)
        buttons.addWidget(self.trace_button)
        buttons.addWidget(self.profile_overheads_button)
        buttons.addStretch(1)
        lay = QHBoxLayout(group)
        lay.addLayout(text, 1)
        lay.addLayout(buttons)
        return group

    # --- the list -----------------------------------------------------------------------

    def added_paths(self) -> list[str]:
        value = self.settings.value(_SETTINGS_ADDED, [])
        if isinstance(value, str):
            value = [value]
        return [str(v) for v in (value or [])]

    def reload(self) -> None:
        """Re-read the bundled profiles and the added ones."""
        current = self.selected()
        bundled = [read_profile_info(p, bundled=True) for p in bundled_profiles()]
        seen = {str(i.path.resolve()) for i in bundled}
        added = [read_profile_info(p) for p in self.added_paths()
                 if str(Path(p).resolve()) not in seen and Path(p).exists()]
        self.infos = bundled + added
        self.tree.clear()
        for info in self.infos:
            item = QTreeWidgetItem(self.tree, [info.title, KIND_SHORT.get(info.kind,
                                                                          info.kind_label)])
            item.setToolTip(1, info.kind_label)
            item.setData(0, Qt.UserRole, str(info.path))
            item.setToolTip(0, f"{info.device}\n{info.path}")
            fg, bg = KIND_COLORS.get(info.kind, ("#333", "#eee"))
            item.setForeground(1, QBrush(QColor(fg)))
            item.setBackground(1, QBrush(QColor(bg)))
            if info.error:
                item.setForeground(0, QBrush(QColor("#a4161a")))
                item.setToolTip(0, info.error)
            if not info.bundled:
                font = QFont(item.font(0))
                font.setItalic(True)
                item.setFont(0, font)
        if not self.infos:
            self.tree.addTopLevelItem(QTreeWidgetItem(["(no profiles yet)", ""]))
        self._fill_choices()
        if current is not None:
            self.select_profile(current.path)
        elif self.infos:
            self.select_profile(self.infos[0].path)
        self._update_buttons()

    def info_for(self, path) -> ProfileInfo | None:
        key = str(Path(path).resolve())
        return next((i for i in self.infos if str(i.path.resolve()) == key), None)

    def selected(self) -> ProfileInfo | None:
        item = self.tree.currentItem()
        path = item.data(0, Qt.UserRole) if item is not None else None
        return self.info_for(path) if path else None

    def select_profile(self, path) -> bool:
        key = str(Path(path).resolve())
        for i in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(i)
            data = item.data(0, Qt.UserRole)
            if data and str(Path(data).resolve()) == key:
                self.tree.setCurrentItem(item)
                return True
        return False

    def add_profile(self, path, select: bool = True) -> ProfileInfo | None:
        """Add a profile file to the list (remembered); None, with ``sigError``, if it
        cannot be read."""
        path = Path(path).resolve()
        info = read_profile_info(path)
        if info.error:
            self.sigError.emit(f"Could not add the profile: {info.error}")
            return None
        if self.info_for(path) is None:
            self.settings.setValue(_SETTINGS_ADDED, self.added_paths() + [str(path)])
        self.reload()
        if select:
            self.select_profile(path)
        return self.info_for(path)

    def add_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Add Device Profile", "",
                                              "Device profiles (*.json);;All files (*)")
        if path:
            self.add_profile(path)

    def remove_selected(self) -> None:
        info = self.selected()
        if info is None or info.bundled:
            return
        key = str(info.path.resolve())
        self.settings.setValue(_SETTINGS_ADDED, [p for p in self.added_paths()
                                                 if str(Path(p).resolve()) != key])
        if self._choice == str(info.path):
            self.set_choice(None)
        self.reload()

    # --- the choice ---------------------------------------------------------------------

    def _stored_choice(self):
        value = str(self.settings.value(_SETTINGS_CHOICE, AUTOMATIC) or AUTOMATIC)
        if value == AUTOMATIC:
            return None
        if value != ROOFLINE and not Path(value).exists():
            return None  # the file went away: fall back to the automatic choice
        return value

    def choice(self):
        """What predictions use: None (automatic), ``"roofline"`` or a profile path."""
        return self._choice

    def set_choice(self, choice) -> None:
        """Choose None, ``"roofline"`` or a profile path (added to the list if new)."""
        if choice not in (None, ROOFLINE):
            choice = str(Path(choice).resolve())
            if self.info_for(choice) is None and self.add_profile(choice, False) is None:
                return
        self.settings.setValue(_SETTINGS_CHOICE, choice or AUTOMATIC)
        changed = choice != self._choice
        self._choice = choice
        self._fill_choices()
        if changed:
            self.sigChoiceChanged.emit(choice)

    def set_platform(self, platform: dict | None) -> None:
        """Follow the scenario's platform (the automatic choice depends on it)."""
        self.platform = platform
        self._update_resolved()
        self._on_selected(self.tree.currentItem())

    def automatic_info(self) -> ProfileInfo | None:
        """The bundled profile that the automatic choice picks for the current platform."""
        if not self.platform:
            return None
        try:
            from predictors.hardware.platforms import resolve_platform
            from predictors.profiles import default_profile
            p = resolve_platform(self.platform)
            prof = default_profile(p.device, "cpu" if p.device == "cpu" else "gpu", p.threads)
        except Exception:  # an invalid platform: the scenario's error bar says why
            return None
        if prof is None:
            return None
        return next((i for i in self.infos if i.bundled and i.name == prof.name), None) or \
            ProfileInfo(Path(prof.name), prof.name, prof.kind, prof.device.name, bundled=True)

    def choice_text(self) -> str:
        """The profile in use, in words, for the status area."""
        if self._choice == ROOFLINE:
            return "datasheet roofline"
        if self._choice is None:
            info = self.automatic_info()
            return (f"{info.title} ({info.kind_label})" if info else
                    "datasheet roofline (automatic: none bundled)")
        info = self.info_for(self._choice)
        return f"{info.title} ({info.kind_label})" if info else Path(self._choice).stem

    def _fill_choices(self) -> None:
        combo = self.choice_combo
        combo.blockSignals(True)
        combo.clear()
        combo.addItem("Automatic (bundled profile for the platform's device)", AUTOMATIC)
        combo.addItem("Datasheet roofline", ROOFLINE)
        if self.infos:
            combo.insertSeparator(combo.count())
        for info in self.infos:
            if not info.error:
                combo.addItem(f"{info.title} — {info.kind_label}", str(info.path))
        index = combo.findData(self._choice or AUTOMATIC)
        combo.setCurrentIndex(max(0, index))
        combo.blockSignals(False)
        self._update_resolved()

    def _update_resolved(self) -> None:
        if self._choice is None:
            text = f"→ {self.choice_text()}"
            if self.platform:
                text += f" for {self._device_words()}"
                note = self._other_cpu_note()
                if note:
                    text += f"\n⚠ {note}"
        elif self._choice == ROOFLINE:
            text = "Peak FLOP/s and bandwidth from datasheets; no learned kernel models."
        else:
            info = self.info_for(self._choice)
            text = f"device: {info.device}" if info else self._choice
        self.resolved.setText(text)
        self._update_overheads()

    # --- the CPU overheads ---------------------------------------------------------------

    def trace_overheads(self) -> TraceOverheads | None:
        """The overheads measured from the user's trace (None: the profile's)."""
        return self._trace

    def overheads(self) -> OverheadTable | None:
        """What ``predict`` gets as ``overheads``: the trace's table where the platform has
        GPUs, else None (the profile's)."""
        return self._trace.table if self._trace is not None and self.platform_has_gpu() \
            else None

    def platform_has_gpu(self) -> bool:
        """True when the platform's device is a GPU (False for the CPU or an invalid one)."""
        if not self.platform:
            return False
        try:
            from predictors.hardware.platforms import resolve_platform
            return resolve_platform(self.platform).device != "cpu"
        except Exception:
            return False

    def overheads_dialog(self) -> None:
        """Ask for trace file(s) and measure their overheads in the background."""
        paths, _ = QFileDialog.getOpenFileNames(
            self, "CPU Overheads From a Recorded Trace (several files: the ranks of one job)",
            "", TRACE_FILTER)
        if paths:
            self.load_overheads(paths)

    def load_overheads(self, paths) -> int:
        """Start reading ``paths`` in a worker thread (a load in progress is cancelled);
        the choice changes when the overheads are measured.  Returns the load's id."""
        return self.loader.load([os.fspath(p) for p in paths])

    def set_trace_overheads(self, measured: TraceOverheads | None) -> None:
        """Use ``measured`` (None: the profile's overheads) and say so."""
        changed = measured is not self._trace
        self._trace = measured
        self._update_overheads()
        if changed:
            self.sigOverheadsChanged.emit(measured)

    def clear_overheads(self) -> None:
        """Back to the profile's overheads (a trace being read is cancelled)."""
        self.loader.cancel()
        self._show_overheads_note("")
        self.set_trace_overheads(None)

    def overheads_text(self) -> str:
        """Where the overheads come from, in a few words."""
        if self._trace is not None:
            return f"measured from {self._trace.files_text} ({self._trace.ops:,} ops)"
        return "profile's table"

    def shutdown(self, timeout_ms: int = 10000) -> bool:
        """Cancel a trace being read and join its thread (the window is closing)."""
        return self.loader.shutdown(timeout_ms)

    def _profile_overheads(self) -> tuple[str, str, int]:
        """(whose, source, per-op entries) of the overheads the chosen profile brings."""
        info = None
        if self._choice is None:
            info = self.automatic_info()
        elif self._choice != ROOFLINE:
            info = self.info_for(self._choice)
        if info is not None and info.overheads_source:
            return info.title, info.overheads_source, info.overhead_ops
        from predictors.costs.overheads import default_overheads
        table = default_overheads("gpu" if self.platform_has_gpu() else "cpu")
        return "built-in defaults", table.source, len(table.per_op)

    def _update_overheads(self) -> None:
        if not hasattr(self, "overheads_label"):
            return
        if self._trace is not None:
            t = self._trace
            paths = "\n".join(t.paths)
            color = "#1b5e20" if self.platform_has_gpu() else "#667"  # grey: not used
            self.overheads_label.setText(
                f"<span style='color:{color}'><b>measured from {html.escape(t.files_text)}"
                f"</b> ({t.ops:,} ops)</span>")
            self.overheads_label.setToolTip(
                f"{t.table.source}\n{len(t.table.per_op)} per-op entries\n{paths}")
            if not self.platform_has_gpu() and not self._error_shown:
                self._show_overheads_note(
                    "Not used: the platform is the local CPU, where the calibrated "
                    "profile's overheads apply. Used again on a GPU platform.", _NOTE_STYLE)
            elif not self._error_shown:
                self._show_overheads_note("")
        else:
            whose, source, n = self._profile_overheads()
            short = source
            if len(short) > 64:  # the whole text is in the tooltip
                short = short[:64].rsplit(" ", 1)[0]
                if short.count("(") > short.count(")"):  # no half parenthesis
                    short = short[:short.rindex("(")]
                short = short.rstrip(" ,:") + " …"
            self.overheads_label.setText(
                f"profile's table ({n} ops): "
                f"<span style='color:#778'>{html.escape(short)}</span>")
            self.overheads_label.setToolTip(f"{whose}: {source}\n{n} per-op entries")
            if not self._error_shown:
                self._show_overheads_note("")
        self.profile_overheads_button.setEnabled(self._trace is not None
                                                 or self.loader.is_running())

    _error_shown = False

    def _show_overheads_note(self, text: str, style: str = "", error: bool = False) -> None:
        self._error_shown = error and bool(text)
        self.overheads_note.setText(text)
        self.overheads_note.setStyleSheet(style)
        self.overheads_note.setToolTip(text)
        self.overheads_note.setVisible(bool(text))

    def _on_load_started(self, paths) -> None:
        self._show_overheads_note("")
        self.overheads_progress.setValue(0)
        self.overheads_progress.setFormat("reading %p%")
        self.overheads_busy.setToolTip("\n".join(paths))
        self.overheads_busy.show()
        self.profile_overheads_button.setEnabled(True)

    def _on_load_progress(self, fraction: float, stage: str) -> None:
        self.overheads_progress.setValue(int(round(100 * max(0.0, min(1.0, fraction)))))
        self.overheads_progress.setToolTip(stage)

    def _on_load_finished(self, measured) -> None:
        self.overheads_busy.hide()
        self.set_trace_overheads(measured)

    def _on_load_failed(self, message: str) -> None:
        self.overheads_busy.hide()
        line = " ".join(str(message).split())  # one line, whatever the message holds
        self._show_overheads_note(f"Could not use the trace: {line}", _ERROR_STYLE, True)
        self._update_overheads()  # the previous choice stays
        self.sigOverheadsFailed.emit(line)

    def _on_load_cancelled(self) -> None:
        self.overheads_busy.hide()
        self._update_overheads()

    def _other_cpu_note(self) -> str | None:
        """Why the automatic CPU profile may be off: it describes another kind of CPU."""
        try:
            from predictors.hardware.platforms import resolve_platform
            from predictors.profiles import default_profile, other_cpu_note
            p = resolve_platform(self.platform)
            if p.device != "cpu":
                return None
            return other_cpu_note(default_profile("cpu", "cpu", p.threads),
                                  how="Calibrate… (below)")
        except Exception:  # an invalid platform: the scenario's error bar says why
            return None

    def _device_words(self) -> str:
        try:
            from predictors.hardware.platforms import resolve_platform
            p = resolve_platform(self.platform)
        except Exception:
            return "this platform"
        return f"local CPU, {p.threads} thread(s)" if p.device == "cpu" else p.device

    def _on_choice_activated(self, index: int) -> None:
        data = self.choice_combo.itemData(index)
        self.set_choice(None if data == AUTOMATIC else data)

    def _use_selected(self) -> None:
        info = self.selected()
        if info is not None and not info.error:
            self.set_choice(str(info.path))

    def _on_selected(self, item, previous=None) -> None:
        info = self.selected()
        self.details.show_info(info, self._mismatch(info))
        self._update_buttons()

    def _mismatch(self, info: ProfileInfo | None) -> str:
        """A warning when a profile describes another kind of device than the platform's."""
        if info is None or info.error or not self.platform:
            return ""
        try:
            from predictors.hardware.platforms import resolve_platform
            p = resolve_platform(self.platform)
        except Exception:
            return ""
        if (p.device == "cpu") == (info.device_kind == "cpu") and \
                (p.device == "cpu" or p.device == info.device):
            return ""
        return (f"This profile describes {info.device or 'another device'}; the platform's "
                f"device is {self._device_words()}. Predictions with it use its device figures.")

    def _update_buttons(self) -> None:
        info = self.selected()
        self.remove_button.setEnabled(info is not None and not info.bundled)
        self.use_button.setEnabled(info is not None and not info.error
                                   and self._choice != str(info.path))
