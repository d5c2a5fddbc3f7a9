"""Wires device profiles into the main window: the Profiles tab beside Platform, the profile
in use at the top right, Run ▸ Calibrate This Device…, and the prediction's ``profile=`` and
``overheads=`` (CPU overheads measured from the user's recorded GPU trace, GPU platforms
only)."""
from __future__ import annotations

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLabel

from ..widgets.theme_colors import style_by_theme
from .calibration import CalibrationDialog, CalibrationRunner
from .panel import ROOFLINE, ProfilesPanel

__all__ = ["ProfilesController", "install_profiles"]


class ProfilesController(QObject):
    """Owns the Profiles tab, the profile label and the calibration of this device.

    Parameters
    ----------
    window : the :class:`~explorer.window.MainWindow`
    calibrate_fn : injected into the :class:`CalibrationRunner` (tests use fakes)
    """

    def __init__(self, window, calibrate_fn=None):
        super().__init__(window)
        self.window = window
        self.panel = ProfilesPanel(window.settings)
        window.tabs.addTab(self.panel, "Profiles")
        self.runner = CalibrationRunner(calibrate_fn, parent=self)
        self.dialog: CalibrationDialog | None = None
        self.label = QLabel()
        self.label.setObjectName("profileLabel")
        style_by_theme(self.label, lambda dark: (
            "#profileLabel { color: %s; background: %s; border: 1px solid %s; "
            "border-radius: 3px; padding: 1px 8px; margin: 2px 6px; }"
            % (("#e3e5e8", "#33373d", "#4a4f57") if dark else ("#234", "#eef2f7", "#d5dce5"))))
        self.label.setToolTip("The device profile predictions use, and whether the CPU "
                              "overheads come from your recorded trace (Profiles tab to "
                              "change)")
        window.menuBar().setCornerWidget(self.label, Qt.TopRightCorner)
        self._build_actions()
        self._connect()
        self.panel.set_platform(window.editor.document.platform())
        window.controller.set_profile(self.panel.choice())
        window.controller.set_overheads(self.panel.overheads())
        self._update_label()

    def _build_actions(self) -> None:
        w = self.window
        menus = [a.menu() for a in w.menuBar().actions() if a.menu() is not None]
        run_menu = menus[2]  # File, Edit, Run, View, Help
        run_menu.addSeparator()
        self.calibrate_action = QAction("Calibrate This &Device…", w)
        self.calibrate_action.setStatusTip("Measure this CPU and make a device profile of it")
        self.calibrate_action.triggered.connect(self.calibrate_dialog)
        run_menu.addAction(self.calibrate_action)
        self.show_action = QAction("Device &Profiles", w)
        self.show_action.setStatusTip("Show the device profiles and choose the one predictions use")
        self.show_action.triggered.connect(self.show_panel)
        run_menu.addAction(self.show_action)

    def _connect(self) -> None:
        p, w = self.panel, self.window
        p.sigChoiceChanged.connect(self._on_choice)
        p.sigError.connect(self._on_error)
        p.sigCalibrateRequested.connect(self.calibrate_dialog)
        p.sigOverheadsChanged.connect(self._on_overheads)
        p.sigOverheadsFailed.connect(self._on_overheads_failed)
        doc = w.editor.document
        doc.sigPlatformChanged.connect(self._on_platform)
        doc.sigReset.connect(self._on_platform)
        w.controller.sigFinished.connect(self._on_prediction)

    # --- actions ------------------------------------------------------------------------

    def show_panel(self) -> None:
        self.window.tabs.setCurrentWidget(self.panel)

    def calibrate_dialog(self) -> CalibrationDialog:
        """Show the calibration dialog (window-modal, not blocking); returns it."""
        if self.dialog is None:
            self.dialog = CalibrationDialog(self.runner, self.window)
            self.dialog.setWindowModality(Qt.WindowModal)
            self.dialog.sigProfileSaved.connect(self._on_calibrated)
            self.dialog.sigFailed.connect(self._on_error)
            self.runner.sigStarted.connect(self.window.controller.cancel)  # keep the CPU quiet
        self.dialog.show()
        self.dialog.raise_()
        return self.dialog

    # --- feedback -----------------------------------------------------------------------

    def _on_choice(self, choice) -> None:
        self.window.controller.set_profile(choice)
        self._update_label()
        self.window.statusBar().showMessage(f"Predictions now use: {self.panel.choice_text()}",
                                            5000)

    def _on_overheads(self, measured) -> None:
        self.window.controller.set_overheads(self.panel.overheads())
        self._update_label()
        if measured is None:
            text = "Predictions now use the profile's CPU overheads"
        elif self.panel.platform_has_gpu():
            text = f"Predictions now use CPU overheads {self.panel.overheads_text()}"
        else:
            text = (f"CPU overheads {self.panel.overheads_text()}: used on GPU platforms; "
                    "the local CPU keeps its calibrated profile's")
        self.window.statusBar().showMessage(text, 6000)

    def _on_overheads_failed(self, message: str) -> None:
        # The panel shows it beside its buttons; the status bar says it wherever one looks.
        self.window.statusBar().showMessage(f"Could not use the trace: {message}", 10000)

    def _on_platform(self, *args) -> None:
        self.panel.set_platform(self.window.editor.document.platform())
        # The trace's overheads apply to GPU platforms only.
        applied = self.panel.overheads()
        if (applied is None) != (self.window.controller.overheads is None):
            self.window.statusBar().showMessage(
                f"CPU overheads {self.panel.overheads_text()}: "
                + ("used on this GPU platform" if applied is not None else
                   "not used on the local CPU (its calibrated profile's apply)"), 6000)
        self.window.controller.set_overheads(applied)
        self._update_label()

    def _on_calibrated(self, path: str) -> None:
        info = self.panel.add_profile(path)
        if info is None:
            return
        self.show_panel()
        platform = self.panel.platform or {}
        if info.device_kind == "cpu" and platform.get("preset") == "local-cpu":
            self.panel.set_choice(str(info.path))
        self.window.statusBar().showMessage(f"Calibrated: {info.title}, saved to {path}", 8000)

    def _on_error(self, message: str) -> None:
        self.window._show_error(message)
        self.window.statusBar().showMessage(message, 10000)

    def _on_prediction(self, prediction) -> None:
        used = getattr(prediction, "profile", None)
        if used and used != ROOFLINE:
            info = next((i for i in self.panel.infos if i.name == used), None)
            text = f"{used} ({info.kind_label})" if info else used
        elif used == ROOFLINE:
            text = "datasheet roofline"
        else:
            text = self.panel.choice_text()
        self.label.setText(f"profile: {text}{self._overheads_words()}")

    def _update_label(self) -> None:
        self.label.setText(f"profile: {self.panel.choice_text()}{self._overheads_words()}")

    def _overheads_words(self) -> str:
        if self.panel.overheads() is None:
            return ""
        return " · overheads: your trace"

    def shutdown(self) -> bool:
        """Cancel a running calibration and join its thread (the window is closing)."""
        if self.dialog is not None:
            self.dialog.hide()
        loaded = self.panel.shutdown()
        return self.runner.shutdown() and loaded


def install_profiles(window, calibrate_fn=None) -> ProfilesController:
    """Add the Profiles tab, its actions and the profile label to ``window``."""
    return ProfilesController(window, calibrate_fn)
