"""Self-contained widgets the views share: the error bar, the prediction progress in the
status bar, a label that elides rather than widens, a row and a label that wrap rather than
widen, a read-only figures table, a bar stacked above a view, and a table's CSV export and
copy."""
from .elided_label import ElidedLabel
from .error_bar import ErrorBar
from .flow_layout import FlowLayout
from .layout import read_only_table, stacked
from .progress import PredictionProgress
from .table_export import EXPORT_ROLE, TableExport, table_csv, table_rows, table_tsv
from .wrapping_label import WrappingLabel

__all__ = ["EXPORT_ROLE", "ElidedLabel", "ErrorBar", "FlowLayout", "PredictionProgress",
           "TableExport", "WrappingLabel", "read_only_table", "stacked", "table_csv",
           "table_rows", "table_tsv"]
