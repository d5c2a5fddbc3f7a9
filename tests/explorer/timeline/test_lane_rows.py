"""Lane height: the buttons beside the scroll bar and Ctrl+wheel over the lane names make
rows taller or shorter; scrolling still works and every lane name stays whole."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QFontMetrics, QWheelEvent
from PySide6.QtWidgets import QApplication

from explorer.timeline.lane_rows import MIN_ROW_PX, ROW_ZOOM
from explorer.timeline.layout import lane_title
from explorer.timeline.sample import synthetic_timeline


def sixteen_open_ranks(gantt):
    tl = synthetic_timeline(ranks=16, steps=6)
    gantt.set_timeline(tl)
    gantt.set_collapsed(set())
    return tl


def test_the_buttons_change_the_lane_height_and_the_lanes_in_view(gantt, qtbot):
    rows = gantt.rows
    assert not rows.taller.isEnabled()      # nothing to zoom before a timeline
    sixteen_open_ranks(gantt)
    assert rows.taller.isEnabled() and rows.shorter.isEnabled()
    before_px, before_lanes = gantt.row_height_px(), len(gantt.visible_lanes())
    before_range = gantt.scroll.maximum()
    with qtbot.waitSignal(rows.sigRowHeightChanged) as changed:
        qtbot.mouseClick(rows.taller, Qt.LeftButton)
    qtbot.mouseClick(rows.taller, Qt.LeftButton)
    assert changed.args[0] == pytest.approx(before_px * ROW_ZOOM)
    assert gantt.row_height_px() == pytest.approx(before_px * ROW_ZOOM ** 2)
    assert len(gantt.visible_lanes()) < before_lanes
    assert gantt.scroll.maximum() > before_range   # taller rows: more to scroll through
    for _ in range(6):
        qtbot.mouseClick(rows.shorter, Qt.LeftButton)
    assert gantt.row_height_px() == pytest.approx(MIN_ROW_PX)
    assert len(gantt.visible_lanes()) > before_lanes
    # scrolling still moves through the rows at the new height
    y0 = gantt.y_range()[0]
    gantt.scroll_rows(5)
    assert gantt.y_range()[0] == pytest.approx(y0 + 5)
    gantt.set_timeline(None)
    assert not rows.taller.isEnabled() and not gantt.scroll.isVisible()


def test_ctrl_wheel_over_the_lane_names_zooms_the_lanes_not_time(gantt):
    sixteen_open_ranks(gantt)
    before, x_before = gantt.row_height_px(), gantt.x_range()
    axis = gantt.lane_axis.sceneBoundingRect()
    at = QPointF(gantt.plot.mapFromScene(axis.center()))
    viewport = gantt.plot.viewport()
    wheel = QWheelEvent(at, QPointF(viewport.mapToGlobal(at.toPoint())), QPoint(0, 0),
                        QPoint(0, 120), Qt.NoButton, Qt.ControlModifier, Qt.NoScrollPhase,
                        False)
    QApplication.sendEvent(viewport, wheel)
    assert gantt.row_height_px() == pytest.approx(before * ROW_ZOOM)
    assert gantt.x_range() == pytest.approx(x_before)
    # a plain wheel there scrolls the rows
    y0 = gantt.y_range()[0]
    wheel = QWheelEvent(at, QPointF(viewport.mapToGlobal(at.toPoint())), QPoint(0, 0),
                        QPoint(0, -120), Qt.NoButton, Qt.NoModifier, Qt.NoScrollPhase, False)
    QApplication.sendEvent(viewport, wheel)
    assert gantt.y_range()[0] > y0 and gantt.x_range() == pytest.approx(x_before)


@pytest.mark.parametrize("steps", [0, 3])
def test_every_lane_name_in_view_is_whole_at_any_lane_height(gantt, steps):
    tl = sixteen_open_ranks(gantt)
    for _ in range(steps):
        gantt.zoom_rows(ROW_ZOOM)
    gantt.scroll_rows(17)                    # somewhere in the middle of the ranks
    axis = gantt.lane_axis
    line_h = QFontMetrics(axis._font()).height()
    assert line_h <= gantt.row_height_px()   # a name fits its row
    lanes = gantt.visible_lanes()
    assert lanes
    texts = {name: shown for kind, name, shown, _ in axis.visible_texts() if kind == "lane"}
    for lane in lanes:
        title = lane_title(tl.lanes[lane])
        assert texts[title] == title         # shown whole, not elided
