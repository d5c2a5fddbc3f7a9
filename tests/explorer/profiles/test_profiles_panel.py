"""The Profiles tab: listing, provenance and validation, the choice predictions use, and
Run ▸ Calibrate This Device… in a worker thread with progress, cancel and errors."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import threading
import time
from pathlib import Path

from PySide6.QtCore import QSettings

from explorer.profiles import panel as profiles_panel
from explorer.profiles.panel import ROOFLINE, ProfilesPanel
from explorer.timeline.sample import synthetic_timeline
from predictors.engine.predict import Prediction
from predictors.hardware.specs import DeviceSpec
from predictors.profiles import DeviceProfile, bundled_profiles, save_profile
from predictors.utils.progress import Cancelled

CPU_VALIDATION = {
    "classes": {
        "gemm": {"samples": 412, "held_out": 83, "mlp": {"gmae": 0.043, "mape": 0.061},
                 "gbm": {"gmae": 0.052, "mape": 0.07}, "chosen": "mlp"},
        "embedding": {"samples": 96, "held_out": 20, "mlp": {"gmae": 0.12, "mape": 0.2},
                      "gbm": {"gmae": 0.081, "mape": 0.11, "gmae_isolated": 0.05,
                              "gmae_in_context": 0.1}, "chosen": "gbm",
                      "noise_floor": {"gmae": 0.064, "gmae_isolated": 0.03,
                                      "gmae_in_context": 0.09}},
    },
    "end_to_end": {"dlrm_geomean_error": 0.054, "transformer_geomean_error": 0.038},
}
CPU_PROVENANCE = {"host": "bench-7", "cpu_model": "AMD EPYC 7B13", "threads": 1,
                  "torch": "2.13.0+cpu", "date": "2025-11-29T09:00:00+00:00",
                  "samples": {"gemm": 412, "embedding": 96}}


def settings_in(tmp_path):
    return QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)


def cpu_spec(threads=1):
    return DeviceSpec(f"AMD EPYC 7B13 ({threads} thread)", "cpu", {"float32": 8e10},
                      vector_flops=2e10, mem_bw=1e10, threads=threads)


def write_profile(path, name="local CPU, 1 thread", kind="measured", spec=None,
                  provenance=None, validation=None) -> Path:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    prof = DeviceProfile(name, kind, spec or cpu_spec(),
                         provenance=dict(CPU_PROVENANCE if provenance is None else provenance),
                         validation=dict(CPU_VALIDATION if validation is None else validation))
    return save_profile(prof, path)


def tree_texts(tree):
    out = []

    def walk(item):
        for i in range(item.childCount()):
            child = item.child(i)
            out.append((child.text(0), child.text(1)))
            walk(child)
    walk(tree.invisibleRootItem())
    return out


# --- the panel on its own ---------------------------------------------------------------

def test_lists_the_bundled_profiles(qtbot, tmp_path):
    panel = ProfilesPanel(settings_in(tmp_path))
    qtbot.addWidget(panel)
    assert [str(i.path) for i in panel.infos] == [str(p) for p in bundled_profiles()]
    assert all(i.bundled for i in panel.infos)
    assert panel.choice() is None
    assert panel.choice_combo.itemText(0).startswith("Automatic")
    assert panel.choice_combo.itemText(1) == "Datasheet roofline"


def test_bundled_and_added_profiles_with_kinds_provenance_and_validation(qtbot, tmp_path,
                                                                          monkeypatch):
    gpu = write_profile(
        tmp_path / "bundled" / "h100.json", "NVIDIA H100 (public data)", "fitted",
        DeviceSpec("NVIDIA H100 80GB HBM3", "gpu", {"float32": 6.7e13}),
        {"data": ["neusight-gemm", "datasheet"], "date": "2025-11-28"},
        {"gemm_leave_one_gpu_out": {"A100": {"gmae": 0.083}},
         "traces": [{"name": "dlrm-v100-8x", "iteration_error": 0.071}]})
    sheet = write_profile(tmp_path / "bundled" / "b200.json", "NVIDIA B200", "datasheet",
                          DeviceSpec("NVIDIA B200", "gpu", {"float32": 8e13}), {}, {})
    monkeypatch.setattr(profiles_panel, "bundled_profiles", lambda: [gpu, sheet])
    panel = ProfilesPanel(settings_in(tmp_path))
    qtbot.addWidget(panel)
    panel.resize(1000, 600)
    kinds = [panel.tree.topLevelItem(i).text(1) for i in range(panel.tree.topLevelItemCount())]
    assert kinds == ["fitted (public)", "datasheet only"]
    assert panel.tree.topLevelItem(0).toolTip(1) == "fitted from public data"

    # A GPU profile's unknown validation keys show as a key/value tree.
    panel.select_profile(gpu)
    d = panel.details
    assert d.classes.isHidden() and not d.other.isHidden()
    rows = tree_texts(d.other)
    assert ("A100", "gmae 8.3 %") in rows and ("gmae", "8.3 %") in rows
    assert ("dlrm-v100-8x", "iteration_error +7.1 %") in rows  # labelled, not repeated
    assert ("data", "neusight-gemm, datasheet") in tree_texts(d.provenance)
    assert "fitted from public data" in d.header.text()

    # An added (measured) CPU profile: the per-class table and the end-to-end figures.
    cpu = write_profile(tmp_path / "mine" / "local-cpu-1t.json")
    info = panel.add_profile(cpu)
    assert info.path == cpu.resolve() and not info.bundled
    assert panel.selected().path == cpu.resolve()
    t = d.classes
    assert not t.isHidden() and t.rowCount() == 2
    row = {t.item(0, c).text() for c in range(t.columnCount())}
    assert {"embedding", "96", "20", "gbm", "8.1", "11.0"} <= row
    assert t.item(1, 0).text() == "gemm" and t.item(1, 4).text() == "4.3"
    assert t.item(0, 6).text() == "6.4" and t.item(1, 6).text() == "–"  # noise floor
    assert "inside training steps: model 10.0 %, noise floor 9.0 %" in t.item(0, 0).toolTip()
    assert ("dlrm_geomean_error", "5.4 %") in tree_texts(d.other)
    prov = dict(tree_texts(d.provenance))
    assert prov["host"] == "bench-7" and prov["cpu_model"] == "AMD EPYC 7B13"
    assert prov["threads"] == "1" and prov["torch"] == "2.13.0+cpu"
    assert "measured on the device" in d.header.text()

    # Remembered in the settings; a second panel lists it too, and Remove forgets it.
    again = ProfilesPanel(settings_in(tmp_path))
    qtbot.addWidget(again)
    assert [i.title for i in again.infos][-1] == "local CPU, 1 thread"
    again.select_profile(cpu)
    again.remove_selected()
    assert len(again.infos) == 2


def test_an_unreadable_profile_is_reported_not_added(qtbot, tmp_path):
    panel = ProfilesPanel(settings_in(tmp_path))
    qtbot.addWidget(panel)
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    with qtbot.waitSignal(panel.sigError) as blocker:
        assert panel.add_profile(bad) is None
    assert "bad.json" in blocker.args[0]
    assert panel.added_paths() == []


# --- in the main window -----------------------------------------------------------------

class RecordingPredict:
    """Records the ``profile`` each call gets (absent: ``"<none>"``)."""

    def __init__(self):
        self.profiles = []

    def __call__(self, scenario, progress=None, cancelled=None, **kwargs):
        chosen = kwargs.get("profile", "<none>")
        self.profiles.append(chosen)
        used = "local CPU, 1 thread" if str(chosen).endswith(".json") else "roofline"
        progress(0.5, "fake")
        tl = synthetic_timeline(steps=2)
        return Prediction(scenario.get("name", ""), "fake", "cpu", tl, tl.span_ms(),
                          [{"rank": 0, "iteration_ms": tl.span_ms(),
                            "device_active_ms": tl.device_active_ms(0)}],
                          len(tl), tl.top_ops(3), [], profile=used)


def idle(w):
    return not w.controller.is_running() and not w.controller.is_pending()


def test_choosing_a_profile_changes_what_predict_receives(make_window, qtbot, tmp_path):
    fake = RecordingPredict()
    w = make_window(predict_fn=fake)
    qtbot.waitUntil(lambda: bool(fake.profiles) and idle(w), timeout=10_000)
    assert fake.profiles[-1] == "<none>"  # automatic: predict picks the bundled profile
    panel = w.profiles.panel
    assert w.tabs.tabText(w.tabs.indexOf(panel)) == "Profiles"

    combo = panel.choice_combo
    combo.setCurrentIndex(combo.findData(ROOFLINE))
    combo.activated.emit(combo.currentIndex())
    qtbot.waitUntil(lambda: fake.profiles[-1] == ROOFLINE and idle(w), timeout=10_000)
    assert w.profiles.label.text() == "profile: datasheet roofline"

    path = write_profile(tmp_path / "cpu.json").resolve()
    panel.add_profile(path)
    panel.use_button.click()
    qtbot.waitUntil(lambda: fake.profiles[-1] == str(path) and idle(w), timeout=10_000)
    assert "local CPU, 1 thread (measured on the device)" in w.profiles.label.text()

    # A view setting: remembered across windows, never written into the scenario.
    assert "profile" not in str(w.editor.document.snapshot().get("platform"))
    fake2 = RecordingPredict()
    w2 = make_window(predict_fn=fake2)
    assert w2.controller.profile == str(path)
    qtbot.waitUntil(lambda: bool(fake2.profiles) and idle(w2), timeout=10_000)
    assert fake2.profiles[-1] == str(path)


class FakeCalibration:
    """Calls ``progress`` every 10 ms for ``steps`` steps, polling ``cancelled``."""

    def __init__(self, steps=15, error=None):
        self.steps, self.error = steps, error
        self.threads = []
        self.started, self.ended = threading.Event(), threading.Event()

    def __call__(self, threads=1, budget_s=600.0, progress=None, cancelled=None):
        self.threads.append(threading.current_thread())
        self.started.set()
        try:
            for k in range(self.steps):
                if cancelled():
                    raise Cancelled("microbenchmarks")
                progress(k / self.steps, f"microbenchmarks ({k})")
                time.sleep(0.01)
            if self.error is not None:
                raise self.error
        finally:
            self.ended.set()
        return DeviceProfile(f"local CPU, {threads} thread", "measured", cpu_spec(threads),
                             provenance=dict(CPU_PROVENANCE, threads=threads,
                                             budget_s=budget_s),
                             validation=CPU_VALIDATION)


def test_calibrate_runs_in_a_worker_saves_and_selects_the_profile(make_window, qtbot,
                                                                   tmp_path):
    fake = FakeCalibration()
    w = make_window(predict_fn=RecordingPredict(), calibrate_fn=fake)
    w.editor.set_platform({"preset": "local-cpu"})
    assert "Calibrate This &Device…" in [a.text() for a in w.menuBar().actions()[2]
                                         .menu().actions()]
    dialog = w.profiles.calibrate_dialog()
    assert dialog.threads.value() == 1 and dialog.budget.value() == 600
    assert dialog.budget.minimum() == 30
    assert dialog.path_edit.text().endswith(os.path.join("profiles", "local-cpu-1t.json"))
    dialog.threads.setValue(2)
    assert dialog.path_edit.text().endswith("local-cpu-2t.json")
    out = tmp_path / "out" / "local-cpu-2t.json"
    dialog.path_edit.setText(str(out))
    seen = []
    dialog.runner.sigProgress.connect(lambda f, s: seen.append((f, s)))
    with qtbot.waitSignal(dialog.sigProfileSaved, timeout=10_000):
        dialog.start_button.click()
        assert not dialog.start_button.isEnabled() and dialog.progress.isVisible()
    assert fake.threads and fake.threads[0] is not threading.main_thread()
    assert seen and "microbenchmarks" in seen[-1][1]
    assert out.exists()
    panel = w.profiles.panel
    assert panel.selected().path == out.resolve()
    assert panel.choice() == str(out.resolve())  # local-cpu platform: predictions use it
    assert w.tabs.currentWidget() is panel
    qtbot.waitUntil(lambda: not dialog.isVisible(), timeout=5_000)
    assert panel.details.classes.rowCount() == 2


def test_gpu_calibration_is_offered_only_with_a_driver_and_asks_for_cuda(
        make_window, qtbot, tmp_path, monkeypatch):
    from explorer.profiles import calibration

    w = make_window(predict_fn=RecordingPredict(), calibrate_fn=FakeCalibration())
    monkeypatch.setattr(calibration, "nvidia_driver_present", lambda: False)
    dialog = calibration.CalibrationDialog(w.profiles.calibrate_dialog().runner)
    qtbot.addWidget(dialog)
    gpu_item = dialog.device.model().item(1)
    assert not gpu_item.isEnabled() and "No NVIDIA driver" in gpu_item.toolTip()

    asked = []

    def fake_gpu(threads=1, budget_s=600.0, progress=None, cancelled=None, device="cpu"):
        asked.append(device)
        progress(0.5, "scenario 1 of 16: random DLRM")
        return DeviceProfile("NVIDIA H200", "measured", cpu_spec(1),
                             provenance={"kind": "measured"})
    monkeypatch.setattr(calibration, "nvidia_driver_present", lambda: True)
    runner = calibration.CalibrationRunner(calibrate_fn=fake_gpu)
    dialog = calibration.CalibrationDialog(runner)
    qtbot.addWidget(dialog)
    assert dialog.device.model().item(1).isEnabled()
    dialog.device.setCurrentIndex(1)
    assert not dialog.threads.isEnabled() and "GPU" in dialog.note.text()
    assert dialog.path_edit.text().endswith("local-gpu.json")
    dialog.path_edit.setText(str(tmp_path / "gpu.json"))
    with qtbot.waitSignal(dialog.sigProfileSaved, timeout=10_000):
        dialog.start_button.click()
    assert asked == ["cuda"] and (tmp_path / "gpu.json").exists()
    runner.shutdown()


def test_cancel_stops_the_calibration_and_saves_nothing(make_window, qtbot, tmp_path):
    fake = FakeCalibration(steps=1000)  # ~10 s unless cancelled
    w = make_window(predict_fn=RecordingPredict(), calibrate_fn=fake)
    dialog = w.profiles.calibrate_dialog()
    out = tmp_path / "never.json"
    dialog.path_edit.setText(str(out))
    dialog.start_button.click()
    qtbot.waitUntil(lambda: "microbenchmarks" in dialog.stage.text(), timeout=5_000)
    t0 = time.monotonic()
    with qtbot.waitSignal(w.profiles.runner.sigCancelled, timeout=3_000):
        dialog.cancel_button.click()
    assert time.monotonic() - t0 < 3
    qtbot.waitUntil(lambda: not w.profiles.runner.is_running(), timeout=3_000)
    assert fake.ended.is_set()
    assert not out.exists()
    assert "cancelled" in dialog.stage.text() and dialog.start_button.isEnabled()
    assert not w.canvas_error.isVisible()
    dialog.cancel_button.click()  # nothing runs now: closes the dialog
    assert not dialog.isVisible()


def test_a_failing_calibration_shows_its_error_and_the_app_stays_usable(make_window, qtbot,
                                                                         tmp_path):
    fake = FakeCalibration(steps=3, error=OSError("perf counters are not readable"))
    w = make_window(predict_fn=RecordingPredict(), calibrate_fn=fake)
    dialog = w.profiles.calibrate_dialog()
    dialog.path_edit.setText(str(tmp_path / "x.json"))
    with qtbot.waitSignal(dialog.sigFailed, timeout=5_000):
        dialog.start_button.click()
    assert w.canvas_error.isVisible()
    assert "perf counters are not readable" in w.canvas_error.text()
    assert dialog.error.isVisible() and dialog.start_button.isEnabled()
    assert not (tmp_path / "x.json").exists()
    qtbot.waitUntil(lambda: not w.profiles.runner.is_running(), timeout=3_000)
    w.predict_now()
    qtbot.waitUntil(lambda: idle(w) and w.prediction is not None, timeout=10_000)


def test_recorded_end_to_end_validation_reads_one_line_per_scenario(qtbot, tmp_path,
                                                                    monkeypatch):
    """What ``validate --record`` stores shows under Other figures: a line per scenario
    with signed errors, and the summary's absolute figures unsigned."""
    rows = [{"scenario": "random LM (2x488, seq 89, batch 8)", "measured_ms": 687.6,
             "predicted_ms": 687.3, "error": -0.0004, "noise": 0.005, "speed": -0.135},
            {"scenario": "random DLRM (3 tables, dim 28, batch 128)", "measured_ms": 11.29,
             "predicted_ms": 10.88, "error": -0.036, "noise": 0.028, "speed": 0.05}]
    e2e = {"date": "2026-11-29", "command": "python -m predictors validate --record",
           "summary": {"dlrm": {"n": 1, "geomean_abs_error": 0.036, "worst_abs_error": 0.036}},
           "rows": rows}
    path = write_profile(tmp_path / "bundled" / "cpu.json",
                         validation={**CPU_VALIDATION, "end_to_end": e2e})
    monkeypatch.setattr(profiles_panel, "bundled_profiles", lambda: [path])
    panel = ProfilesPanel(settings_in(tmp_path))
    qtbot.addWidget(panel)
    panel.select_profile(path)
    texts = dict(tree_texts(panel.details.other))
    line = texts["random DLRM (3 tables, dim 28, batch 128)"]
    assert "error -3.6 %" in line and "speed +5.0 %" in line and "scenario" not in line
    assert "geomean_abs_error 3.6 %" in texts["dlrm"]
    assert not panel.details.classes.isHidden()  # the class table stays beside them


def test_automatic_says_when_the_cpu_profile_is_another_cpus(qtbot, tmp_path, monkeypatch):
    import predictors.hardware.specs as specs
    import predictors.profiles

    def this_cpu(signature):
        # wherever the profiles module reads it from: its own name or the specs module's
        for module in (specs, predictors.profiles):
            monkeypatch.setattr(module, "cpu_signature", lambda: signature, raising=False)

    panel = ProfilesPanel(settings_in(tmp_path))
    qtbot.addWidget(panel)
    this_cpu("GenuineIntel family 6 model 85, sse")
    panel.set_platform({"preset": "local-cpu"})
    assert "another CPU" in panel.resolved.text() and "Calibrate…" in panel.resolved.text()
    this_cpu("AuthenticAMD family 25 model 17, avx512")
    panel.set_platform({"preset": "local-cpu"})
    assert "another CPU" not in panel.resolved.text()
    assert "Zen 4" in panel.resolved.text()
    panel.set_platform({"preset": "a100-1"})   # GPU profiles describe no host CPU
    assert "another CPU" not in panel.resolved.text()
