"""Wires the Compare dock into the main window: File ▸ Import Trace…, drag and drop of
trace files, File ▸ Export Recorded Chrome Trace…, and the prediction feed."""
from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMessageBox

from .loader import TraceLoader
from .view import CompareView

__all__ = ["CompareController", "install_compare", "trace_paths_of", "TRACE_FILTER"]

TRACE_FILTER = "Kineto traces (*.json *.json.gz *.gz);;All files (*)"
_TRACE_SUFFIXES = (".json", ".json.gz", ".gz")


def trace_paths_of(mime) -> list[str]:
    """Local files in a drag's MIME data that look like traces (``.json``, ``.json.gz``)."""
    if mime is None or not mime.hasUrls():
        return []
    paths = [u.toLocalFile() for u in mime.urls() if u.isLocalFile()]
    return [p for p in paths if p.lower().endswith(_TRACE_SUFFIXES) and os.path.isfile(p)]


class CompareController(QObject):
    """Owns the Compare dock, the trace loader and their actions on ``window``.

    Parameters
    ----------
    window : the :class:`~explorer.window.MainWindow`
    load_fn : injected into the :class:`TraceLoader` (tests use fakes)
    """

    def __init__(self, window, load_fn=None):
        super().__init__(window)
        self.window = window
        self.view = CompareView()
        self.loader = TraceLoader(load_fn, self)
        self.dock = window._dock("Compare", "compareDock", self.view, Qt.BottomDockWidgetArea)
        window.tabifyDockWidget(window.timeline_dock, self.dock)
        window.timeline_dock.raise_()
        self._build_actions()
        self._connect()
        window.setAcceptDrops(True)
        window.installEventFilter(self)
        if getattr(window, "prediction", None) is not None:
            self.view.set_prediction(window.prediction)

    def _build_actions(self) -> None:
        w = self.window
        menus = [a.menu() for a in w.menuBar().actions() if a.menu() is not None]
        file_menu = menus[0]  # File, Edit, Run, View, Help
        self.import_action = QAction("&Import Trace…", w)
        self.import_action.setShortcut(QKeySequence("Ctrl+I"))
        self.import_action.setStatusTip("Load recorded Kineto traces (one file per rank) to "
                                        "compare with the prediction")
        self.import_action.triggered.connect(self.import_dialog)
        self.export_recorded_action = QAction("Export &Recorded Chrome Trace…", w)
        self.export_recorded_action.setStatusTip("Write the recorded timeline as a Chrome "
                                                 "trace (opens in Perfetto)")
        self.export_recorded_action.triggered.connect(self.export_recorded_dialog)
        file_menu.insertAction(w.export_image_action, self.import_action)
        file_menu.insertSeparator(w.export_image_action)
        file_menu.insertAction(w.quit_action, self.export_recorded_action)
        file_menu.insertSeparator(w.quit_action)
        view_menu = menus[3] if len(menus) > 3 else None
        if view_menu is not None:
            acts = view_menu.actions()
            view_menu.insertAction(acts[4] if len(acts) > 4 else None,
                                   self.dock.toggleViewAction())

    def _connect(self) -> None:
        c, v, ld = self.window.controller, self.view, self.loader
        c.sigFinished.connect(v.set_prediction)
        c.sigStarted.connect(lambda: v.set_stale(True))
        v.sigImportRequested.connect(self.import_dialog)
        v.sigCancelRequested.connect(ld.cancel)
        ld.sigStarted.connect(self._on_started)
        ld.sigProgress.connect(v.set_progress)
        ld.sigFinished.connect(self._on_loaded)
        ld.sigFailed.connect(self._on_failed)
        ld.sigCancelled.connect(self._on_cancelled)

    # --- actions ------------------------------------------------------------------------

    def load(self, paths: list[str]) -> int:
        """Load trace files (the ranks of one job) in the background."""
        self.dock.show()
        self.dock.raise_()
        return self.loader.load(paths)

    def import_dialog(self) -> None:
        paths, _ = QFileDialog.getOpenFileNames(self.window, "Import Trace", "",
                                                TRACE_FILTER)
        if paths:
            self.load(paths)

    def export_recorded(self, path: str | os.PathLike) -> Path:
        tl = self.view.recorded_timeline()
        if tl is None:
            raise RuntimeError("no recorded trace loaded")
        tl.save_chrome_trace(path)
        return Path(path)

    def export_recorded_dialog(self) -> None:
        bar = self.window.statusBar()
        if self.view.recorded_timeline() is None:
            bar.showMessage("No recorded trace to export: import one first", 5000)
            return
        path, _ = QFileDialog.getSaveFileName(self.window, "Export Recorded Chrome Trace",
                                              "recorded-trace.json",
                                              "Chrome trace (*.json *.json.gz)")
        if not path:
            return
        try:
            self.export_recorded(path)
        except OSError as exc:
            QMessageBox.warning(self.window, "Export", f"Could not export: {exc}")
            return
        bar.showMessage(f"Exported {path}", 5000)

    # --- loader feedback ----------------------------------------------------------------

    def _on_started(self, paths: list) -> None:
        names = ", ".join(os.path.basename(p) for p in paths[:2])
        more = f" (+{len(paths) - 2})" if len(paths) > 2 else ""
        self.view.error.clear()
        self.view.set_loading(True, f"Loading {names}{more}…")

    def _on_loaded(self, rec) -> None:
        self.view.set_loading(False)
        self.view.set_recording(rec)
        self.window.statusBar().showMessage(
            f"Loaded {len(rec.timeline):,} events from {len(rec.traces)} trace file(s)", 6000)

    def _on_failed(self, message: str) -> None:
        self.view.set_loading(False)
        self.view.show_error(message)
        self.window.statusBar().showMessage(message, 10000)

    def _on_cancelled(self) -> None:
        self.view.set_loading(False)
        self.window.statusBar().showMessage("Trace loading cancelled", 4000)

    # --- drag and drop, shutdown ----------------------------------------------------------

    def eventFilter(self, obj, event) -> bool:
        t = event.type()
        if t in (QEvent.DragEnter, QEvent.DragMove):
            if trace_paths_of(event.mimeData()):
                event.acceptProposedAction()
                return True
        elif t == QEvent.Drop:
            paths = trace_paths_of(event.mimeData())
            if paths:
                event.acceptProposedAction()
                self.load(paths)
                return True
        elif t == QEvent.Close:
            self.loader.shutdown()
        return False


def install_compare(window, load_fn=None) -> CompareController:
    """Add the Compare dock and its actions to ``window``; returns the controller."""
    return CompareController(window, load_fn)
