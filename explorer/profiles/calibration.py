"""Run ▸ Calibrate This Device…: measures the local CPU, or this machine's CUDA GPU, in a
worker thread with progress and cancel, and saves the profile.

The calibrations import torch, so they are imported in the worker, never on the GUI
thread; whether a GPU may be there is read from the NVIDIA driver's files instead.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, QStandardPaths, QTimer, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from predictors.utils.progress import check_cancelled

from ..widgets import ErrorBar
from ..workers import BackgroundRunner

__all__ = ["CalibrationRunner", "CalibrationDialog", "default_profile_path",
           "nvidia_driver_present"]


def default_profile_path(threads: int, device: str = "cpu") -> Path:
    """``<AppDataLocation>/profiles/local-cpu-<threads>t.json`` (``local-gpu.json`` for
    ``device="cuda"``)."""
    base = QStandardPaths.writableLocation(QStandardPaths.AppDataLocation) or \
        os.path.join(os.path.expanduser("~"), ".ml-dse")
    name = "local-gpu.json" if device == "cuda" else f"local-cpu-{threads}t.json"
    return Path(base) / "profiles" / name


def nvidia_driver_present() -> bool:
    """Whether an NVIDIA driver is installed (without importing torch)."""
    return os.path.exists("/proc/driver/nvidia/version") or bool(shutil.which("nvidia-smi"))


def _real_calibrate(device: str = "cpu", **kwargs):
    if device == "cuda":  # ~1 minute: peaks, fp16/bf16 GEMMs, traced training steps
        from predictors.calibrate.cuda_profile import calibrate_cuda
        kwargs.pop("threads", None)
        return calibrate_cuda(**kwargs)[0]
    from predictors.calibrate.calibrate import calibrate_cpu
    return calibrate_cpu(**kwargs)


def _real_save(profile, path):
    from predictors.profiles import save_profile
    return save_profile(profile, path)


class CalibrationRunner(QObject):
    """One calibration at a time in a worker thread (an exclusive
    :class:`~explorer.workers.BackgroundRunner`): a second is refused while one measures,
    and a cancel is reported once the measuring has stopped, so two calibrations never
    measure each other.

    Parameters
    ----------
    calibrate_fn : like :func:`predictors.calibrate.calibrate.calibrate_cpu` (tests: fakes)
    save_fn : like :func:`predictors.profiles.save_profile`

    Signals: ``sigStarted()``, ``sigProgress(float, str)``, ``sigFinished(str path,
    object profile)``, ``sigFailed(str)``, ``sigCancelled()``.
    """

    sigStarted = Signal()
    sigProgress = Signal(float, str)
    sigFinished = Signal(str, object)
    sigFailed = Signal(str)
    sigCancelled = Signal()

    def __init__(self, calibrate_fn: Callable | None = None, save_fn: Callable | None = None,
                 parent: QObject | None = None):
        super().__init__(parent)
        self.calibrate_fn = calibrate_fn or _real_calibrate
        self.save_fn = save_fn or _real_save
        # No GC pause: a calibration runs for minutes, too long to hold garbage back.
        self.runner = BackgroundRunner((), "Calibration failed", parent=self, pause_gc=False,
                                       exclusive=True)
        self.runner.sigProgress.connect(self.sigProgress)
        self.runner.sigFinished.connect(lambda saved: self.sigFinished.emit(*saved))
        self.runner.sigFailed.connect(self.sigFailed)
        self.runner.sigCancelled.connect(self.sigCancelled)

    def start(self, threads: int, budget_s: float, path, device: str = "cpu") -> None:
        if self.is_running():
            raise RuntimeError("a calibration is already running")
        calibrate_fn, save_fn = self.calibrate_fn, self.save_fn
        threads, budget_s, path = int(threads), float(budget_s), Path(path)
        # the CPU calibration's keywords; a GPU one is asked for by name
        extra = {"device": device} if device != "cpu" else {}

        def calibrate_and_save(progress, cancelled):
            profile = calibrate_fn(threads=threads, budget_s=budget_s, progress=progress,
                                   cancelled=cancelled, **extra)
            check_cancelled(cancelled, "saving")  # a cancelled calibration saves nothing
            path.parent.mkdir(parents=True, exist_ok=True)
            return str(save_fn(profile, path)), profile

        self.sigStarted.emit()
        self.runner.run(calibrate_and_save)

    def is_running(self) -> bool:
        return self.runner.is_running()

    def cancel(self) -> None:
        self.runner.cancel()

    def shutdown(self, timeout_ms: int = 15000) -> bool:
        """Cancel and join the worker; True if it ended."""
        return self.runner.shutdown(timeout_ms)


class CalibrationDialog(QDialog):
    """Asks for threads, budget and output file, then runs the calibration with progress.

    ``sigProfileSaved(str)`` carries the written profile's path; ``sigFailed(str)`` the error.
    """

    sigProfileSaved = Signal(str)
    sigFailed = Signal(str)

    def __init__(self, runner: CalibrationRunner, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Calibrate This Device")
        self.setMinimumWidth(520)
        self.runner = runner
        self.device = QComboBox(self)
        self.device.addItem("This CPU", "cpu")
        self.device.addItem("This machine's CUDA GPU", "cuda")
        if not nvidia_driver_present():
            item = self.device.model().item(1)
            item.setEnabled(False)
            item.setToolTip("No NVIDIA driver on this machine")
        self.device.setToolTip("CPU: microbenchmarks and profiled steps, the budget you set. "
                               "GPU: peaks, fp16/bf16 GEMMs and 16 traced training steps "
                               "(about a minute)")
        self.threads = QSpinBox(self)
        self.threads.setRange(1, max(1, os.cpu_count() or 1))
        self.threads.setValue(1)
        self.threads.setToolTip("Intra-op threads to measure with (match the scenario's)")
        self.budget = QSpinBox(self)
        self.budget.setRange(30, 7200)
        self.budget.setSingleStep(30)
        self.budget.setValue(600)
        self.budget.setSuffix(" s")
        self.budget.setToolTip("Time to spend measuring; longer budgets give better models")
        self.path_edit = QLineEdit(str(default_profile_path(1)), self)
        self._path_edited = False
        browse = QPushButton("Browse…", self)
        path_row = QHBoxLayout()
        path_row.addWidget(self.path_edit, 1)
        path_row.addWidget(browse)
        form = QFormLayout()
        form.addRow("Device", self.device)
        form.addRow("Threads", self.threads)
        form.addRow("Budget", self.budget)
        form.addRow("Save to", path_row)
        self.note = note = QLabel(self)
        note.setWordWrap(True)
        note.setForegroundRole(QPalette.PlaceholderText)
        self.error = ErrorBar(self)
        self.stage = QLabel("", self)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 1000)
        self.progress.setFormat("%p%")
        self.buttons = QDialogButtonBox(self)
        self.start_button = self.buttons.addButton("Start", QDialogButtonBox.AcceptRole)
        self.start_button.setDefault(True)
        self.cancel_button = self.buttons.addButton(QDialogButtonBox.Cancel)
        box = QVBoxLayout(self)
        box.addWidget(note)
        box.addLayout(form)
        box.addWidget(self.error)
        box.addWidget(self.stage)
        box.addWidget(self.progress)
        box.addWidget(self.buttons)
        self._t0 = 0.0
        self._set_running(False)
        self.progress.hide()

        browse.clicked.connect(self._browse)
        self.threads.valueChanged.connect(self._on_threads)
        self.device.currentIndexChanged.connect(self._on_device)
        self._on_device()
        self.path_edit.textEdited.connect(lambda _t: setattr(self, "_path_edited", True))
        self.start_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self.cancel)
        r = self.runner
        r.sigProgress.connect(self._on_progress)
        r.sigFinished.connect(self._on_finished)
        r.sigFailed.connect(self._on_failed)
        r.sigCancelled.connect(self._on_cancelled)

    # --- actions ------------------------------------------------------------------------

    def start(self) -> None:
        path = self.path_edit.text().strip()
        if not path:
            self.error.show_error("Choose a file to save the profile to.")
            return
        if not path.endswith(".json"):
            path += ".json"
            self.path_edit.setText(path)
        self.error.clear()
        self._t0 = time.monotonic()
        self._set_running(True)
        self.progress.show()
        self.progress.setValue(0)
        self.stage.setText("Starting…")
        self.runner.start(self.threads.value(), self.budget.value(), path,
                          device=self.device.currentData())

    def cancel(self) -> None:
        """Cancel the running calibration, or close the dialog when none runs."""
        if self.runner.is_running():
            self.runner.cancel()
            self.cancel_button.setEnabled(False)
            self.stage.setText("Cancelling…")
        else:
            self.reject()

    def reject(self) -> None:
        if self.runner.is_running():  # Escape or the close button: cancel first
            self.runner.cancel()
            self.runner.shutdown()
        super().reject()

    # --- feedback -----------------------------------------------------------------------

    def _set_running(self, running: bool) -> None:
        for w in (self.device, self.threads, self.budget, self.path_edit, self.start_button):
            w.setEnabled(not running)
        if not running:
            self.threads.setEnabled(self.device.currentData() == "cpu")
        self.cancel_button.setEnabled(True)

    def _on_progress(self, fraction: float, stage: str) -> None:
        self.progress.setValue(int(1000 * max(0.0, min(1.0, fraction))))
        elapsed = time.monotonic() - self._t0
        # a GPU calibration takes about a minute whatever the budget (its upper bound)
        expected = self.budget.value() if self.device.currentData() == "cpu" else min(
            60, self.budget.value())
        self.stage.setText(f"{stage}… ({int(elapsed) // 60}:{int(elapsed) % 60:02d} of "
                           f"~{expected // 60}:{expected % 60:02d})")

    def _on_finished(self, path: str, profile) -> None:
        self._set_running(False)
        self.progress.setValue(1000)
        self.stage.setText(f"Saved {path}")
        self.sigProfileSaved.emit(path)
        QTimer.singleShot(0, self.accept)

    def _on_failed(self, message: str) -> None:
        self._set_running(False)
        self.stage.setText("Calibration failed")
        self.error.show_error(message)
        self.sigFailed.emit(message)

    def _on_cancelled(self) -> None:
        self._set_running(False)
        self.progress.hide()
        self.stage.setText("Calibration cancelled; nothing was saved.")

    def _on_threads(self, threads: int) -> None:
        if not self._path_edited:
            self.path_edit.setText(str(default_profile_path(threads,
                                                            self.device.currentData())))

    def _on_device(self, *_args) -> None:
        gpu = self.device.currentData() == "cuda"
        self.threads.setEnabled(not gpu and not self.runner.is_running())
        self.note.setText(
            "Measures this machine's GPU: copy and GEMM peaks, 600 fp16/bf16 GEMMs and 16 "
            "training steps with their traces (about a minute), then checks each step "
            "against a prediction from the others. Keep the GPU otherwise idle." if gpu else
            "Runs microbenchmarks and profiled training steps on this CPU. Keep the "
            "machine otherwise idle while it runs.")
        self._on_threads(self.threads.value())

    def _browse(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save Profile As", self.path_edit.text(),
                                              "Device profiles (*.json)")
        if path:
            self.path_edit.setText(path)
            self._path_edited = True
