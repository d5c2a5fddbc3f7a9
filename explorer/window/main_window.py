"""The main window: canvases in the middle, palette and inspector at the sides, the predicted
timeline and its summary below, progress and cancel in the status bar; the menus, files,
clipboard and Help."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from PySide6.QtCore import QMimeData, QSettings, Qt, QTimer
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QTabWidget,
    QWidget,
)

from predictors.hardware.platforms import PLATFORM_PRESETS
from predictors.scenario.format import (
    ScenarioError,
    load_scenario,
    migrate_scenario,
    read_scenario,
    save_scenario,
    validate_scenario,
)

from ..canvas.inspector import Inspector
from ..canvas.model_scene import ModelScene, ModelView
from ..canvas.palette import BlockPalette
from ..compare import install_compare
from ..document.editor import FRAGMENT_FORMAT, DocumentEditor
from ..document.scenario_document import empty_scenario
from ..platform import PlatformPage
from ..profiles.install import install_profiles
from ..run.prediction import PredictionController
from ..run.summary import SummaryPanel
from ..sharding import install_sharding
from ..sweep import install_sweep
from ..report.dialog import export_report_dialog
from ..timeline.export import EXPORT_FORMATS, export_timeline_image
from ..timeline.gantt import GanttWidget
from ..timeline.range_totals import with_range_totals
from ..timeline.lane_rows import ROW_ZOOM
from ..widgets import ErrorBar, PredictionProgress, stacked
from .autosave import Autosave
from .help import USER_GUIDE, ShortcutsDialog, UserGuideDialog, action_shortcuts
from .theme import install_theme

__all__ = ["MainWindow", "ErrorBar", "PlatformPage", "DEFAULT_SCENARIO", "APP_NAME"]

# what the error bar's click selects when the platform is at fault (an id the app never
# gives a block)
PLATFORM_FAULT = ":platform"

APP_NAME = "ML DSE Explorer"
# copied blocks on the clipboard (also as plain text: JSON anyone can read)
FRAGMENT_MIME = f"application/x-{FRAGMENT_FORMAT.replace('/', '-')}+json"
DEFAULT_SCENARIO = Path(__file__).resolve().parents[2] / "resources" / "scenarios" / \
    "small_dlrm.json"
MAX_RECENT = 8


class MainWindow(QMainWindow):
    """The explorer's main window on one scenario.

    Parameters
    ----------
    path : scenario file to open (``None``: the bundled default; ``""``: a new scenario)
    predict_fn : injected into the :class:`PredictionController` (tests use fakes)
    calibrate_fn : injected into the calibration runner (tests use fakes)
    rank_fn : injected into the Sharding dock's runner (tests use fakes)
    sweep_fn : injected into the Sweep dock's runner (tests use fakes)
    settings : where recent files and the window layout persist
    """

    def __init__(self, path: str | os.PathLike | None = None, *, predict_fn=None,
                 settings: QSettings | None = None, debounce_ms: int = 400,
                 calibrate_fn=None, rank_fn=None, sweep_fn=None,
                 autosave_folder: str | os.PathLike | None = None):
        super().__init__()
        self.settings = settings if settings is not None else QSettings("ml-dse", "explorer")
        self.path: Path | None = None
        self.prediction = None
        self._guide: UserGuideDialog | None = None
        self.editor = DocumentEditor(parent=self)
        self.controller = PredictionController(self.editor.document, predict_fn=predict_fn,
                                               debounce_ms=debounce_ms, parent=self)
        self._build_central()
        self._build_docks()
        self._build_status()
        self._build_actions()
        self._connect()
        self.compare = install_compare(self)  # Compare dock, Import Trace, drag and drop
        self.profiles = install_profiles(self, calibrate_fn)  # Profiles tab, calibration
        self.sharding = install_sharding(self, rank_fn)  # Sharding dock, Rank Shardings
        self.sweep = install_sweep(self, sweep_fn)  # Sweep dock, Run ▸ Sweep
        self.theme = install_theme(self)  # View ▸ Theme; light or dark as the desktop is
        # unsaved work goes to the app's own folder (None: tests and batch runs write none)
        self.autosave = (Autosave(self.editor, Path(autosave_folder), lambda: self.path,
                                  parent=self) if autosave_folder is not None else None)
        self.resize(1400, 900)
        self._default_state = self.saveState()
        geometry = self.settings.value("window/geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)
        state = self.settings.value("window/state")
        if state is not None:
            self.restoreState(state)
        if path is None:
            path = DEFAULT_SCENARIO
        if path:
            self.open_path(path)
        self._update_title()

    # --- construction -----------------------------------------------------------------------

    def _build_central(self) -> None:
        self.scene = ModelScene(self.editor)
        self.view = ModelView(self.scene)
        self.platform_page = PlatformPage(self.editor)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(self.view, "Model")
        self.tabs.addTab(self.platform_page, "Platform")
        self.canvas_error = ErrorBar()
        self.setCentralWidget(stacked(self.canvas_error, self.tabs))

    def _dock(self, title: str, name: str, widget: QWidget, area) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(name)
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        return dock

    def _build_docks(self) -> None:
        self.palette = BlockPalette()
        self.inspector = Inspector(self.editor)
        self.gantt = GanttWidget()
        self.timeline_error = ErrorBar()
        # a range dragged on the timeline lists its per-op totals under it
        gantt_box, self.range_totals = with_range_totals(self.gantt)
        timeline_box = stacked(self.timeline_error, gantt_box)
        self.summary = SummaryPanel()
        self.palette_dock = self._dock("Palette", "paletteDock", self.palette,
                                       Qt.LeftDockWidgetArea)
        self.inspector_dock = self._dock("Inspector", "inspectorDock", self.inspector,
                                         Qt.RightDockWidgetArea)
        self.timeline_dock = self._dock("Timeline", "timelineDock", timeline_box,
                                        Qt.BottomDockWidgetArea)
        self.summary_dock = self._dock("Summary", "summaryDock", self.summary,
                                       Qt.BottomDockWidgetArea)
        self.splitDockWidget(self.timeline_dock, self.summary_dock, Qt.Horizontal)
        self.setCorner(Qt.BottomLeftCorner, Qt.BottomDockWidgetArea)
        self.setCorner(Qt.BottomRightCorner, Qt.BottomDockWidgetArea)
        self._sized = False

    def _size_docks(self) -> None:
        w = max(self.width(), 800)
        self.resizeDocks([self.palette_dock, self.inspector_dock], [200, 340], Qt.Horizontal)
        self.resizeDocks([self.timeline_dock, self.summary_dock],
                         [int(w * 0.62), int(w * 0.38)], Qt.Horizontal)
        self.resizeDocks([self.timeline_dock], [int(self.height() * 0.42)], Qt.Vertical)

    def showEvent(self, event):
        super().showEvent(event)
        if not self._sized and self.settings.value("window/state") is None:
            self._sized = True
            self._size_docks()

    def _build_status(self) -> None:
        bar = self.statusBar()
        self.run_status = PredictionProgress()
        self.stage_label = self.run_status.stage_label
        self.progress = self.run_status.progress
        self.cancel_button = self.run_status.cancel_button
        self.platform_label = QLabel("")
        self.platform_label.setStyleSheet("padding: 0 6px;")   # the palette's text colour
        # Both permanent: Qt paints a temporary message ("Loaded …", "Saved …") over the
        # normal widgets without hiding them here, so the two texts overlapped.
        bar.addPermanentWidget(self.run_status)
        bar.addPermanentWidget(self.platform_label)
        self._set_busy(False)

    def _action(self, menu, text: str, slot, shortcut=None, tip: str = "") -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        if tip:
            action.setStatusTip(tip)
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    def _build_actions(self) -> None:
        mb = self.menuBar()
        m = mb.addMenu("&File")
        self.new_action = self._action(m, "&New", self.new_scenario, QKeySequence.New,
                                       "A new design from the bundled small DLRM")
        self.template_menu = m.addMenu("New from &Template")
        for path in sorted(DEFAULT_SCENARIO.parent.glob("*.json")):
            self._action(self.template_menu, _template_name(path),
                         lambda _=False, p=path: self.new_scenario(p),
                         tip=f"A new design from {path.name}")
        self.template_menu.addSeparator()
        self._action(self.template_menu, "Blank Canvas", lambda: self.new_scenario(None),
                     tip="An empty model: add an input, the blocks and a loss")
        self.open_action = self._action(m, "&Open…", self.open_dialog, QKeySequence.Open)
        self.recent_menu = m.addMenu("Open &Recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent_menu)
        m.addSeparator()
        self.save_action = self._action(m, "&Save", self.save, QKeySequence.Save)
        self.save_as_action = self._action(m, "Save &As…", self.save_as, QKeySequence.SaveAs)
        m.addSeparator()
        self.export_image_action = self._action(
            m, "Export Timeline &Image…", self.export_image_dialog, "Ctrl+E",
            "Write the whole predicted iteration as PNG, SVG or PDF")
        self.export_visible_action = self._action(
            m, "Export &Visible Range Image…",
            lambda: self.export_image_dialog(visible_only=True), "Ctrl+Alt+E",
            "Write the timeline's visible time range as PNG, SVG or PDF")
        self.export_trace_action = self._action(
            m, "Export &Chrome Trace…", self.export_trace_dialog, "Ctrl+Shift+E",
            "Write the predicted timeline as a Chrome trace (opens in Perfetto)")
        self.export_report_action = self._action(
            m, "Export &Report…", lambda: export_report_dialog(self), "Ctrl+Alt+R",
            "Write a design-review report (HTML or PDF) of what the window shows")
        m.addSeparator()
        self.quit_action = self._action(m, "&Quit", self.close, QKeySequence.Quit)

        m = mb.addMenu("&Edit")
        stack = self.editor.undo_stack
        self.undo_action = stack.createUndoAction(self, "&Undo")
        self.undo_action.setShortcut(QKeySequence.Undo)
        self.redo_action = stack.createRedoAction(self, "&Redo")
        self.redo_action.setShortcut(QKeySequence.Redo)
        m.addAction(self.undo_action)
        m.addAction(self.redo_action)
        m.addSeparator()
        # Canvas-only shortcuts (like Delete below): text fields keep their own clipboard.
        for attr, text, slot, key in (("cut_action", "Cu&t", self.cut_blocks, QKeySequence.Cut),
                                      ("copy_action", "&Copy", self.copy_blocks,
                                       QKeySequence.Copy),
                                      ("paste_action", "&Paste", self.paste_blocks,
                                       QKeySequence.Paste)):
            action = self._action(m, text, slot, key)
            action.setShortcutContext(Qt.WidgetWithChildrenShortcut)
            self.view.addAction(action)
            setattr(self, attr, action)
        self.delete_action = self._action(m, "&Delete", self._delete_selected,
                                          QKeySequence.Delete)
        # The canvas handles Delete itself; the shortcut here must not steal it from text fields.
        self.delete_action.setShortcutContext(Qt.WidgetWithChildrenShortcut)
        self.view.addAction(self.delete_action)
        self.select_all_action = self._action(m, "Select &All", self._select_all,
                                              QKeySequence.SelectAll)
        self.select_all_action.setShortcutContext(Qt.WidgetWithChildrenShortcut)
        self.view.addAction(self.select_all_action)

        m = mb.addMenu("&Run")
        self.predict_action = self._action(m, "&Predict", self.predict_now, "Ctrl+R",
                                           "Predict the iteration now")
        self.cancel_action = self._action(m, "&Cancel", self.controller.cancel, "Ctrl+.",
                                          "Cancel the running prediction")

        m = mb.addMenu("&View")
        for dock in (self.palette_dock, self.inspector_dock, self.timeline_dock,
                     self.summary_dock):
            m.addAction(dock.toggleViewAction())
        m.addSeparator()
        self._action(m, "Fit &Canvas", self.view.fit_all, None)
        self._action(m, "Fit &Timeline", self.gantt.fit, None)
        self._action(m, "Ta&ller Timeline Rows", lambda: self.gantt.zoom_rows(ROW_ZOOM),
                     "Ctrl+Alt+=", "Taller lanes (on the timeline: + or Ctrl+wheel)")
        self._action(m, "S&horter Timeline Rows",
                     lambda: self.gantt.zoom_rows(1 / ROW_ZOOM), "Ctrl+Alt+-",
                     "Shorter lanes (on the timeline: − or Ctrl+wheel)")
        self.critical_path_action = action = QAction("Critical &Path", self)
        action.setCheckable(True)
        action.setShortcut(QKeySequence("Ctrl+Shift+C"))
        action.setStatusTip("Highlight the chain of ops that sets the iteration time")
        action.toggled.connect(self.gantt.set_critical_path_shown)
        m.addAction(action)
        m.setToolTipsVisible(True)  # a disabled Critical Path says why
        self.gantt.sigCriticalPathAvailable.connect(self._on_critical_path_available)
        self._on_critical_path_available(False)
        m.addSeparator()
        self._action(m, "&Reset Layout", self.reset_layout, None)

        m = mb.addMenu("&Help")
        self.user_guide_action = self._action(m, "&User Guide", self.show_user_guide,
                                              QKeySequence.HelpContents,
                                              "Read the user guide")
        self.shortcuts_action = self._action(m, "&Keyboard Shortcuts", self.show_shortcuts,
                                             None, "List the keyboard shortcuts")
        m.addSeparator()
        self._action(m, "&About", self.about, None)

    def _connect(self) -> None:
        c = self.controller
        c.sigStarted.connect(self._on_started)
        c.sigProgress.connect(self._on_progress)
        c.sigFinished.connect(self._on_finished)
        c.sigFailed.connect(self._on_failed)
        c.sigCancelled.connect(self._on_cancelled)
        self.cancel_button.clicked.connect(c.cancel)
        doc = self.editor.document
        doc.sigChanged.connect(self._on_document_changed)
        doc.sigPlatformChanged.connect(self._update_platform_label)
        doc.sigReset.connect(self._update_platform_label)
        self.editor.undo_stack.cleanChanged.connect(self._update_title)
        self.editor.sigMessage.connect(lambda msg: self.statusBar().showMessage(msg, 6000))
        self.palette.sigAddRequested.connect(
            lambda kind: self.editor.add_block(kind, (self.view.view_center().x(),
                                                      self.view.view_center().y())))
        self.scene.sigSelectionChangedIds.connect(self._on_selection)
        for bar in (self.canvas_error, self.timeline_error):
            bar.sigNodeClicked.connect(self._select_node)
            bar.sigDismissed.connect(lambda: self._clear_error(kind="file"))

    # --- files ------------------------------------------------------------------------------

    def confirm_discard(self) -> bool:
        """Ask before losing unsaved edits; True to go on."""
        if not self.editor.is_modified():
            return True
        answer = QMessageBox.question(
            self, APP_NAME, "The scenario has unsaved changes. Save them first?",
            QMessageBox.Save | QMessageBox.Discard | QMessageBox.Cancel, QMessageBox.Save)
        if answer == QMessageBox.Save:
            return self.save()
        return answer == QMessageBox.Discard

    def new_scenario(self, template: Path | None = DEFAULT_SCENARIO) -> None:
        """A new, untitled design: a copy of ``template`` (a bundled scenario), or an empty
        model with ``None``."""
        if not self.confirm_discard():
            return
        doc = empty_scenario()
        if template is not None:
            try:
                doc = load_scenario(template)
                doc["name"] = f"{doc['name']} (copy)"
            except (ScenarioError, OSError) as exc:
                self._show_error(f"Could not read the template {Path(template).name}: {exc}",
                                 kind="file")
                return
        self.path = None
        self._clear_error()
        self._clear_results()
        self.editor.load(doc)
        self._update_title()
        QTimer.singleShot(0, self.view.fit_all)

    def open_path(self, path: str | os.PathLike) -> bool:
        """Open a scenario file; on error show it and keep the current document.

        A file that is a scenario but not a valid one (an unfinished design saved as it
        was) opens with its problems in the error bar and on its blocks."""
        name = Path(path).name
        problems: list = []
        try:
            raw = read_scenario(path)
            try:
                doc = validate_scenario(raw, str(path))
            except ScenarioError as exc:
                doc, problems = migrate_scenario(raw, str(path)), exc.issues
            self.editor.load(doc)
        except ScenarioError as exc:
            return self._open_failed(f"Could not open {name}: " + "; ".join(
                str(i) for i in exc.issues[:3]))
        except Exception as exc:  # noqa: BLE001 - a file must never take the window down
            return self._open_failed(f"Could not open {name}: {type(exc).__name__}: {exc}")
        self.path = Path(path).resolve()
        self._clear_error()
        self._clear_results()
        self._remember_recent(self.path)
        self._update_title()
        QTimer.singleShot(0, self.offer_autosave)
        if problems:
            self._show_error(f"Opened {name} with {len(problems)} problem(s) to fix before it "
                             "can be predicted: " + "; ".join(str(i) for i in problems[:3]),
                             next((i.node_id for i in problems if i.node_id), None))
        QTimer.singleShot(0, self.view.fit_all)
        return True

    def host_checked(self) -> None:
        """This host's speed was checked: predict again with the bundled CPU profile
        scaled to it."""
        self.statusBar().showMessage("Host speed checked: CPU profile scaled to it", 8000)
        if self.editor.document is not None:
            self.controller.schedule()

    def _open_failed(self, message: str) -> bool:
        self._show_error(message, kind="file")
        self.statusBar().showMessage(message, 10000)
        return False

    def _clear_results(self) -> None:
        """Forget the last prediction: another document's results must not be shown or
        exported as this one's."""
        self.prediction = None
        self.gantt.set_timeline(None)
        self.summary.clear()
        self._set_stale(False)

    def open_dialog(self) -> None:
        if not self.confirm_discard():
            return
        start = str(self.path.parent) if self.path else str(DEFAULT_SCENARIO.parent)
        path, _ = QFileDialog.getOpenFileName(self, "Open Scenario", start,
                                              "Scenarios (*.json);;All files (*)")
        if path:
            self.open_path(path)

    def save_to(self, path: str | os.PathLike) -> bool:
        """Write the document atomically to ``path`` and make it the current file."""
        try:
            save_scenario(self.editor.document.snapshot(), path)
        except OSError as exc:
            QMessageBox.warning(self, APP_NAME, f"Could not save {path}: {exc}")
            return False
        if self.autosave is not None:
            self.autosave.discard(self.path)  # this design's earlier autosave, if any
        self.path = Path(path).resolve()
        self.editor.mark_saved()
        self._remember_recent(self.path)
        self._update_title()
        self.statusBar().showMessage(f"Saved {self.path.name}", 4000)
        return True

    def save(self) -> bool:
        return self.save_to(self.path) if self.path else self.save_as()

    def save_as(self) -> bool:
        start = str(self.path) if self.path else "scenario.json"
        path, _ = QFileDialog.getSaveFileName(self, "Save Scenario As", start,
                                              "Scenarios (*.json)")
        if not path:
            return False
        if not path.endswith(".json"):
            path += ".json"
        return self.save_to(path)

    def _remember_recent(self, path: Path) -> None:
        recent = [p for p in self.recent_files() if p != str(path)]
        self.settings.setValue("recentFiles", [str(path)] + recent[:MAX_RECENT - 1])

    def recent_files(self) -> list[str]:
        value = self.settings.value("recentFiles", [])
        if isinstance(value, str):
            value = [value]
        return [str(v) for v in (value or [])]

    def _fill_recent_menu(self) -> None:
        self.recent_menu.clear()
        files = [p for p in self.recent_files() if os.path.exists(p)]
        for p in files:
            action = self.recent_menu.addAction(Path(p).name)
            action.setToolTip(p)
            action.triggered.connect(lambda checked=False, p=p: self.confirm_discard()
                                     and self.open_path(p))
        if not files:
            self.recent_menu.addAction("(none)").setEnabled(False)

    # --- exports ----------------------------------------------------------------------------

    def export_title(self) -> str:
        """The title of an exported picture: the scenario, the platform (its device) and
        the device profile the prediction used."""
        p = self.prediction
        if p is None:
            return "Timeline"
        profile = str(getattr(p, "profile", "") or "")
        profile = "datasheet roofline" if profile in ("", "roofline") else profile
        return f"{p.scenario_name} · {p.platform} ({p.device}) · profile: {profile}"

    def export_timeline(self, path: str | os.PathLike, visible_only: bool = False) -> Path:
        """Write the current timeline picture (``.png``, ``.svg`` or ``.pdf``): the whole
        iteration, or with ``visible_only`` the time range the timeline shows."""
        if self.prediction is None:
            raise RuntimeError("no prediction to export yet")
        x_range = self.gantt.x_range() if visible_only else None
        return export_timeline_image(self.prediction.timeline, path, x_range=x_range,
                                     title=self.export_title())

    def export_image_dialog(self, visible_only: bool = False) -> None:
        if self.prediction is None:
            self.statusBar().showMessage("No prediction to export yet", 5000)
            return
        filters = ";;".join(f"{desc} (*{ext})" for ext, desc in EXPORT_FORMATS.items())
        stem = self.path.stem if self.path else "timeline"
        suffix = "-visible" if visible_only else ""
        path, chosen = QFileDialog.getSaveFileName(
            self, "Export Visible Range Image" if visible_only else "Export Timeline Image",
            f"{stem}-timeline{suffix}.png", filters)
        if not path:
            return
        if Path(path).suffix.lower() not in EXPORT_FORMATS:
            path += chosen[chosen.index("*") + 1:chosen.index(")")]
        try:
            self.export_timeline(path, visible_only=visible_only)
        except (OSError, ValueError) as exc:
            QMessageBox.warning(self, APP_NAME, f"Could not export: {exc}")
            return
        self.statusBar().showMessage(f"Exported {path}", 5000)

    def export_trace_dialog(self) -> None:
        if self.prediction is None:
            self.statusBar().showMessage("No prediction to export yet", 5000)
            return
        stem = self.path.stem if self.path else "timeline"
        path, _ = QFileDialog.getSaveFileName(self, "Export Chrome Trace", f"{stem}-trace.json",
                                              "Chrome trace (*.json *.json.gz)")
        if path:
            try:
                self.prediction.timeline.save_chrome_trace(path)
            except OSError as exc:
                QMessageBox.warning(self, APP_NAME, f"Could not export: {exc}")
                return
            self.statusBar().showMessage(f"Exported {path}", 5000)

    # --- prediction feedback ----------------------------------------------------------------

    def predict_now(self) -> None:
        self.controller.start()

    def _on_document_changed(self) -> None:
        self._update_title()
        if self.prediction is not None:
            self._set_stale(True)

    def _set_stale(self, stale: bool) -> None:
        self.gantt.set_stale(stale)
        self.summary.set_stale(stale)

    def _set_busy(self, busy: bool) -> None:
        self.run_status.set_busy(busy)
        if hasattr(self, "cancel_action"):
            self.cancel_action.setEnabled(busy)

    def _on_started(self) -> None:
        self.progress.setValue(0)
        self.stage_label.setText("Predicting…")
        self._set_busy(True)
        if self.prediction is not None:
            self._set_stale(True)

    def _on_progress(self, fraction: float, stage: str) -> None:
        self.run_status.set_fraction(fraction, stage)

    def _on_finished(self, prediction) -> None:
        self.prediction = prediction
        self._set_busy(False)
        self._clear_error(kind="prediction")  # a file error stays until dismissed
        self.gantt.set_timeline(prediction.timeline)
        self.summary.set_prediction(prediction)
        self.stage_label.setText(f"Iteration {prediction.iteration_ms:.3f} ms "
                                 f"(predicted in {prediction.elapsed_s:.2f} s)")

    def _on_failed(self, message: str) -> None:
        self._set_busy(False)
        exc = self.controller.last_error
        node_id = None
        if isinstance(exc, ScenarioError) and exc.issues:
            node_id = next((i.node_id for i in exc.issues if i.node_id), None) or (
                PLATFORM_FAULT if any(i.field.startswith("platform") for i in exc.issues)
                else None)
            self.scene.set_prediction_issues(exc.issues)
        self._show_error(message, node_id)
        self.stage_label.setText("Prediction failed")

    def _on_cancelled(self) -> None:
        self._set_busy(False)
        self.stage_label.setText("Prediction cancelled")

    def _show_error(self, message: str, node_id: str | None = None,
                    kind: str = "prediction") -> None:
        for bar in (self.canvas_error, self.timeline_error):
            bar.show_error(message, node_id, kind)

    def _clear_error(self, kind: str | None = None) -> None:
        """Hide the error bars (only those showing a ``kind`` error, when given)."""
        for bar in (self.canvas_error, self.timeline_error):
            if kind is None or bar.kind == kind:
                bar.clear()

    # --- clipboard ----------------------------------------------------------------------------

    def copy_blocks(self, verb: str = "copy") -> bool:
        """Put the selected blocks (and the edges among them) on the clipboard."""
        if self._on_platform_tab():
            self.statusBar().showMessage(f"{verb.capitalize()} works on the model canvas's "
                                         "blocks", 4000)
            return False
        ids = self.scene.selected_node_ids()
        if not ids:
            self.statusBar().showMessage(f"Select blocks to {verb}", 4000)
            return False
        self._to_clipboard(self.editor.fragment(ids))
        done = {"copy": "Copied", "cut": "Cut"}[verb]
        self.statusBar().showMessage(f"{done} {len(ids)} block(s)", 4000)
        return True

    def cut_blocks(self) -> bool:
        """Copy, then delete the selection (one undo step)."""
        ids = self.scene.selected_node_ids()
        if self.copy_blocks("cut"):
            self.editor.delete(ids)
            return True
        return False

    def paste_blocks(self) -> list[str]:
        """Paste the clipboard's blocks beside the originals, selected (one undo step)."""
        if self._on_platform_tab():  # blocks land on the model canvas: show it
            self.tabs.setCurrentWidget(self.view)
        mime = QGuiApplication.clipboard().mimeData()
        raw = bytes(mime.data(FRAGMENT_MIME)) if mime is not None and mime.hasFormat(
            FRAGMENT_MIME) else (mime.text().encode() if mime is not None else b"")
        try:
            fragment = json.loads(raw or b"null")
        except ValueError:
            fragment = None
        ids = self.editor.paste(fragment)
        if ids:
            self.tabs.setCurrentWidget(self.view)
            self.scene.select_nodes(ids)
        return ids

    @staticmethod
    def _to_clipboard(fragment: dict) -> None:
        data = json.dumps(fragment).encode()
        mime = QMimeData()
        mime.setData(FRAGMENT_MIME, data)
        mime.setText(data.decode())
        QGuiApplication.clipboard().setMimeData(mime)

    # --- misc -------------------------------------------------------------------------------

    def _on_platform_tab(self) -> bool:
        return self.tabs.currentWidget() is self.platform_page

    def _delete_selected(self) -> None:
        """Edit ▸ Delete acts on the canvas in front: blocks, or devices and links."""
        if self._on_platform_tab():
            self.platform_page.scene.delete_selected()
        else:
            self.scene.delete_selected()

    def _select_all(self) -> None:
        if self._on_platform_tab():
            for item in self.platform_page.scene.items():
                item.setSelected(True)
        else:
            self.scene.select_all()

    def _select_node(self, node_id: str) -> None:
        if node_id == PLATFORM_FAULT:    # the Platform tab, the device or link at fault
            self.tabs.setCurrentWidget(self.platform_page)
            self.platform_page.show_fault()
        elif self.editor.document.has_node(node_id):
            self.tabs.setCurrentWidget(self.view)
            self.scene.select_nodes([node_id])
            item = self.scene.block_item(node_id)
            if item is not None:
                self.view.centerOn(item)

    def _on_selection(self, ids: list) -> None:
        self.inspector.follow_selection(ids)

    def _update_platform_label(self) -> None:
        platform = self.editor.document.platform()
        preset = platform.get("preset") if isinstance(platform, dict) else None
        if preset in PLATFORM_PRESETS:
            text = f"platform: {preset} ({PLATFORM_PRESETS[preset].description})"
        else:
            text = "platform: custom graph"
        self.platform_label.setText(text)

    def _update_title(self, *args) -> None:
        modified = self.editor.is_modified()
        name = self.path.name if self.path else "Untitled"
        self.setWindowTitle(f"{name}{'*' if modified else ''} — {APP_NAME}")

    def _on_critical_path_available(self, available: bool) -> None:
        """View ▸ Critical Path is enabled only for a timeline that has one."""
        from ..timeline.gantt import NO_CRITICAL_PATH

        action = self.critical_path_action
        action.setEnabled(available)
        if available:
            action.setToolTip("Highlight the critical path (Ctrl+Shift+C)")
        elif self.gantt.timeline is None:
            action.setToolTip("No prediction yet: the critical path comes with a prediction.")
        else:
            action.setToolTip(NO_CRITICAL_PATH)

    def reset_layout(self) -> None:
        self.restoreState(self._default_state)
        for dock in (self.palette_dock, self.inspector_dock, self.timeline_dock,
                     self.summary_dock):
            dock.show()
        self._size_docks()

    def show_user_guide(self) -> UserGuideDialog | None:
        """Help ▸ User Guide, in a window beside this one (None when the guide is missing)."""
        if not USER_GUIDE.exists():
            self.statusBar().showMessage(f"The user guide is not installed ({USER_GUIDE})",
                                         8000)
            return None
        if self._guide is None:
            self._guide = UserGuideDialog(USER_GUIDE, self)
        self._guide.show()
        self._guide.raise_()
        self._guide.activateWindow()
        return self._guide

    def show_shortcuts(self) -> ShortcutsDialog:
        """Help ▸ Keyboard Shortcuts: the shortcuts of the window's actions as they are now."""
        dialog = ShortcutsDialog(action_shortcuts(self), self)
        dialog.setAttribute(Qt.WA_DeleteOnClose)
        dialog.show()
        return dialog

    def about(self) -> None:
        QMessageBox.about(self, f"About {APP_NAME}",
                          f"<b>{APP_NAME}</b><p>Predicts one training iteration of a model on a "
                          "platform, without running it, and shows the timeline.</p>")

    def offer_autosave(self) -> None:
        """Offer back an autosaved version of this design that is newer than its file, or
        of an untitled design the app closed on."""
        if self.autosave is None:
            return
        path = next((p for p in dict.fromkeys((self.path, None))
                     if self.autosave.pending(p) is not None), False)
        if path is False:
            return
        doc = self.autosave.pending(path)
        when = time.strftime("%H:%M on %d %b", time.localtime(doc["saved_at"]))
        name = path.name if path else "an untitled design"
        answer = QMessageBox.question(
            self, APP_NAME, f"An autosaved version of {name} from {when} has changes the "
            "file does not have (the app closed before they were saved). Restore it?",
            QMessageBox.Yes | QMessageBox.No, QMessageBox.Yes)
        if answer == QMessageBox.Yes:
            self.path = path
            self.editor.load(doc["scenario"])
            self.editor.undo_stack.resetClean()  # restored, not saved yet
            self._update_title()
        else:
            self.autosave.discard(path)

    def closeEvent(self, event):
        if not self.confirm_discard():
            event.ignore()
            return
        if self.autosave is not None:
            if self.editor.is_modified():
                self.autosave.discard(self.path)  # the user chose to discard the changes
            self.autosave.stop()
        self.controller.shutdown()
        self.profiles.shutdown()
        self.sharding.shutdown()
        self.sweep.shutdown()
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/state", self.saveState())
        super().closeEvent(event)


def _template_name(path: Path) -> str:
    """A bundled scenario's menu entry: its name (the file name where it cannot be read)."""
    try:
        return read_scenario(path).get("name") or path.stem
    except (ScenarioError, OSError, AttributeError):
        return path.stem
