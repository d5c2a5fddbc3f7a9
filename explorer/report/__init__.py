"""Design-review reports: one self-contained document of what the window shows."""
from .report import REPORT_FORMATS, export_report, report_html

__all__ = ["REPORT_FORMATS", "export_report", "report_html"]
