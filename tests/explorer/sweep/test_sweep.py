"""The Sweep dock: Run ▸ Sweep in a worker, a row per value (errors included), the
throughput chart, Apply Value as one undo step, stale after an edit, bad value lists."""
import os
import threading

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from explorer.sweep import default_values
from explorer.sweep.view import COLUMNS
from predictors.utils.progress import Cancelled


def test_sweeps_batch_sizes_and_applies_one(make_window, qtbot, tmp_path):
    w = make_window()
    view = w.sweep.view
    assert view.param() == "batch_size"
    assert view.values_edit.text() == "128, 256, 512, 1024, 2048"  # around the scenario's 512
    view.values_edit.setText("256, 1024, 4096")
    with qtbot.waitSignal(w.sweep.runner.sigFinished, timeout=240_000):
        w.sweep.run_action.trigger()
        assert view.cancel_button.isVisible() and not view.values_edit.isEnabled()
    assert view.table.rowCount() == 3 and view.table.columnCount() == len(COLUMNS)
    samples = [float(view.table.item(r, 3).text().replace(",", "")) for r in range(3)]
    assert samples == sorted(samples)  # CPU-bound small DLRM: more samples per step
    peaks = [view.table.item(r, COLUMNS.index("Peak memory")).text() for r in range(3)]
    assert all(p.endswith("MB") for p in peaks), peaks   # grows with the batch
    assert float(peaks[0].split()[0]) < float(peaks[2].split()[0])
    assert view.selected() is view.shown.best() and view._items  # the chart is drawn
    view.grab().save(str(tmp_path / "sweep.png"))
    view.table.selectRow(1)
    view.apply_button.click()
    assert w.editor.document.training()["batch_size"] == 1024
    assert "current" in view.table.item(1, 1).text() and not view.stale
    w.editor.undo_stack.undo()
    assert w.editor.document.training()["batch_size"] == 512
    w.editor.set_platform({"preset": "h100-1"})  # the sweep was for the A100
    assert view.stale and not w.sweep.apply(view.shown.rows[0])


def test_a_value_that_cannot_run_is_a_row_not_a_failure(make_window, qtbot):
    w = make_window()
    view = w.sweep.view
    view.param_box.setCurrentIndex(view.param_box.findData("platform"))
    assert "dgx-a100" in view.values_edit.text()  # GPU presets for a GPU scenario
    view.values_edit.setText("a100-1, dgx-b300")
    with qtbot.waitSignal(w.sweep.runner.sigFinished, timeout=240_000):
        w.sweep.run()
    assert view.table.rowCount() == 2
    assert view.table.item(0, 4).text() == "best"
    assert view.table.item(1, 4).text() == "cannot run"
    assert view.footer.isVisible() and "unknown preset 'dgx-b300'" in view.footer.text()
    view.table.selectRow(1)
    assert not view.apply_button.isEnabled()  # nothing to apply


def test_bad_values_are_shown_not_run(make_window):
    w = make_window()
    w.sweep.view.values_edit.setText("256, lots")
    assert w.sweep.run() is None and not w.sweep.runner.is_running()
    assert w.sweep.view.error.isVisible() and "lots" in w.sweep.view.error.text()
    assert "whole number" in w.sweep.view.error.text()


def test_cancel_stops_the_sweep(make_window, qtbot):
    started = threading.Event()

    def slow(snapshot, param, values, progress, cancelled, **kwargs):
        started.set()
        while not cancelled():
            threading.Event().wait(0.01)
        raise Cancelled("sweep")

    w = make_window(sweep_fn=slow)
    w.sweep.run()
    assert started.wait(10)
    with qtbot.waitSignal(w.sweep.runner.sigCancelled, timeout=10_000):
        w.cancel_action.trigger()
    assert w.sweep.view.run_button.isEnabled()


def test_default_values():
    doc = {"training": {"batch_size": 3}, "platform": {"preset": "local-cpu"}}
    assert default_values(doc, "batch_size") == [1, 3, 6, 12]
    assert default_values(doc, "platform") == ["local-cpu"]
    assert default_values({"training": {"batch_size": "x"}}, "batch_size")[2] == 512


def test_apply_uses_the_setting_of_the_rows_on_screen(make_window, qtbot):
    from predictors.plan.sweep import sweep as real_sweep

    def fails_for_dtype(snapshot, param, values, **kwargs):
        if param == "dtype":
            from predictors.scenario.format import Issue, ScenarioError
            raise ScenarioError([Issue("training.dtype", "no")])
        return real_sweep(snapshot, param, values, **kwargs)

    w = make_window(sweep_fn=fails_for_dtype)
    view = w.sweep.view
    view.values_edit.setText("128, 256")
    with qtbot.waitSignal(w.sweep.runner.sigFinished, timeout=240_000):
        w.sweep.run()
    view.param_box.setCurrentIndex(view.param_box.findData("dtype"))
    with qtbot.waitSignal(w.sweep.runner.sigFailed, timeout=60_000):
        w.sweep.run()
    view.param_box.setCurrentIndex(view.param_box.findData("batch_size"))
    assert view.values_edit.text() == "128, 256"  # what was typed comes back
    view.table.selectRow(0)
    assert w.sweep.apply(view.selected())
    training = w.editor.document.training()
    assert training["batch_size"] == 128 and training["dtype"] == "float32"


def test_edit_delete_on_the_platform_tab_deletes_devices(make_window):
    w = make_window()
    w.tabs.setCurrentWidget(w.platform_page)
    blocks = len(w.editor.document.node_ids())
    w.scene.select_nodes(["dense"])
    w.platform_page.scene.devices["cpu"].setSelected(True)
    w.delete_action.trigger()
    assert len(w.editor.document.node_ids()) == blocks
    assert "cpu" not in {n["id"] for n in w.editor.document.platform()["nodes"]}


def test_the_optimizer_can_be_swept_from_the_dock(make_window):
    w = make_window()
    view = w.sweep.view
    view.param_box.setCurrentIndex(view.param_box.findData("optimizer"))
    # every optimizer the scenario format knows
    from predictors.scenario.definition import OPTIMIZERS
    assert view.values_edit.text() == ", ".join(OPTIMIZERS)
    assert view.values_edit.text().startswith("sgd, adam, adamw")
    assert default_values({}, "dtype") == ["float32", "bfloat16", "float16"]


def test_memory_cells_say_when_a_value_does_not_fit():
    from explorer.run.results_dock import memory_text
    assert memory_text(None, None) == "–"
    assert memory_text(9_100_000_000, True) == "9.1 GB"
    assert memory_text(69_500_000_000, False) == "69.5 GB  ✗ too big"


def test_a_sweep_where_nothing_fits_says_so(qtbot):
    from explorer.sweep.view import SweepView
    from predictors.plan.sweep import SweepResult, SweepRow

    view = SweepView()
    qtbot.addWidget(view)
    rows = [SweepRow(v, iteration_ms=ms, records_per_s=v / ms * 1e3, device_active_ms=ms,
                     exposed_comm_ms=0.0, ranks=1, peak_memory_bytes=50_000_000_000 * v // 512,
                     fits=False) for v, ms in ((512, 100.0), (1024, 190.0))]
    result = SweepResult("BERT", "batch_size", rows + [SweepRow(2048, error="too big")])
    view.set_sweep(result)   # no best: must not divide by zero
    gap = COLUMNS.index("vs best")
    assert view.table.item(0, gap).text() == "-5.0 %"   # against the fastest that ran
    assert view.table.item(1, gap).text() == "+0.0 %"
    assert "too big" in view.table.item(0, COLUMNS.index("Peak memory")).text()
    assert "none fits the device's memory" in view.header_text()


def test_up_to_what_fits_finds_the_largest_batch_then_sweeps_to_it(make_window, qtbot):
    from predictors.plan.capacity import largest_batch

    w = make_window()   # the small DLRM on one A100-40GB
    view = w.sweep.view
    assert view.fit_button.isVisible()
    with qtbot.waitSignal(w.sweep.runner.sigFinished, timeout=240_000):
        view.fit_button.click()
    largest = largest_batch(w.editor.document.snapshot()).batch_size
    values = [r.value for r in view.shown.rows]
    assert values[-1] == largest and values == sorted(values) and len(values) == 5
    assert all(r.fits for r in view.shown.rows)
    assert f"{largest:,}" in w.statusBar().currentMessage()
    view.param_box.setCurrentIndex(view.param_box.findData("dtype"))
    assert not view.fit_button.isVisible()   # only batch sizes have a limit to find


def test_up_to_what_fits_says_why_not(make_window, qtbot):
    from predictors.scenario.format import Issue, ScenarioError

    def unknown(snapshot, **kwargs):
        raise ScenarioError([Issue("platform", "the device's memory is unknown")])

    w = make_window()
    w.sweep.fit_fn = unknown
    with qtbot.waitSignal(w.sweep.fit_runner.sigFailed, timeout=60_000):
        w.sweep.view.fit_button.click()
    assert "memory is unknown" in w.sweep.view.error.text()
    assert w.sweep.view.run_button.isEnabled() and not w.sweep.runner.is_running()


def test_an_edit_during_the_search_drops_its_answer(make_window, qtbot):
    import threading

    from predictors.plan.capacity import Capacity

    go = threading.Event()

    def slow_fit(snapshot, **kwargs):
        go.wait(30)
        return Capacity("s", "a100-1", "A100", 40e9, 4096, 39e9, 0, "aten::mm", 4097,
                        41e9, 3)

    w = make_window()
    w.sweep.fit_fn = slow_fit
    before = w.sweep.view.values_edit.text()
    w.sweep.view.fit_button.click()
    training = w.editor.document.training()
    training["optimizer"] = "adamw"   # Adam's moments: the limit found is for the old step
    w.editor.set_training(training)
    with qtbot.waitSignal(w.sweep.fit_runner.sigFinished, timeout=30_000):
        go.set()
    assert "changed" in w.statusBar().currentMessage()
    assert not w.sweep.runner.is_running() and w.sweep.view.values_edit.text() == before


def test_a_sweep_asked_for_during_the_search_replaces_it(make_window, qtbot):
    import threading

    go = threading.Event()
    w = make_window()
    w.sweep.fit_fn = lambda snapshot, **kwargs: go.wait(30)
    w.sweep.view.fit_button.click()
    assert w.sweep.fit_runner.is_running()
    with qtbot.waitSignal(w.sweep.runner.sigFinished, timeout=240_000):
        w.sweep.run_action.trigger()
        assert not w.sweep.fit_runner.is_running()
    go.set()


def test_a_sweep_over_platforms_names_them_on_the_axis(qtbot, tmp_path):
    from explorer.sweep.view import SweepView
    from predictors.plan.sweep import SweepResult, SweepRow

    view = SweepView()
    qtbot.addWidget(view)
    view.resize(1100, 360)
    view.show()
    names = ["dgx-a100", "h100-1", "local-cpu"]
    view.set_sweep(SweepResult("dlrm", "platform", [
        SweepRow(n, 10.0 + i, 1000.0 - 100 * i, 8.0, 0.0, 1, 10**9, True)
        for i, n in enumerate(names)]))
    # a horizontal bar per platform, named on the left axis: long names never collide
    ticks = view.plot.getAxis("left")._tickLevels
    assert [label for _, label in ticks[0]] == names
    assert [y for y, _ in ticks[0]] == [0.0, 1.0, 2.0]
    assert view.plot.getAxis("bottom").labelText == "samples/s"
    assert view.plot.getAxis("left").labelText == "platform"
    view.grab().save(str(tmp_path / "sweep-platforms.png"))
    # batch sizes again: a line over a log axis, named below
    view.set_sweep(SweepResult("dlrm", "batch_size", [
        SweepRow(b, 10.0, 100.0 * b, 8.0, 0.0, 1, 10**9, True) for b in (64, 128)]))
    assert view.plot.getAxis("left")._tickLevels is None
    assert [label for _, label in view.plot.getAxis("bottom")._tickLevels[0]] == ["64", "128"]
    assert view.plot.getAxis("left").labelText == "samples/s"


def test_the_intro_and_the_title_stay_readable_in_the_dark_theme(qtbot):
    from PySide6.QtGui import QColor, QPalette
    from PySide6.QtWidgets import QApplication

    from explorer.sweep.view import SweepView
    from explorer.window import theme
    from predictors.plan.sweep import SweepResult, SweepRow

    def contrast(label) -> int:
        """How far the label's text is from its background, in lightness."""
        pal = label.palette()
        text = pal.color(label.foregroundRole())
        back = pal.color(QPalette.Window)
        a = text.alphaF()   # placeholder text is translucent
        seen = a * text.lightness() + (1 - a) * back.lightness()
        return abs(seen - back.lightness())

    view = SweepView()
    qtbot.addWidget(view)
    view.show()
    assert contrast(view.header) > 90
    view.set_sweep(SweepResult("dlrm", "batch_size", [
        SweepRow(b, 10.0, 100.0 * b, 8.0, 0.0, 1, 10**9, True) for b in (64, 128)]))
    title = view.plot.getPlotItem().titleLabel
    theme.apply_theme(True)
    try:
        QApplication.processEvents()   # the widgets hear of the new palette
        assert contrast(view.header) > 70
        ink = view.palette().color(QPalette.WindowText)
        assert ink.lightness() > 180 and ink.name() in title.item.toHtml()
    finally:
        theme.apply_theme(False)
    QApplication.processEvents()
    assert contrast(view.header) > 90
    assert QColor(view.palette().color(QPalette.WindowText)).name() in title.item.toHtml()
