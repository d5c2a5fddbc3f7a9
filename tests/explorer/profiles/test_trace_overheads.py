"""CPU overheads measured from the user's recorded GPU trace: the Profiles tab's control, the
worker that reads the trace, and ``overheads=`` in the predictions."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import gzip
import json
import threading
from dataclasses import replace

import pytest
from paths import ROOT, SHARED_DATA
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QFileDialog

from explorer.profiles.panel import ProfilesPanel
from explorer.profiles.user_overheads import TraceOverheads, measure_trace_overheads
from explorer.run.prediction import PredictionController
from explorer.timeline.sample import synthetic_timeline
from predictors.engine.predict import Prediction
from predictors.profiles import OverheadTable
from predictors.utils.progress import Cancelled

DLRM_TRACE = (SHARED_DATA / "traces" / "param-dlrm-v100-8rank" /
              "worker0_step_12.1694128201545.pt.trace.json.gz")
CPU_TRACE = ROOT / "sample_traces" / "small_dlrm_cpu1.pt.trace.json.gz"
needs_gpu_trace = pytest.mark.skipif(
    not DLRM_TRACE.exists(), reason=f"the recorded GPU trace is not here: {DLRM_TRACE} "
                                    "(../shared/data is absent)")
GPU_PLATFORM = {"preset": "v100-1"}


def settings_in(tmp_path):
    return QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)


def corrupt_trace(tmp_path):
    path = tmp_path / "broken.pt.trace.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "name": '))
    return path


class GatedMeasure:
    """The real measurement, held until ``gate`` is set; records the thread it ran on."""

    def __init__(self):
        self.gate, self.entered = threading.Event(), threading.Event()
        self.threads = []

    def __call__(self, paths, progress=None, cancelled=None):
        self.threads.append(threading.current_thread())
        self.entered.set()
        progress(0.1, "waiting")
        while not self.gate.wait(0.01):
            if cancelled():
                raise Cancelled("test")
        return measure_trace_overheads(paths, progress, cancelled)


def fake_measured(name="fake.json.gz") -> TraceOverheads:
    from predictors.costs.overheads import default_overheads
    table = replace(default_overheads("gpu"), source=f"measured from {name} (3 ops on Fake GPU)")
    return TraceOverheads(table, [f"/traces/{name}"], 3, ["Fake GPU"])


# --- the panel on its own ---------------------------------------------------------------

@needs_gpu_trace
def test_a_trace_is_measured_in_a_worker_and_becomes_the_choice(qtbot, tmp_path):
    gated = GatedMeasure()
    panel = ProfilesPanel(settings_in(tmp_path), measure_fn=gated)
    qtbot.addWidget(panel)
    panel.set_platform(GPU_PLATFORM)
    panel.show()
    assert panel.trace_overheads() is None and panel.overheads() is None
    assert panel.overheads_label.text().startswith("profile's table (101 ops)")
    assert "measured from 8 recorded GPU job(s)" in panel.overheads_label.toolTip()
    assert not panel.profile_overheads_button.isEnabled()

    panel.load_overheads([DLRM_TRACE])  # returns at once: the worker waits on the gate
    assert gated.entered.wait(5)
    qtbot.waitUntil(lambda: panel.overheads_progress.value() == 10, timeout=5_000)
    assert panel.overheads_busy.isVisible() and panel.trace_overheads() is None
    qtbot.wait(50)  # the GUI thread keeps running its event loop meanwhile
    with qtbot.waitSignal(panel.sigOverheadsChanged, timeout=30_000) as blocker:
        gated.gate.set()
    assert gated.threads[0] is not threading.main_thread()

    measured = blocker.args[0]
    assert isinstance(measured, TraceOverheads) and measured is panel.trace_overheads()
    assert isinstance(measured.table, OverheadTable) and measured.table.per_op
    assert measured.ops > 100 and measured.devices == ["Tesla V100-SXM2-32GB"]
    assert panel.overheads() is measured.table  # a GPU platform: used
    assert measured.table.source.startswith("measured from worker0_step_12")
    assert f"({measured.ops:,} ops on Tesla V100-SXM2-32GB)" in measured.table.source
    text = panel.overheads_label.text()
    assert "measured from worker0_step_12" in text and f"({measured.ops:,} ops)" in text
    assert str(DLRM_TRACE) in panel.overheads_label.toolTip()
    assert not panel.overheads_busy.isVisible() and not panel.overheads_note.isVisible()
    assert panel.profile_overheads_button.isEnabled()

    # On the local CPU the calibrated profile is used, and the panel says so.
    panel.set_platform({"preset": "local-cpu"})
    assert panel.trace_overheads() is measured and panel.overheads() is None
    assert panel.overheads_note.isVisible() and "Not used" in panel.overheads_note.text()
    panel.set_platform(GPU_PLATFORM)
    assert panel.overheads() is measured.table and not panel.overheads_note.isVisible()

    with qtbot.waitSignal(panel.sigOverheadsChanged) as blocker:
        panel.profile_overheads_button.click()
    assert blocker.args == [None] and panel.overheads() is None
    assert panel.overheads_label.text().startswith("profile's table")


@pytest.mark.parametrize("which", ["cpu-only", "corrupt", "missing"])
def test_an_unusable_trace_is_one_line_and_the_previous_choice_stays(qtbot, tmp_path, which):
    panel = ProfilesPanel(settings_in(tmp_path))
    qtbot.addWidget(panel)
    panel.set_platform(GPU_PLATFORM)
    panel.show()
    before = fake_measured()
    panel.set_trace_overheads(before)
    path = {"cpu-only": CPU_TRACE, "corrupt": corrupt_trace(tmp_path),
            "missing": tmp_path / "gone.json"}[which]
    changed = []
    panel.sigOverheadsChanged.connect(changed.append)
    with qtbot.waitSignal(panel.sigOverheadsFailed, timeout=30_000) as blocker:
        panel.load_overheads([path])
    message = blocker.args[0]
    assert path.name in message and "\n" not in message and "Traceback" not in message
    if which == "cpu-only":
        assert "records no GPU" in message and "include the kernels" in message
    note = panel.overheads_note
    assert note.isVisible() and note.text() == f"Could not use the trace: {message}"
    assert panel.trace_overheads() is before and panel.overheads() is before.table
    assert changed == [] and not panel.overheads_busy.isVisible()
    assert "measured from fake.json.gz" in panel.overheads_label.text()


def test_use_profiles_cancels_a_trace_being_read(qtbot, tmp_path):
    gated = GatedMeasure()
    panel = ProfilesPanel(settings_in(tmp_path), measure_fn=gated)
    qtbot.addWidget(panel)
    panel.set_platform(GPU_PLATFORM)
    panel.show()
    panel.load_overheads([CPU_TRACE])
    assert gated.entered.wait(5)
    assert panel.profile_overheads_button.isEnabled()  # it cancels the load
    with qtbot.waitSignal(panel.loader.sigCancelled, timeout=5_000):
        panel.profile_overheads_button.click()
    assert not panel.overheads_busy.isVisible() and panel.trace_overheads() is None
    assert panel.shutdown(5_000)


def test_the_file_dialog_takes_several_json_and_gz_files(qtbot, tmp_path, monkeypatch):
    panel = ProfilesPanel(settings_in(tmp_path), measure_fn=lambda paths, **kw: None)
    qtbot.addWidget(panel)
    asked = {}

    def fake_dialog(parent, caption, folder, filters):
        asked.update(caption=caption, filters=filters)
        return ["/a/rank0.json.gz", "/a/rank1.json.gz"], filters

    monkeypatch.setattr(QFileDialog, "getOpenFileNames", staticmethod(fake_dialog))
    started = []
    panel.loader.sigStarted.connect(started.append)
    panel.trace_button.click()
    assert started == [["/a/rank0.json.gz", "/a/rank1.json.gz"]]
    assert "*.json.gz" in asked["filters"] and "*.json" in asked["filters"]
    assert "ranks of one job" in asked["caption"]
    for widget in (panel.trace_button, panel.profile_overheads_button,
                   panel.overheads_label, panel.overheads_cancel):
        assert widget.toolTip()
    assert panel.shutdown(5_000)


# --- the prediction controller ----------------------------------------------------------

class KwargsPredict:
    """Records the keyword arguments of every call (progress and cancelled left out)."""

    def __init__(self):
        self.calls = []

    def __call__(self, scenario, progress=None, cancelled=None, **kwargs):
        self.calls.append(kwargs)
        progress(0.5, "fake")
        tl = synthetic_timeline(steps=2)
        notes = [f"overheads: {kwargs['overheads'].source}"] if "overheads" in kwargs else []
        return Prediction(scenario.get("name", ""), "fake", "gpu", tl, tl.span_ms(),
                          [{"rank": 0, "iteration_ms": tl.span_ms(),
                            "device_active_ms": tl.device_active_ms(0)}],
                          len(tl), tl.top_ops(3), notes)


def strict_predict(scenario, progress=None, cancelled=None):
    """A predict function without ``profile`` or ``overheads`` keywords."""
    return KwargsPredict()(scenario, progress, cancelled)


def test_the_controller_passes_overheads_only_when_set(qtbot, default_scenario):
    strict = PredictionController(predict_fn=strict_predict)
    with qtbot.waitSignal(strict.sigFinished, timeout=10_000):
        strict.start(default_scenario)  # no overheads set: the keyword is not passed

    fake = KwargsPredict()
    c = PredictionController(predict_fn=fake)
    table = fake_measured().table
    c.set_overheads(table)  # no document: nothing scheduled
    assert not c.is_pending()
    with qtbot.waitSignal(c.sigFinished, timeout=10_000):
        c.start(default_scenario)
    assert fake.calls[-1] == {"overheads": table}
    c.set_overheads(None)
    with qtbot.waitSignal(c.sigFinished, timeout=10_000):
        c.start(default_scenario)
    assert fake.calls[-1] == {}
    assert c.shutdown() and strict.shutdown()


# --- in the main window -----------------------------------------------------------------

def idle(w):
    return not w.controller.is_running() and not w.controller.is_pending()


@needs_gpu_trace
def test_predictions_use_the_traces_overheads_on_gpu_platforms(make_window, qtbot):
    fake = KwargsPredict()
    w = make_window(predict_fn=fake)
    w.editor.set_platform(GPU_PLATFORM)
    qtbot.waitUntil(lambda: bool(fake.calls) and idle(w), timeout=10_000)
    assert "overheads" not in fake.calls[-1]
    undo_count = w.editor.undo_stack.count()
    panel = w.profiles.panel
    w.profiles.show_panel()

    panel.load_overheads([DLRM_TRACE])
    qtbot.waitUntil(lambda: panel.trace_overheads() is not None, timeout=30_000)
    table = panel.trace_overheads().table
    qtbot.waitUntil(lambda: fake.calls[-1].get("overheads") is table and idle(w),
                    timeout=10_000)
    assert w.controller.overheads is table
    assert w.profiles.label.text().endswith("· overheads: your trace")
    assert "measured from worker0_step_12" in w.statusBar().currentMessage()
    notes = w.summary.notes.text()
    assert "overheads: measured from worker0_step_12" in notes

    # A session setting: not in the scenario, not an undoable edit, not remembered.
    assert "overheads" not in json.dumps(w.editor.document.snapshot())
    assert w.editor.undo_stack.count() == undo_count and not w.isWindowModified()
    fake2 = KwargsPredict()
    w2 = make_window(predict_fn=fake2)
    assert w2.profiles.panel.trace_overheads() is None and w2.controller.overheads is None

    # The local CPU keeps its calibrated profile's overheads; a GPU platform uses them again.
    n = len(fake.calls)
    w.editor.set_platform({"preset": "local-cpu"})
    qtbot.waitUntil(lambda: len(fake.calls) > n and idle(w), timeout=10_000)
    assert "overheads" not in fake.calls[-1] and w.controller.overheads is None
    assert "not used on the local CPU" in w.statusBar().currentMessage()
    assert "overheads" not in w.profiles.label.text()
    assert panel.overheads_note.isVisible()
    w.editor.set_platform(GPU_PLATFORM)
    qtbot.waitUntil(lambda: fake.calls[-1].get("overheads") is table and idle(w),
                    timeout=10_000)

    # "Use profile's" goes back.
    n = len(fake.calls)
    panel.profile_overheads_button.click()
    qtbot.waitUntil(lambda: len(fake.calls) > n and idle(w), timeout=10_000)
    assert "overheads" not in fake.calls[-1] and w.controller.overheads is None
    assert "overheads" not in w.profiles.label.text()
    assert "overheads:" not in w.summary.notes.text()


@needs_gpu_trace
def test_the_real_prediction_notes_the_measured_overheads(make_window, qtbot):
    w = make_window()  # the real predict function
    w.editor.set_platform(GPU_PLATFORM)
    panel = w.profiles.panel
    panel.load_overheads([DLRM_TRACE])
    qtbot.waitUntil(lambda: panel.trace_overheads() is not None, timeout=30_000)
    qtbot.waitUntil(lambda: idle(w) and w.prediction is not None
                    and any(n.startswith("overheads:") for n in w.prediction.notes),
                    timeout=120_000)
    note = next(n for n in w.prediction.notes if n.startswith("overheads:"))
    assert note == f"overheads: {panel.trace_overheads().table.source}"
    assert "overheads: measured from worker0_step_12" in w.summary.notes.text()


def test_a_cpu_only_trace_in_the_window_shows_in_the_panel_and_status_bar(make_window,
                                                                           qtbot):
    fake = KwargsPredict()
    w = make_window(predict_fn=fake)
    w.editor.set_platform(GPU_PLATFORM)
    panel = w.profiles.panel
    with qtbot.waitSignal(panel.sigOverheadsFailed, timeout=30_000):
        panel.load_overheads([CPU_TRACE])
    assert "records no GPU" in w.statusBar().currentMessage()
    assert panel.trace_overheads() is None and w.controller.overheads is None
    qtbot.waitUntil(lambda: bool(fake.calls) and idle(w), timeout=10_000)
    assert "overheads" not in fake.calls[-1]
