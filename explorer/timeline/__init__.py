"""Timeline views: the Gantt chart, its colours and lane layout."""
from .colors import CATEGORY_COLORS, CATEGORY_LABELS, category_color
from .events import EventIndex, format_us
from .gantt import GanttWidget
from .layout import LaneLayout, lane_title

__all__ = ["GanttWidget", "EventIndex", "LaneLayout", "CATEGORY_COLORS", "CATEGORY_LABELS",
           "category_color", "format_us", "lane_title"]
