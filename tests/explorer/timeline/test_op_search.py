"""Find ops by name on the timeline: matches marked and counted, the others dimmed, and
Enter stepping through them in time, unfolding a folded rank on the way."""
import numpy as np
from PySide6.QtCore import Qt

from explorer.timeline.op_search import matching_events
from predictors.engine.timeline import CATEGORIES, Lane, Timeline


def _two_ranks() -> Timeline:
    """Rank 0 and rank 1, each a CPU thread running add, mm, add, ... every 10 us and a
    stream running a kernel under each (a folded rank shows its stream only)."""
    start = np.tile(np.arange(0.0, 2000.0, 10.0), 4)
    n = len(start)
    lane = np.repeat([0, 1, 2, 3], n // 4)
    name = np.r_[np.tile([0, 1], n // 8), np.full(n // 4, 2), np.tile([0, 1], n // 8),
                 np.full(n // 4, 2)]                   # aten::add, aten::mm alternate
    category = np.where(lane % 2 == 0, CATEGORIES.index("cpu_op"), CATEGORIES.index("gemm"))
    return Timeline.from_arrays(start, np.full(n, 4.0), lane, category, name, None,
                                [Lane(0, "cpu", "CPU main thread"), Lane(0, "stream", "stream 7"),
                                 Lane(1, "cpu", "CPU main thread"), Lane(1, "stream", "stream 7")],
                                ["aten::add", "aten::mm", "kernel"], title="two ranks")


def test_matching_is_by_name_part_in_time_order():
    tl = _two_ranks()
    hits = matching_events(tl, "  MM ")
    assert len(hits) == 200 and (tl.name_id[hits] == 1).all()
    assert (np.diff(tl.start_us[hits]) >= 0).all()
    assert len(matching_events(tl, "aten::")) == len(tl) // 2
    assert len(matching_events(tl, "")) == 0 and len(matching_events(tl, "conv")) == 0
    assert len(matching_events(None, "mm")) == 0


def test_the_search_marks_counts_and_steps_through_the_matches(gantt, qtbot):
    tl = _two_ranks()
    gantt.set_timeline(tl)
    search = gantt.search
    qtbot.keyClicks(search.field, "mm")
    qtbot.waitUntil(lambda: len(search.matches) == 200, timeout=2000)
    assert search.active() and "200 matches" in search.count.text()
    assert "800.0 µs in all" in search.count.text()          # 200 x 4 us
    assert all(item.opacity() < 1 for item in gantt._bars.values())   # the others dim
    assert search.item.bins.total == 200
    gantt.set_collapsed({1})                                  # rank 1 folded
    assert search.item.bins.total == 100                       # its threads are not drawn
    qtbot.keyClick(search.field, Qt.Key_Return)
    first = int(search.matches[0])
    assert gantt.selected == first and search.count.text().startswith("1 of 200")
    x0, x1 = gantt.x_range()
    assert x0 <= tl.start_us[first] / 1e3 <= x1
    qtbot.keyClick(search.field, Qt.Key_Return)               # the other rank's, same time
    second = int(search.matches[1])
    assert tl.start_us[second] == tl.start_us[first] and gantt.selected == second
    assert 1 not in gantt.collapsed                            # unfolded to show it
    qtbot.keyClick(search.field, Qt.Key_Return, Qt.ShiftModifier)
    assert gantt.selected == first
    qtbot.keyClick(search.field, Qt.Key_Escape)
    qtbot.waitUntil(lambda: not search.active(), timeout=2000)
    assert all(item.opacity() == 1 for item in gantt._bars.values())
    assert search.count.text() == ""
    qtbot.keyClicks(search.field, "conv")
    search.search()
    assert search.count.text() == "no match" and not search.back.isEnabled()
