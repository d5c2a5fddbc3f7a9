"""The Compare dock: a prediction above a recorded trace on a linked time axis, the table
of differences, trace loading in a worker (menu, drag and drop), errors, export."""
import json
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPointF, QSettings, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication

from explorer.compare import CompareView, TraceLoader
from predictors.engine.predict import predict
from predictors.scenario.format import load_scenario
from predictors.traces import load_recording

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "sample_traces" / "small_dlrm_cpu1.pt.trace.json.gz"


@pytest.fixture(scope="module")
def cpu_prediction():
    """The small DLRM predicted on the platform its sample trace was recorded on."""
    doc = load_scenario(ROOT / "resources" / "scenarios" / "small_dlrm.json")
    doc["platform"] = {"preset": "local-cpu", "threads": 1}
    return predict(doc)


def compared(qtbot, prediction, trace) -> CompareView:
    """A shown Compare view of ``prediction`` beside the recorded ``trace``."""
    view = CompareView()
    qtbot.addWidget(view)
    view.resize(1500, 760)
    view.show()
    view.set_prediction(prediction)
    view.set_recording(load_recording([trace]))
    return view


def test_prediction_beside_own_cpu_recording(qtbot, cpu_prediction, tmp_path):
    view = compared(qtbot, cpu_prediction, SAMPLE)
    c = view.comparison
    assert c.recorded_step == "ProfilerStep#0"
    assert c.recorded_ms == pytest.approx(9.087432)   # the file's ProfilerStep#0
    # measure --trace stored its untraced median: the error is judged against it
    assert c.unprofiled_ms == pytest.approx(8.024917, abs=1e-6)
    assert c.error_pct == pytest.approx(100 * (c.predicted_ms / c.unprofiled_ms - 1))
    assert "measured without profiler" in view.figures.text()
    assert "untraced steps" in view.figures.toolTip()
    assert c.predicted_ms == pytest.approx(cpu_prediction.iteration_ms)
    groups = {r["group"] for r in c.rows}
    assert groups == {"iteration", "op class", "lane"}
    assert {r["key"] for r in c.rows if r["group"] == "op class"} >= {"gemm", "embedding"}
    assert view.table.rowCount() == len(c.rows) - 2
    # The recorded step is aligned with the prediction's start and the axes are linked.
    assert view.recorded.timeline.begin_us >= -1.0
    view.predicted.vb.setXRange(1.0, 3.0, padding=0)
    x0, x1 = view.recorded.x_range()
    assert (x0, x1) == pytest.approx((1.0, 3.0), abs=0.05)
    assert "error" in view.figures.text()
    view.grab().save(str(tmp_path / "compare.png"))
    assert (tmp_path / "compare.png").stat().st_size > 10_000


def test_loader_reports_progress_and_one_line_errors(qtbot, tmp_path):
    loader = TraceLoader()
    with qtbot.waitSignal(loader.sigFinished, timeout=30_000) as done:
        loader.load([str(SAMPLE)])
    assert len(done.args[0].timeline) > 1000
    bad = tmp_path / "broken.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": ')
    with qtbot.waitSignal(loader.sigFailed, timeout=30_000) as failed:
        loader.load([str(bad)])
    assert failed.args[0].startswith("broken.json: ") and "\n" not in failed.args[0]
    assert loader.shutdown()


def test_loader_cancel(qtbot):
    import threading
    gate = threading.Event()

    def slow_load(paths, progress=None, cancelled=None):
        from predictors.utils.progress import Cancelled
        while not cancelled():
            gate.wait(0.01)
        raise Cancelled("stopped")

    loader = TraceLoader(slow_load)
    loader.load(["x.json"])
    with qtbot.waitSignal(loader.sigCancelled, timeout=5_000):
        loader.cancel()
    assert loader.shutdown()


def _drop(window, paths):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    pos = QPointF(200, 200)
    enter = QDragEnterEvent(pos.toPoint(), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    QApplication.sendEvent(window, enter)
    assert enter.isAccepted()
    drop = QDropEvent(pos, Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    QApplication.sendEvent(window, drop)
    return drop


def test_main_window_import_drop_and_export(qtbot, tmp_path, cpu_prediction):
    from explorer.window import MainWindow

    settings = QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat)
    w = MainWindow(predict_fn=lambda doc, progress=None, cancelled=None: cpu_prediction,
                   settings=settings, debounce_ms=10)
    # not handed to qtbot: the test closes and deletes it itself (_destroy)
    w.show()
    qtbot.waitUntil(lambda: w.compare.view.prediction is not None, timeout=30_000)
    texts = [a.text() for a in w.menuBar().actions()[0].menu().actions()]
    assert "&Import Trace…" in texts and "Export &Recorded Chrome Trace…" in texts
    with qtbot.waitSignal(w.compare.loader.sigFinished, timeout=30_000):
        assert _drop(w, [SAMPLE]).isAccepted()
    c = w.compare.view.comparison  # the dropped trace against the window's prediction
    assert c.recorded_step == "ProfilerStep#0"
    assert c.predicted_ms == pytest.approx(cpu_prediction.iteration_ms)
    assert not w.compare.dock.isHidden()
    out = w.compare.export_recorded(tmp_path / "recorded.json")
    doc = json.loads(out.read_text())
    assert any(e.get("name") == "ProfilerStep#0" for e in doc["traceEvents"])
    # A broken file shows an error in the dock; the window stays usable.
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    with qtbot.waitSignal(w.compare.loader.sigFailed, timeout=30_000):
        _drop(w, [bad])
    assert w.compare.view.error.isVisible()
    assert "bad.json" in w.compare.view.error.text()
    w.confirm_discard = lambda: True
    w.close()   # its threads end here, not while the next test runs
    assert not any(t.isRunning() for t in list(w.controller.runner._threads))
    assert not w.compare.loader.is_running()
    _destroy(w)


def _destroy(widget) -> None:
    """Delete a closed window now, its C++ side first, then its Python wrappers: not when
    the garbage collector happens to run during a later test."""
    import gc

    from PySide6.QtCore import QCoreApplication, QEvent
    widget.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.DeferredDelete)
    gc.collect()


def test_recorded_memory_sits_under_the_predicted_memory(qtbot, cpu_prediction, tmp_path):
    from predictors.calibrate.measure import measure

    doc = load_scenario(ROOT / "resources" / "scenarios" / "small_dlrm.json")
    doc["platform"] = {"preset": "local-cpu", "threads": 1}
    trace = tmp_path / "mem.json.gz"
    measure(doc, iters=1, warmup=1, trace=trace, memory=True)
    view = compared(qtbot, cpu_prediction, trace)
    for gantt in (view.predicted, view.recorded):
        assert len(gantt._counter_items) == 1
        assert gantt.layout_.labels[-1].startswith("memory")
    predicted = cpu_prediction.timeline
    recorded = view.recorded.timeline
    (p_lane, (_, p_values)), = predicted.counters.items()
    (r_lane, (_, r_values)), = recorded.counters.items()
    # the CPU's recorded counter is relative; the step's swing is what both show
    assert recorded.lanes[r_lane].name == "memory allocated (relative)"
    swing = lambda v: v.max() - v.min()
    assert swing(r_values) == pytest.approx(swing(p_values), rel=0.1)
    # the figures over the compared step: swings (the CPU's counter is relative)
    m = view.comparison.memory
    assert "recorded_peak_bytes" not in m
    assert m["recorded_swing_bytes"] == pytest.approx(m["predicted_swing_bytes"], rel=0.1)
    assert "memory swing, predicted / recorded" in view.figures.text()


def test_a_recording_of_another_cpu_than_the_profiles_is_said(qtbot, cpu_prediction,
                                                              tmp_path):
    """A CPU step's error includes the difference between CPUs: the header says when the
    trace names another CPU than the profile's, and when it names none."""
    import gzip
    import json

    from predictors.traces.recording import UNPROFILED_KEY

    profile_cpu = cpu_prediction.timeline.meta["profile_cpu"]
    view = compared(qtbot, cpu_prediction, SAMPLE)  # the sample names no CPU
    assert view.comparison.notes == [
        f"the trace does not say which CPU recorded it; the profile was calibrated on "
        f"{profile_cpu}"]
    assert "does not say which CPU" in view.figures.text()
    doc = json.loads(gzip.decompress(SAMPLE.read_bytes()))
    for cpu, says in (("GenuineIntel family 6 model 85, avx512", "another CPU"),
                      (profile_cpu, None)):
        doc[UNPROFILED_KEY]["cpu"] = cpu
        other = tmp_path / f"step{len(cpu)}.json"
        other.write_text(json.dumps(doc))
        notes = compared(qtbot, cpu_prediction, other).comparison.notes
        assert (notes == []) if says is None else (says in notes[0] and cpu in notes[0])
