"""Self-contained widgets the views share: the error bar, the prediction progress in the
status bar, a read-only figures table, a bar stacked above a view, and a table's CSV
export and copy."""
from .error_bar import ErrorBar
from .layout import read_only_table, stacked
from .progress import PredictionProgress
from .table_export import EXPORT_ROLE, TableExport, table_csv, table_rows, table_tsv

__all__ = ["EXPORT_ROLE", "ErrorBar", "PredictionProgress", "TableExport", "read_only_table", "stacked",
           "table_csv", "table_rows", "table_tsv"]
