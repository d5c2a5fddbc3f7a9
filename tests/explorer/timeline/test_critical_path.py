"""The critical path on the Gantt: one overlay item, the rest dimmed, the details say so."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from pathlib import Path

import numpy as np
import pytest

from explorer.timeline.gantt import BAR_HEIGHT, CRITICAL_DIM, NO_CRITICAL_PATH
from predictors.engine.timeline import TimelineBuilder

SMALL_DLRM = Path(__file__).resolve().parents[3] / "resources" / "scenarios" / "small_dlrm.json"


def path_timeline(path=(0, 3)):
    b = TimelineBuilder("cp")
    main = b.lane(0, "cpu", "main")
    s0 = b.lane(0, "stream", "stream 0")
    b.add(main, 0.0, 100.0, "cpu_op", "aten::linear")
    b.add(main, 200.0, 50.0, "cpu_op", "aten::relu")
    b.add(s0, 40.0, 30.0, "gemm", "sgemm_kernel")
    b.add(s0, 120.0, 60.0, "gemm", "big_gemm")
    tl = b.build()
    if path is not None:
        tl.meta["critical_path"] = list(path)
    return tl


@pytest.fixture(scope="module")
def dlrm_timeline():
    from predictors import load_scenario, predict

    return predict(load_scenario(SMALL_DLRM)).timeline




def test_toggling_highlights_exactly_the_path_bars(gantt, dlrm_timeline):
    tl = dlrm_timeline
    path = np.asarray(tl.meta["critical_path"])
    assert 0 < len(path) < len(tl)
    gantt.set_timeline(tl)
    item = gantt._critical_item
    assert item is not None and not item.isVisible()        # off by default
    assert all(bar.opacity() == 1.0 for bar in gantt._bars.values())
    gantt.set_critical_path_shown(True)
    assert item.isVisible() and item.zValue() > max(b.zValue() for b in gantt._bars.values())
    y = gantt.layout_.y[tl.lane[path]] - BAR_HEIGHT / 2
    got = sorted(zip(item.opts["x0"], item.opts["y0"], item.opts["width"]))
    want = sorted(zip(tl.start_us[path] / 1e3, y, tl.dur_us[path] / 1e3))
    np.testing.assert_allclose(np.array(got), np.array(want))
    assert all(bar.opacity() == pytest.approx(CRITICAL_DIM) for bar in gantt._bars.values())
    assert item.opacity() == 1.0
    assert "critical&nbsp;path" in gantt.legend.text()
    # one more item, never one per bar
    assert sum(len(b.opts["x0"]) for b in gantt._bars.values()) == len(tl)
    gantt.set_critical_path_shown(False)
    assert not item.isVisible()
    assert all(bar.opacity() == 1.0 for bar in gantt._bars.values())


def test_the_highlight_stays_while_predictions_refresh(gantt):
    gantt.set_timeline(path_timeline())
    gantt.set_critical_path_shown(True)
    gantt.set_stale(True)
    assert gantt._critical_item.opacity() < 0.5
    gantt.set_timeline(path_timeline(path=(1,)))
    assert gantt.critical_path_shown and gantt._critical_item.isVisible()
    assert list(gantt._critical_item.opts["x0"]) == [0.2]
    assert gantt._critical_item.opacity() == 1.0


def test_a_timeline_without_a_path_has_nothing_to_highlight(gantt, qtbot):
    with qtbot.waitSignal(gantt.sigCriticalPathAvailable) as blocker:
        gantt.set_timeline(path_timeline(path=None))
    assert blocker.args == [False]
    assert not gantt.has_critical_path() and gantt._critical_item is None
    gantt.set_critical_path_shown(True)
    assert all(bar.opacity() == 1.0 for bar in gantt._bars.values())
    with qtbot.waitSignal(gantt.sigCriticalPathAvailable) as blocker:
        gantt.set_timeline(path_timeline())
    assert blocker.args == [True]


def test_clicked_details_say_on_the_critical_path(gantt):
    gantt.set_timeline(path_timeline())
    gantt.select_event(3)
    assert "on the critical path" in gantt.details.text()
    assert "after aten::linear" in gantt.details.text()
    assert "on the critical path" in gantt.describe(3, rich=False)
    gantt.select_event(0)
    assert "on the critical path" in gantt.details.text()
    assert "after" not in gantt.details.text()
    gantt.select_event(2)
    assert "critical path" not in gantt.details.text()


def test_a_folded_rank_keeps_its_path_streams_only(gantt):
    tl = path_timeline()
    gantt.set_timeline(tl)
    gantt.set_collapsed({0})   # the folded rank's CPU thread is not drawn
    assert list(gantt._critical_item.opts["x0"]) == [0.12]


def test_view_menu_critical_path_action(make_window, qtbot, dlrm_timeline):
    w = make_window("")
    action = w.critical_path_action
    view = next(a.menu() for a in w.menuBar().actions() if a.text().replace("&", "") == "View")
    assert action in view.actions() and action.isCheckable() and not action.isChecked()
    assert action.shortcut().toString() == "Ctrl+Shift+C"
    others = [a for a in w.findChildren(type(action)) if a is not action]
    assert all(a.shortcut() != action.shortcut() for a in others)
    assert not action.isEnabled()
    w.gantt.set_timeline(path_timeline(path=None))    # a recorded trace has no path
    assert not action.isEnabled() and action.toolTip() == NO_CRITICAL_PATH
    w.gantt.set_timeline(dlrm_timeline)
    assert action.isEnabled()
    action.setChecked(True)
    assert w.gantt.critical_path_shown and w.gantt._critical_item.isVisible()
    action.trigger()
    assert not w.gantt.critical_path_shown and not w.gantt._critical_item.isVisible()
