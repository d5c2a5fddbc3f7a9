"""Compare with a multi-rank recording: the eight ranks of a DLRM run on a DGX-1 load
without widening the window, the long caption is elided with the whole text in its
tooltip, and the names of the ranks and their lanes never overlap."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

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
        assert caption.text().endswith("aligned on ProfilerStep#10")
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
