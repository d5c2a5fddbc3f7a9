"""Perfetto's flow arrows (a CPU op to the kernels it launched) and the per-op totals of a
selected time range."""
import pytest
from PySide6.QtCore import QPointF

from explorer.timeline.flows import kernels_of, launch_of
from explorer.timeline.range_totals import RangeTotals, range_totals
from explorer.widgets import table_csv
from predictors.engine.timeline import TimelineBuilder


def queued_timeline():
    """Two mm ops launched back to back while the stream is busy (their kernels queue),
    one op launching two kernels, and a CPU op with no kernel."""
    b = TimelineBuilder("queued")
    cpu, stream = b.lane(0, "cpu", "CPU main thread"), b.lane(0, "stream", "stream 0")
    b.add(cpu, 0.0, 10.0, "cpu_op", "aten::mm", "[4, 4]")            # 0
    b.add(cpu, 12.0, 10.0, "cpu_op", "aten::mm", "[4, 4]")           # 1
    b.add(stream, 30.0, 20.0, "gemm", "aten::mm", "[4, 4] | gemm model")   # 2: op 0's
    b.add(stream, 50.0, 20.0, "gemm", "aten::mm", "[4, 4] | gemm model")   # 3: op 1's
    b.add(cpu, 24.0, 6.0, "cpu_op", "aten::cat", "[8]")              # 4
    b.add(stream, 70.0, 5.0, "memcpy", "aten::cat", "[8] | copy")    # 5
    b.add(stream, 75.0, 5.0, "memcpy", "aten::cat", "[8] | copy")    # 6
    b.add(cpu, 32.0, 4.0, "cpu_op", "aten::view_as", "")             # 7: launches nothing
    return b.build()


def test_kernels_pair_with_their_launches_in_launch_order():
    tl = queued_timeline()
    # kernel 3 starts after both mm ops: it is the second op's, not the latest before it
    assert (launch_of(tl, 2), launch_of(tl, 3)) == (0, 1)
    assert kernels_of(tl, 0) == [2] and kernels_of(tl, 1) == [3]
    # one op, two kernels: both are its
    assert launch_of(tl, 5) == launch_of(tl, 6) == 4
    assert kernels_of(tl, 4) == [5, 6]
    assert kernels_of(tl, 7) == [] and launch_of(tl, 7) is None
    assert launch_of(tl, 0) is None and kernels_of(tl, 2) == []


def clicked_kernel_3(gantt):
    """The queued timeline shown with kernel 3 clicked; its arrow comes from op 1."""
    tl = queued_timeline()
    gantt.set_timeline(tl)
    gantt.select_event(3)
    gantt.sigEventClicked.emit(3)
    assert gantt.flows.pairs == [(1, 3)]
    return tl, gantt.flows


def test_a_clicked_bar_draws_its_flow_arrows(gantt):
    tl, flows = clicked_kernel_3(gantt)
    assert len(flows._items) == 2   # the line and its head
    line = flows._items[0]
    xs, ys = line.getData()
    lay = gantt.layout_
    assert list(xs) == pytest.approx([0.012, 0.050])
    assert list(ys) == pytest.approx([lay.y[0], lay.y[1]])
    assert "launched by <b>aten::mm</b> at 0.012 ms" in gantt.details.text()
    gantt.select_event(4)
    gantt.sigEventClicked.emit(4)
    assert flows.pairs == [(4, 5), (4, 6)] and len(flows._items) == 3
    assert "launched 2 kernel(s)" in gantt.details.text()
    # folded, the CPU thread has no row: no arrow; unfolded again, the arrows are back
    gantt.set_collapsed({0})
    assert flows._items == []
    gantt.set_collapsed(set())
    assert len(flows._items) == 3
    gantt.sigEventClicked.emit(-1)          # a click on empty space
    assert flows.pairs == [] and flows._items == []
    gantt.sigEventClicked.emit(2)
    gantt.set_timeline(queued_timeline())   # a new timeline clears them
    assert flows._items == []


def test_a_hovered_bar_draws_its_arrows_until_the_pointer_leaves_it(gantt, qtbot):
    """Hovering shows a bar's arrows for as long as the pointer is on it; then the clicked
    bar's come back (a real mouse move over the bar, through the Gantt's own hover)."""
    tl, flows = clicked_kernel_3(gantt)
    lay, vb = gantt.layout_, gantt.vb
    over_op4 = vb.mapViewToScene(QPointF(0.027, float(lay.y[tl.lane[4]])))
    gantt._on_mouse_moved(over_op4)       # the plot's sigMouseMoved handler
    assert gantt._hovered == 4
    assert flows.pairs == [(4, 5), (4, 6)] and len(flows._items) == 3
    gantt._on_mouse_moved(vb.mapViewToScene(QPointF(0.095, float(lay.y[0]))))   # empty
    assert gantt._hovered == -1
    assert flows.pairs == [(1, 3)] and len(flows._items) == 2


def test_range_totals_cut_bars_at_the_range_edges():
    tl = queued_timeline()
    rows = range_totals(tl, 0.005, 0.060)   # 5 .. 60 us
    by = {(r["name"], r["on"]): r for r in rows}
    assert by[("aten::mm", "CPU")]["count"] == 2
    assert by[("aten::mm", "CPU")]["total_ms"] == pytest.approx((5 + 10) / 1e3)
    assert by[("aten::mm", "device")]["total_ms"] == pytest.approx((20 + 10) / 1e3)
    assert by[("aten::mm", "device")]["share"] == pytest.approx(30 / 55)
    assert ("aten::cat", "device") not in by      # its kernels start at 70 us
    assert [r["total_ms"] for r in rows] == sorted((r["total_ms"] for r in rows), reverse=True)
    assert range_totals(tl, 0.2, 0.3) == [] and range_totals(None, 0, 1) == []


def test_the_totals_table_follows_the_range_selection(gantt, qtbot):
    totals = RangeTotals(gantt)
    qtbot.addWidget(totals)
    totals.show()
    gantt.set_timeline(queued_timeline())
    gantt.select_time_range(0.0, 0.1)
    assert totals.isVisible() and totals.table.rowCount() == len(totals.rows) == 5
    assert totals.table.item(0, 0).text() == "aten::mm"
    assert "0.000 – 0.100 ms" in totals.caption.text()
    header, first = table_csv(totals.table).decode().splitlines()[:2]
    assert header == "op,category,on,count,total (ms),share of range"
    assert first == "aten::mm,GEMM,device,2,0.040,40.0 %"
    gantt.clear_time_range()
    assert not totals.isVisible() and totals.table.rowCount() == 0
