"""The running prediction's stage, progress bar and Cancel button, for the status bar."""
from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

__all__ = ["PredictionProgress"]


class PredictionProgress(QWidget):
    """The stage of the running prediction, a progress bar and a Cancel button.

    ``cancel_button.clicked`` is for the owner to connect; the bar and the button show only
    while busy.
    """

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.stage_label = QLabel("", self)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 1000)
        self.progress.setMaximumWidth(220)
        self.progress.setTextVisible(True)
        self.progress.setFormat("%p%")
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setToolTip("Cancel the running prediction")
        box = QHBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.stage_label)
        box.addWidget(self.progress)
        box.addWidget(self.cancel_button)
        self.set_busy(False)

    def set_busy(self, busy: bool) -> None:
        self.progress.setVisible(busy)
        self.cancel_button.setVisible(busy)

    def set_fraction(self, fraction: float, stage: str) -> None:
        self.progress.setValue(int(1000 * max(0.0, min(1.0, fraction))))
        self.stage_label.setText(f"Predicting: {stage}…")
