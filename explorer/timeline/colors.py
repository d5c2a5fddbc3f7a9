"""Stable colours per op category, shared by the Gantt, the legend and the exports."""
from __future__ import annotations

from PySide6.QtGui import QColor

from predictors.engine.timeline import CATEGORIES

__all__ = ["CATEGORY_COLORS", "CATEGORY_LABELS", "category_color", "STALE_COLOR",
           "COUNTER_COLOR"]

# Fixed per category (never derived from the order of appearance) so that a colour means the
# same thing in every timeline, screenshot and slide.  Hues loosely follow Perfetto/Nsight.
CATEGORY_COLORS: dict[str, str] = {
    "gemm": "#4e79a7",           # blue
    "embedding": "#f28e2b",      # orange
    "elementwise": "#59a14f",    # green
    "reduction": "#76b7b2",      # teal
    "communication": "#e15759",  # red
    "memcpy": "#b07aa1",         # purple
    "view": "#bab0ac",           # light grey
    "cpu_op": "#9c755f",         # brown
    "cpu_overhead": "#edc948",   # yellow
    "idle": "#d9d9d9",           # pale grey
    "other": "#ff9da7",          # pink
}

CATEGORY_LABELS: dict[str, str] = {
    "gemm": "GEMM", "embedding": "embedding", "elementwise": "elementwise",
    "reduction": "reduction", "communication": "communication", "memcpy": "memcpy",
    "view": "view", "cpu_op": "CPU op", "cpu_overhead": "CPU overhead", "idle": "idle",
    "other": "other",
}

STALE_COLOR = "#c8c8c8"
# Counters (allocated memory) are curves, not ops: a neutral slate no category uses.
COUNTER_COLOR = "#3d4a5c"

assert set(CATEGORY_COLORS) == set(CATEGORIES), "every category needs a colour"


def category_color(category: str | int) -> QColor:
    """The colour of ``category`` (a name or an index into ``CATEGORIES``)."""
    if not isinstance(category, str):
        category = CATEGORIES[int(category)]
    return QColor(CATEGORY_COLORS.get(category, CATEGORY_COLORS["other"]))
