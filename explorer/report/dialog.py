"""File ▸ Export Report…: ask where, write, say how it went."""
from __future__ import annotations

from PySide6.QtWidgets import QFileDialog, QMessageBox

from .report import REPORT_FORMATS, export_report

__all__ = ["export_report_dialog"]


def export_report_dialog(window) -> None:
    """Ask for a file and write the report of ``window`` there; nothing to report yet, or
    a file that cannot be written, is said, never raised."""
    if window.prediction is None:
        window.statusBar().showMessage("No prediction to report yet", 5000)
        return
    name = (window.prediction.scenario_name or "scenario").replace("/", "-")
    filters = ";;".join(f"{label} (*{ext})" for ext, label in REPORT_FORMATS.items())
    path, _ = QFileDialog.getSaveFileName(window, "Export Report", f"{name} report.html",
                                          filters)
    if not path:
        return
    try:
        out = export_report(window, path)
    except (OSError, ValueError, RuntimeError) as exc:
        QMessageBox.warning(window, "Export Report", f"Could not write the report: {exc}")
        return
    window.statusBar().showMessage(f"Report written to {out}", 6000)
