"""Self-contained widgets the views share: the error bar, the prediction progress in the
status bar, a read-only figures table and a bar stacked above a view."""
from .error_bar import ErrorBar
from .layout import read_only_table, stacked
from .progress import PredictionProgress

__all__ = ["ErrorBar", "PredictionProgress", "read_only_table", "stacked"]
