"""Compare with a multi-rank recording: the eight ranks of a DLRM run on a DGX-1 load
without widening the window, the long caption is elided with the whole text in its
tooltip, and the names of the ranks and their lanes never overlap."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import pytest
from paths import SCENARIOS, SHARED_DATA
from PySide6.QtCore import QSettings

from predictors.engine.predict import predict
from predictors.scenario.format import load_scenario

RANKS = sorted((SHARED_DATA / "traces" / "param-dlrm-v100-8rank")
               .glob("worker*_step_12.*.pt.trace.json.gz"))
pytestmark = pytest.mark.skipif(len(RANKS) != 8, reason="the 8-rank V100 traces are not "
                                "here (../shared/data/traces/param-dlrm-v100-8rank)")


@pytest.fixture(scope="module")
def dgx1_prediction():
    """The 64-table DLRM on the DGX-1 the traces were recorded on (eight V100s)."""
    doc = load_scenario(SCENARIOS / "dlrm_64tables_8gpu.json")
    doc["platform"] = {"preset": "dgx1-v100"}
    return predict(doc)


def _destroy(widget) -> None:
    """Delete a closed window now, not when the garbage collector runs in a later test."""
    import gc

    from PySide6.QtCore import QCoreApplication, QEvent
    widget.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.DeferredDelete)
    gc.collect()


def _overlaps(texts) -> list:
    rects = [(name, rect) for _, name, _, rect in texts]
    return [(a, b) for i, (a, ra) in enumerate(rects) for b, rb in rects[i + 1:]
            if ra.intersects(rb)]


@pytest.mark.parametrize("size", [(1600, 900), (1280, 720)])
def test_eight_ranks_keep_the_window_width(qtbot, tmp_path, dgx1_prediction, size):
    from explorer.window import MainWindow

    w = MainWindow(predict_fn=lambda doc, progress=None, cancelled=None: dgx1_prediction,
                   settings=QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat),
                   debounce_ms=10)
    w.confirm_discard = lambda: True
    try:
        w.resize(*size)
        w.show()
        qtbot.waitUntil(lambda: w.compare.view.prediction is not None, timeout=30_000)
        width = w.width()
        assert width == size[0]
        with qtbot.waitSignal(w.compare.loader.sigFinished, timeout=60_000):
            w.compare.load([str(p) for p in RANKS])
        qtbot.wait(50)
        view = w.compare.view
        assert view.recorded.timeline.ranks == list(range(8))
        assert w.width() == width
        assert w.minimumSizeHint().width() <= width

        caption = view.recorded_caption
        assert caption.text().startswith("Recorded — 8 ranks (worker0_step_12.")
        assert caption.text().endswith("each rank aligned on its own ProfilerStep#10")
        shown = caption.fontMetrics().horizontalAdvance(caption.shown_text())
        assert shown <= caption.contentsRect().width()
        if size[0] == 1280:   # too narrow for the whole caption
            assert caption.is_elided() and "…" in caption.shown_text()
            assert caption.toolTip() == caption.text()

        # every rank unfolded: rank and lane names side by side, none over another
        w.compare.dock.raise_()
        for gantt in (view.predicted, view.recorded):
            gantt.set_collapsed(set())
        qtbot.wait(20)
        axis = view.recorded.plot.getPlotItem().getAxis("left")
        texts = axis.visible_texts()
        assert {kind for kind, *_ in texts} >= {"rank", "lane"}
        assert _overlaps(texts) == []
        view.recorded.set_collapsed(set(range(8)))   # folded: one row a rank
        qtbot.wait(20)
        texts = axis.visible_texts()
        assert sum(kind == "rank" for kind, *_ in texts) >= (2 if size[1] > 720 else 1)
        assert _overlaps(texts) == []
    finally:
        w.close()
        _destroy(w)


@pytest.fixture(scope="module")
def dgx1_recording():
    from predictors.traces import load_recording

    return load_recording([str(p) for p in RANKS])


def _plot_x(view, gantt, t_ms=None) -> float:
    """The x in ``view`` of the pane's plot area's left edge, or of time ``t_ms``."""
    from PySide6.QtCore import QPointF

    vb = gantt.vb
    scene = (vb.sceneBoundingRect().topLeft() if t_ms is None
             else vb.mapViewToScene(QPointF(t_ms, 0.0)))
    return gantt.plot.mapTo(view, gantt.plot.mapFromScene(scene)).x()


def test_panes_share_one_time_axis_however_folded(qtbot, dgx1_prediction, dgx1_recording):
    from explorer.compare import CompareView

    view = CompareView()
    qtbot.addWidget(view)
    view.resize(1500, 900)
    view.show()
    view.set_prediction(dgx1_prediction)
    view.set_recording(dgx1_recording)
    panes = (view.predicted, view.recorded)

    def aligned():
        qtbot.wait(20)
        lefts = [_plot_x(view, g) for g in panes]
        zeros = [_plot_x(view, g, 0.0) for g in panes]
        tens = [_plot_x(view, g, 10.0) for g in panes]
        return (abs(lefts[0] - lefts[1]) <= 1 and abs(zeros[0] - zeros[1]) <= 1
                and abs(tens[0] - tens[1]) <= 1), (lefts, zeros, tens)

    assert view.recorded.vb.linkedView(0) is view.predicted.vb
    ok, where = aligned()
    assert ok, where
    # names of very different widths: every lane of the prediction, one row per recorded rank
    view.predicted.set_collapsed(set())
    view.recorded.set_collapsed(set(range(8)))
    assert view.recorded.lane_axis.natural_width < view.predicted.lane_axis.natural_width
    ok, where = aligned()
    assert ok, where
    view.predicted.set_collapsed(set(range(8)))   # and the other way round
    view.recorded.set_collapsed(set())
    ok, where = aligned()
    assert ok, where
    assert view.predicted.vb.state["limits"]["xLimits"] == \
        view.recorded.vb.state["limits"]["xLimits"]


def test_each_recorded_rank_starts_its_step_at_zero(qtbot, dgx1_prediction, dgx1_recording):
    from explorer.compare import CompareView

    raw = {s.rank: s.start_us for s in dgx1_recording.timeline.steps
           if s.name == "ProfilerStep#10"}
    assert max(raw.values()) - min(raw.values()) > 1000   # the ranks started apart
    view = CompareView()
    qtbot.addWidget(view)
    view.set_prediction(dgx1_prediction)
    view.set_recording(dgx1_recording)
    start = dgx1_prediction.timeline.begin_us
    steps = {s.rank: s.start_us for s in view.recorded.timeline.steps
             if s.name == view.comparison.recorded_step}
    assert sorted(steps) == list(range(8))
    assert all(v == pytest.approx(start) for v in steps.values()), steps
    for rank in range(8):   # each rank's events moved with its own step
        lanes = [i for i, lane in enumerate(view.recorded.timeline.lanes) if lane.rank == rank]
        first = view.recorded.timeline.start_us[
            np.isin(view.recorded.timeline.lane, lanes)].min()
        raw_lanes = [i for i, lane in enumerate(dgx1_recording.timeline.lanes)
                     if lane.rank == rank and lane.kind in ("cpu", "stream", "counter")]
        raw_first = dgx1_recording.timeline.start_us[
            np.isin(dgx1_recording.timeline.lane, raw_lanes)].min()
        assert first - start == pytest.approx(raw_first - raw[rank])
    assert view.recorded_caption.text().endswith("each rank aligned on its own "
                                                 "ProfilerStep#10")
