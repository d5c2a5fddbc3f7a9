"""The Gantt view: layout, one bar item per category, hover/click lookups, keys, scale."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import pyqtgraph as pg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication

from explorer.timeline import (
    CATEGORY_COLORS,
    EventIndex,
    LaneLayout,
    category_color,
    format_us,
    lane_title,
)
from explorer.timeline.sample import synthetic_timeline
from predictors.engine.timeline import CATEGORIES, Lane, Timeline, TimelineBuilder


def small_timeline():
    b = TimelineBuilder("small")
    main = b.lane(0, "cpu", "main")
    s0 = b.lane(0, "stream", "stream 0")
    b.add(main, 0.0, 100.0, "cpu_op", "aten::linear", "[8, 4], [4, 2]")
    b.add(main, 10.0, 20.0, "cpu_op", "aten::addmm", "[2], [8, 4], [4, 2]")  # nested
    b.add(main, 200.0, 50.0, "cpu_op", "aten::relu", "[8, 2]")
    b.add(s0, 40.0, 30.0, "gemm", "sgemm_kernel", "[8, 4], [4, 2]")
    b.add(s0, 300.0, 5.0, "elementwise", "relu_kernel", "[8, 2]")
    return b.build()


def million_event_timeline(n=1_000_000, lanes=8, seed=0):
    rng = np.random.default_rng(seed)
    lane = rng.integers(0, lanes, n).astype(np.int32)
    start = np.sort(rng.uniform(0, 1e6, n))
    dur = rng.uniform(0.1, 5.0, n)
    cat = rng.integers(0, len(CATEGORIES), n).astype(np.int16)
    return Timeline(start, dur, lane, cat, np.zeros(n, np.int32), np.zeros(n, np.int32),
                    [Lane(i // 4, "cpu" if i % 4 < 2 else "stream", f"t{i}") for i in range(lanes)],
                    ["op"], [""], "1M")




def test_colours_are_stable_and_distinct():
    assert set(CATEGORY_COLORS) == set(CATEGORIES)
    assert len(set(CATEGORY_COLORS.values())) == len(CATEGORIES)
    assert category_color("gemm") == category_color(CATEGORIES.index("gemm"))
    assert category_color("gemm").name() == CATEGORY_COLORS["gemm"]


def test_lane_layout_groups_per_rank_cpu_first():
    b = TimelineBuilder()
    s1 = b.lane(1, "stream", "stream 0")
    c0 = b.lane(0, "cpu", "main")
    s0 = b.lane(0, "stream", "0")
    c1 = b.lane(1, "cpu", "autograd")
    tl = b.build()
    lay = LaneLayout.of(tl)
    assert lay.order == [c0, s0, c1, s1]
    assert lay.labels == ["rank 0 · CPU main", "rank 0 · stream 0", "rank 1 · CPU autograd",
                          "rank 1 · stream 0"]
    assert [g[0] for g in lay.groups] == [0, 1]
    assert lay.y[c1] > lay.y[s0] + 1.0  # a gap separates the ranks
    assert lay.lane_at(lay.y[s1]) == s1
    assert lane_title(Lane(0, "cpu", "CPU main thread")) == "CPU main thread"
    assert format_us(0.5) == "500 ns" and format_us(12.34) == "12.3 µs"
    assert format_us(4567.0) == "4.567 ms"


def test_one_bar_item_per_category_without_pen(gantt):
    tl = synthetic_timeline(ranks=2)
    gantt.set_timeline(tl)
    present = {CATEGORIES[c] for c in np.unique(tl.category)}
    assert set(gantt._bars) == present
    for item in gantt._bars.values():
        assert isinstance(item, pg.BarGraphItem)
        assert item.opts["pen"] is None
    # each rank is labelled, and each of its lanes
    shown = gantt.lane_axis.visible_texts()
    assert [t[1] for t in shown if t[0] == "rank"] == ["rank 0", "rank 1"]
    assert [t[1] for t in shown if t[0] == "lane"][:2] == ["CPU main", "CPU autograd"]
    assert "GEMM" in gantt.legend.text() and "communication" in gantt.legend.text()
    x0, x1 = gantt.x_range()
    assert x0 <= tl.begin_us / 1e3 and x1 >= tl.end_us / 1e3


def test_event_lookup_returns_the_right_event(gantt):
    tl = small_timeline()
    gantt.set_timeline(tl)
    names = lambda i: None if i is None else tl.names[tl.name_id[i]]
    assert names(gantt.event_at(0, 0.005)) == "aten::linear"
    assert names(gantt.event_at(0, 0.015)) == "aten::addmm"   # innermost of nested ops
    assert names(gantt.event_at(0, 0.050)) == "aten::linear"  # after the nested one ended
    assert gantt.event_at(0, 0.150) is None                     # a gap
    assert names(gantt.event_at(0, 0.150, tol_ms=0.060)) == "aten::relu"
    assert names(gantt.event_at(1, 0.050)) == "sgemm_kernel"
    assert names(gantt.event_at(1, 0.302)) == "relu_kernel"
    assert gantt.event_at(1, 1.0) is None
    assert gantt.event_at(7, 0.0) is None
    y = gantt.layout_.y[1]
    assert names(gantt.event_at_point(0.05, y)) == "sgemm_kernel"
    assert gantt.event_at_point(0.05, y + 0.49) is None  # between the bars of two rows


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1000), st.floats(0.01, 100)), min_size=1, max_size=40),
       st.floats(-10, 1200))
def test_event_index_agrees_with_brute_force(events, t):
    b = TimelineBuilder()
    lane = b.lane(0, "cpu", "main")
    for k, (s, d) in enumerate(events):
        b.add(lane, s, d, "cpu_op", f"op{k}")
    tl = b.build()
    found = EventIndex(tl).event_at(0, t)
    covering = [k for k, (s, d) in enumerate(events) if s <= t <= s + d]
    if not covering:
        assert found is None
    else:
        assert found in covering
        assert tl.dur_us[found] == min(tl.dur_us[k] for k in covering)


def test_hover_and_click_show_details(gantt, qtbot):
    tl = small_timeline()
    gantt.set_timeline(tl)
    target = int(np.flatnonzero(np.array(tl.names)[tl.name_id] == "sgemm_kernel")[0])
    scene_pos = gantt.vb.mapViewToScene(pg.Point(0.055, gantt.layout_.y[1]))
    with qtbot.waitSignal(gantt.sigEventHovered) as hovered:
        gantt.plot.scene().sigMouseMoved.emit(scene_pos)
    assert hovered.args == [target]
    text = gantt.describe(target, rich=False)
    assert "sgemm_kernel" in text and "[8, 4], [4, 2]" in text and "start 0.040 ms" in text
    assert "30.0 µs" in text
    gantt.select_event(target)
    assert "sgemm_kernel" in gantt.details.text() and gantt.selected == target
    gantt.select_event(-1)
    assert gantt.selected == -1


def test_wasd_keys_zoom_and_pan(gantt, qtbot):
    gantt.set_timeline(synthetic_timeline())
    x0, x1 = gantt.x_range()
    qtbot.keyClick(gantt.plot, Qt.Key_W)
    z0, z1 = gantt.x_range()
    assert (z1 - z0) < 0.9 * (x1 - x0)
    qtbot.keyClick(gantt.plot, Qt.Key_D)
    p0, p1 = gantt.x_range()
    assert p0 > z0 and p1 - p0 == pytest.approx(z1 - z0)
    qtbot.keyClick(gantt.plot, Qt.Key_A)
    qtbot.keyClick(gantt.plot, Qt.Key_S)
    qtbot.keyClick(gantt.plot, Qt.Key_F)
    f0, f1 = gantt.x_range()
    assert f0 == pytest.approx(x0) and f1 == pytest.approx(x1)


def test_stale_greys_and_new_timeline_clears_it(gantt):
    gantt.set_timeline(synthetic_timeline())
    gantt.set_stale(True)
    assert gantt.is_stale()
    assert all(item.opacity() < 0.5 for item in gantt._bars.values())
    gantt.set_timeline(synthetic_timeline(seed=1))
    assert not gantt.is_stale()
    assert all(item.opacity() == 1.0 for item in gantt._bars.values())
    gantt.set_timeline(None)
    assert gantt.timeline is None and not gantt._bars


def test_million_events_smoke(gantt):
    tl = million_event_timeline()
    gantt.set_timeline(tl)
    assert sum(len(item.opts["x0"]) for item in gantt._bars.values()) == len(tl)
    gantt.grab()  # draws every bar once
    i = gantt.event_at(3, float(tl.start_us[tl.lane == 3][1000] / 1e3) + 1e-6)
    assert i is not None and tl.lane[i] == 3


def drag(widget, start, end, modifiers=Qt.NoModifier, steps=8):
    """A real left-button drag on ``widget`` from ``start`` to ``end`` (widget pixels)."""
    from PySide6.QtCore import QEvent, QPointF
    from PySide6.QtGui import QMouseEvent
    from PySide6.QtWidgets import QApplication

    def send(kind, pos, button, buttons):
        p = QPointF(pos)
        event = QMouseEvent(kind, p, widget.mapToGlobal(p), button, buttons, modifiers)
        QApplication.sendEvent(widget, event)

    send(QEvent.MouseButtonPress, start, Qt.LeftButton, Qt.LeftButton)
    for k in range(1, steps + 1):
        pos = start + (end - start) * (k / steps)
        send(QEvent.MouseMove, pos, Qt.NoButton, Qt.LeftButton)
    send(QEvent.MouseButtonRelease, end, Qt.LeftButton, Qt.NoButton)


def view_point(gantt, t_ms, y):
    """Viewport pixel of view coordinates (``t_ms``, ``y``)."""
    scene = gantt.vb.mapViewToScene(pg.Point(t_ms, y))
    return gantt.plot.mapFromScene(scene)


def test_drag_selects_a_time_range_and_esc_clears(gantt, qtbot):
    from explorer.timeline.range_selection import format_duration

    gantt.set_timeline(small_timeline())  # 0 .. 0.305 ms
    before = gantt.x_range()
    y = gantt.layout_.height / 2
    with qtbot.waitSignal(gantt.sigTimeRangeSelected) as selected:
        drag(gantt.plot.viewport(), view_point(gantt, 0.05, y), view_point(gantt, 0.25, y))
    t0, t1 = selected.args[0]
    assert gantt.time_range() == (t0, t1)
    assert t0 == pytest.approx(0.05, abs=0.005) and t1 == pytest.approx(0.25, abs=0.005)
    assert gantt.x_range() == before  # the drag did not pan
    region = gantt.range_selection.region
    assert region.isVisible() and region.getRegion() == pytest.approx((t0, t1))
    label = gantt.range_selection.label
    assert label.isVisible() and label.textItem.toPlainText() == format_duration(t1 - t0)
    assert label.textItem.toPlainText().endswith(" µs")  # ~200 µs
    assert format_duration(t1 - t0) in gantt.details.text()

    gantt.plot.setFocus()
    with qtbot.waitSignal(gantt.sigTimeRangeSelected) as cleared:
        qtbot.keyClick(gantt.plot, Qt.Key_Escape)
    assert cleared.args == [None] and gantt.time_range() is None
    assert not region.isVisible() and not label.isVisible()


def test_shift_drag_pans_and_range_label_formats(gantt):
    from explorer.timeline.range_selection import format_duration

    gantt.set_timeline(small_timeline())
    before = gantt.x_range()
    y = gantt.layout_.height / 2
    drag(gantt.plot.viewport(), view_point(gantt, 0.25, y), view_point(gantt, 0.05, y),
         modifiers=Qt.ShiftModifier)
    after = gantt.x_range()
    assert after[0] > before[0] + 0.1 and gantt.time_range() is None
    gantt.select_time_range(1.0, 2.234)
    assert gantt.range_selection.label.textItem.toPlainText() == "1.234 ms"
    gantt.set_timeline(small_timeline())  # a new timeline drops the old selection
    assert gantt.time_range() is None
    assert [format_duration(v) for v in (0.00085, 0.0123, 1.2345, 2500.0)] == \
        ["850 ns", "12.3 µs", "1.234 ms", "2.500 s"]


def test_placeholder_sits_inside_the_view_before_and_after_a_timeline(gantt):
    def placeholder_in_view():
        (x0, x1), (y0, y1) = gantt.vb.viewRange()
        rect = gantt._empty.mapRectToView(gantt._empty.boundingRect())
        return (gantt._empty.isVisible() and x0 <= rect.left() and rect.right() <= x1
                and min(y0, y1) <= rect.top() and rect.bottom() <= max(y0, y1))

    assert placeholder_in_view()  # a fresh view: the text whole, not cut by the corner
    gantt.set_timeline(small_timeline())
    assert not gantt._empty.isVisible()
    gantt.set_timeline(None)
    assert placeholder_in_view()


def test_many_ranks_open_folded_but_the_slowest(gantt):
    tl = synthetic_timeline(ranks=6, steps=12)
    gantt.set_timeline(tl)
    slowest = max(tl.ranks, key=tl.span_ms)
    assert gantt.collapsed == set(tl.ranks) - {slowest}
    lay = gantt.layout_
    for r in gantt.collapsed:  # one row: its streams together, its CPU threads hidden
        streams = tl.lanes_of(r, "stream")
        assert len({float(lay.y[i]) for i in streams}) == 1
        assert all(np.isnan(lay.y[i]) for i in tl.lanes_of(r, "cpu"))
    drawn = sum(len(item.opts["x0"]) for item in gantt._bars.values())
    hidden = int(np.isin(tl.lane, [i for r in gantt.collapsed for i in tl.lanes_of(r, "cpu")])
                 .sum())
    assert drawn == len(tl) - hidden
    # an event on a folded rank's comm stream is still found under the mouse
    r = min(gantt.collapsed)
    comm = tl.lanes_of(r, "stream")[1]
    i = int(np.flatnonzero(tl.lane == comm)[0])
    mid = (tl.start_us[i] + tl.dur_us[i] / 2) / 1e3
    assert gantt.event_at_point(mid, float(lay.y[comm])) == i
    x_before = gantt.x_range()
    gantt.set_collapsed(set())  # Expand all ranks keeps the view's time range
    assert not np.isnan(gantt.layout_.y).any() and gantt.x_range() == pytest.approx(x_before)
    gantt.toggle_rank(r)
    assert gantt.collapsed == {r}


def test_the_rank_menu_folds_and_unfolds(gantt):
    tl = synthetic_timeline(ranks=2, steps=6)
    gantt.set_timeline(tl)
    assert gantt.collapsed == set()  # two ranks: both open
    gantt._rank_menu(1, gantt.mapToGlobal(gantt.rect().center()))
    actions = {a.text(): a for a in gantt._menu.actions()}
    assert set(actions) == {"Collapse rank 1", "Collapse all but rank 1", "Expand all ranks",
                            "Collapse all ranks"}
    actions["Collapse rank 1"].trigger()
    assert gantt.collapsed == {1}
    gantt._menu.close()


def test_memory_counters_draw_as_curves_with_a_hover_value(gantt):
    b = TimelineBuilder("mem")
    main = b.lane(0, "cpu", "main")
    b.add(main, 0.0, 1000.0, "cpu_op", "aten::mm")
    b.add(b.lane(0, "stream", "stream 0"), 10.0, 900.0, "gemm", "sgemm")
    lane = b.counter(0, "memory allocated", [0.0, 200.0, 600.0], [4e6, 9e6, 5e6])
    gantt.set_timeline(b.build())
    lay = gantt.layout_
    assert lay.order[-1] == lane and lay.labels[-1] == "memory 4.0 MB – 9.0 MB"
    assert len(gantt._counter_items) == 1
    xs, ys = gantt._counter_items[0].getData()
    assert xs[0] == 0.0 and xs[-1] == 1.0   # held to the end of the step (ms)
    row = lay.y[lane]
    assert ys.min() == pytest.approx(row - 0.4) and ys.max() < row + 0.4   # peak on top
    assert gantt.counter_text(lane, 0.3) == (
        "rank 0 · memory allocated at 0.300 ms: 9.0 MB (peak 9.0 MB)")
    gantt.set_stale(True)
    assert gantt._counter_items[0].opacity() < 0.5
    gantt.set_collapsed({0})   # a folded rank shows its streams only
    assert gantt._counter_items == []


def test_a_folded_cpu_only_rank_hides_its_memory_curve(gantt):
    b = TimelineBuilder("cpu ranks")
    for rank in (0, 1):
        b.add(b.lane(rank, "cpu", "main"), 0.0, 100.0, "gemm", "aten::mm")
        b.counter(rank, "memory allocated", [0.0, 50.0], [1e6, 2e6])
    gantt.set_timeline(b.build())
    assert len(gantt._counter_items) == 2
    gantt.set_collapsed({1})
    assert len(gantt._counter_items) == 1
    assert gantt.layout_.labels[-1] == "rank 1 (collapsed)"


def sixteen_ranks(gantt, expanded=(0, 9), **kwargs):
    tl = synthetic_timeline(ranks=16, steps=6)
    gantt.set_timeline(tl, **kwargs)
    gantt.set_collapsed(set(tl.ranks) - set(expanded))
    return tl


def test_every_expanded_rank_names_its_lanes(gantt, qtbot):
    from explorer.timeline.gantt import MIN_ROW_PX

    tl = sixteen_ranks(gantt, expanded=range(16))
    lay, axis = gantt.layout_, gantt.lane_axis
    seen: dict[int, str] = {}
    gantt.scroll_rows(-1e9)
    while True:   # scroll through every row, collecting the names the column paints
        y0, y1 = gantt.y_range()
        for kind, name, label, rect in axis.visible_texts():
            if kind == "lane":
                assert rect.height() <= gantt.row_height_px() + 1
        shown = {name for kind, name, _, _ in axis.visible_texts() if kind == "lane"}
        for lane in gantt.visible_lanes():
            title = lane_title(tl.lanes[lane])
            assert title in shown, (lane, title)
            seen[lane] = title
        if y1 >= lay.height:
            break
        gantt.scroll_rows(y1 - y0 - 1)
    assert set(seen) == set(range(len(tl.lanes)))   # every lane of the 16 ranks named
    assert gantt.row_height_px() >= MIN_ROW_PX


def test_sixteen_ranks_keep_tall_rows_and_scroll(gantt, qtbot):
    from explorer.timeline.gantt import MIN_ROW_PX

    tl = sixteen_ranks(gantt, expanded=range(16))   # 64 rows in a 400 px widget
    assert gantt.row_height_px() >= MIN_ROW_PX
    lanes = gantt.visible_lanes()
    assert 5 <= len(lanes) < len(tl.lanes)
    assert gantt.scroll.isVisible()
    y0, _ = gantt.y_range()
    # the wheel over the rows scrolls them, leaving the time range alone
    x_before = gantt.x_range()
    at = QPointF(view_point(gantt, sum(x_before) / 2, sum(gantt.y_range()) / 2))
    wheel = QWheelEvent(at, QPointF(gantt.plot.viewport().mapToGlobal(at.toPoint())),
                        QPoint(0, 0), QPoint(0, -120), Qt.NoButton, Qt.NoModifier,
                        Qt.NoScrollPhase, False)
    QApplication.sendEvent(gantt.plot.viewport(), wheel)
    assert gantt.y_range()[0] > y0 and gantt.x_range() == pytest.approx(x_before)
    assert gantt.visible_lanes()[0] != lanes[0]
    # the keys and the scroll bar move through the rows too
    gantt.plot.setFocus()
    qtbot.keyClick(gantt.plot, Qt.Key_Home)
    assert gantt.y_range()[0] == pytest.approx(y0)
    qtbot.keyClick(gantt.plot, Qt.Key_Down)
    assert gantt.y_range()[0] == pytest.approx(y0 + 1)
    qtbot.keyClick(gantt.plot, Qt.Key_End)
    assert gantt.y_range()[1] == pytest.approx(gantt.layout_.height + 0.2)
    assert gantt.visible_lanes()[-1] == gantt.layout_.order[-1]
    gantt.scroll.setValue(0)
    assert gantt.y_range()[0] == pytest.approx(y0)
    # the fold keeps the scroll position; F shows the top again
    gantt.scroll_rows(10)
    top = gantt.y_range()[0]
    gantt.toggle_rank(15)
    assert gantt.y_range()[0] == pytest.approx(top)
    qtbot.keyClick(gantt.plot, Qt.Key_F)
    assert gantt.y_range()[0] == pytest.approx(y0)


def test_lane_height_zoom_changes_the_rows_in_view(gantt, qtbot):
    from explorer.timeline.gantt import MIN_ROW_PX

    sixteen_ranks(gantt, expanded=range(16))
    before = len(gantt.visible_lanes())
    gantt.plot.setFocus()
    qtbot.keyClick(gantt.plot, Qt.Key_Plus)
    qtbot.keyClick(gantt.plot, Qt.Key_Plus)
    taller = len(gantt.visible_lanes())
    assert taller < before
    for _ in range(10):
        qtbot.keyClick(gantt.plot, Qt.Key_Minus)
    assert gantt.row_height_px() == pytest.approx(MIN_ROW_PX)
    assert len(gantt.visible_lanes()) > before
    # Ctrl+wheel zooms the lane height too, the time range stays
    x_before = gantt.x_range()
    at = QPointF(view_point(gantt, sum(x_before) / 2, sum(gantt.y_range()) / 2))
    wheel = QWheelEvent(at, QPointF(gantt.plot.viewport().mapToGlobal(at.toPoint())),
                        QPoint(0, 0), QPoint(0, 240), Qt.NoButton, Qt.ControlModifier,
                        Qt.NoScrollPhase, False)
    QApplication.sendEvent(gantt.plot.viewport(), wheel)
    assert gantt.row_height_px() > MIN_ROW_PX * 1.4
    assert gantt.x_range() == pytest.approx(x_before)


def test_a_few_rows_fill_the_view_and_do_not_scroll(gantt):
    gantt.set_timeline(small_timeline())
    assert gantt.visible_lanes() == gantt.layout_.order and not gantt.scroll.isVisible()
    gantt.zoom_rows(1 / 1.25)   # rows cannot shrink below what fills the view
    assert gantt.visible_lanes() == gantt.layout_.order


def test_ranks_group_per_node_when_told(gantt):
    sixteen_ranks(gantt, ranks_per_node=8)
    nodes = gantt.node_groups()
    assert [n for n, *_ in nodes] == [0, 1]
    groups = {r: (top, bottom) for r, top, bottom in gantt.layout_.groups}
    assert nodes[0][1] == groups[0][0] and nodes[0][2] == groups[7][1]
    assert nodes[1][1] == groups[8][0] and nodes[1][2] == groups[15][1]
    gantt.scroll_rows(-1e9)
    shown = [name for kind, name, _, _ in gantt.lane_axis.visible_texts() if kind == "node"]
    assert shown[0] == "node 0"
    sixteen_ranks(gantt)   # without the platform's GPUs per node: no grouping
    assert gantt.node_groups() == []


def test_a_click_on_a_rank_name_folds_it(gantt):
    sixteen_ranks(gantt)
    gantt.scroll_rows(-1e9)
    rect = next(r for kind, name, _, r in gantt.lane_axis.visible_texts() if name == "rank 0")
    assert gantt.lane_axis.text_at(rect.center()) == ("rank", 0)
    gantt.lane_axis.on_rank_clicked(0)
    assert 0 in gantt.collapsed


def test_a_two_node_prediction_groups_its_ranks_per_node(qtbot):
    """The prediction says how many GPUs a node holds; the Gantt groups by it."""
    from paths import SCENARIOS

    from explorer.timeline.gantt import GanttWidget
    from predictors import load_scenario, predict

    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "2node-8x-h100"}
    timeline = predict(doc).timeline
    assert timeline.meta["gpus_per_node"] == 8 and len(timeline.ranks) == 16
    gantt = GanttWidget()
    qtbot.addWidget(gantt)
    gantt.set_timeline(timeline)
    assert gantt.ranks_per_node == 8
