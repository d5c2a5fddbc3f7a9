"""The main window: opens the default scenario, shows the prediction, reports errors, saves."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import json
import threading
import time

from PySide6.QtCore import Qt

from explorer.window import DEFAULT_SCENARIO
from predictors.scenario.format import load_scenario
from predictors.utils.progress import Cancelled


def wait_for_timeline(qtbot, w, timeout=120_000):
    qtbot.waitUntil(lambda: w.gantt.timeline is not None and not w.controller.is_running()
                    and not w.controller.is_pending(), timeout=timeout)


def test_opens_the_default_scenario_and_shows_its_prediction(make_window, qtbot, tmp_path):
    w = make_window()
    assert w.path == DEFAULT_SCENARIO.resolve()
    assert w.windowTitle().startswith("small_dlrm.json — ")
    assert w.editor.document.snapshot()["name"] == "Small DLRM (8 tables)"
    wait_for_timeline(qtbot, w)
    assert len(w.gantt.timeline) > 0 and w.gantt._bars
    assert w.summary.iteration.value.text().endswith(" ms")
    assert w.summary.table.rowCount() == len(w.prediction.top_ops) > 0
    assert not w.canvas_error.isVisible()
    assert not w.gantt.is_stale()
    assert w.grab().save(str(tmp_path / "main.png"))


def test_menus_and_shortcuts(make_window):
    w = make_window("")
    menus = {a.text().replace("&", ""): a.menu() for a in w.menuBar().actions()}
    assert list(menus) == ["File", "Edit", "Run", "View", "Help"]
    texts = lambda m: [a.text().replace("&", "") for a in m.actions() if not a.isSeparator()]
    assert texts(menus["File"]) == ["New", "New from Template", "Open…", "Open Recent", "Save",
                                    "Save As…",
                                    "Import Trace…", "Export Timeline Image…",
                                    "Export Visible Range Image…", "Export Chrome Trace…", "Export Report…",
                                    "Export Recorded Chrome Trace…",
                                    "Quit"]
    assert {"Undo", "Redo", "Delete", "Select All"} <= {t.split(" ")[0] if t.startswith(
        ("Undo", "Redo")) else t for t in texts(menus["Edit"])}
    assert texts(menus["Run"]) == ["Predict", "Cancel", "Calibrate This Device…",
                                   "Device Profiles", "Rank Shardings", "Sweep"]
    assert "Reset Layout" in texts(menus["View"]) and "Timeline" in texts(menus["View"])
    assert {"Sharding", "Sweep"} <= set(texts(menus["View"]))
    assert not w.save_action.shortcut().isEmpty() and not w.undo_action.shortcut().isEmpty()


def test_edit_marks_title_and_greys_results_until_the_new_one_lands(make_window, qtbot):
    w = make_window()
    wait_for_timeline(qtbot, w)
    first = w.prediction
    w.editor.set_platform({"preset": "h100-1"})
    assert w.windowTitle().startswith("small_dlrm.json*")
    assert w.gantt.is_stale() and w.summary.property("stale")
    qtbot.waitUntil(lambda: w.prediction is not first and not w.gantt.is_stale(), timeout=120_000)
    assert w.prediction.platform == "h100-1"
    assert "h100-1" in w.platform_label.text()
    w.editor.undo_stack.undo()
    assert w.editor.document.platform() == {"preset": "a100-1"}
    assert w.windowTitle().startswith("small_dlrm.json — ")


def test_platform_tab_changes_the_platform_undoably(make_window):
    w = make_window()
    page = w.platform_page
    page.combo.setCurrentIndex(page.combo.findData("dgx-h100"))
    assert w.editor.document.platform() == {"preset": "dgx-h100"}
    assert "DGX H100" in page.description.text()
    w.editor.undo_stack.undo()
    assert page.combo.currentData() == "a100-1"


def test_failed_prediction_shows_the_field_and_keeps_the_document(make_window, qtbot):
    from predictors.scenario.format import Issue, ScenarioError

    def failing(scenario, progress=None, cancelled=None):
        raise ScenarioError([Issue("model.nodes[1].params.layers", "must not be empty",
                                   "bottom_mlp")])

    w = make_window(predict_fn=failing)
    before = w.editor.document.snapshot()
    qtbot.waitUntil(lambda: w.canvas_error.isVisible(), timeout=10_000)
    assert "model.nodes[1].params.layers" in w.canvas_error.text()
    assert w.timeline_error.isVisible() and w.timeline_error.node_id == "bottom_mlp"
    assert w.editor.document.snapshot() == before
    w.timeline_error.sigNodeClicked.emit("bottom_mlp")
    assert w.scene.selected_node_ids() == ["bottom_mlp"]


def test_real_invalid_edit_reports_the_field(make_window, qtbot):
    w = make_window()
    wait_for_timeline(qtbot, w)
    params = dict(w.editor.document.node("bottom_mlp")["params"], layers=[])
    w.editor.set_params("bottom_mlp", params)
    qtbot.waitUntil(lambda: w.canvas_error.isVisible(), timeout=60_000)
    assert "layers" in w.canvas_error.text()
    assert w.gantt.is_stale()  # the old result stays, greyed
    assert w.editor.document.node("bottom_mlp")["params"]["layers"] == []
    w.editor.undo_stack.undo()
    qtbot.waitUntil(lambda: not w.canvas_error.isVisible() and not w.gantt.is_stale(),
                    timeout=120_000)


def test_cancel_from_the_status_bar(make_window, qtbot):
    started = threading.Event()

    def slow(scenario, progress=None, cancelled=None):
        started.set()
        for _ in range(3000):
            if cancelled():
                raise Cancelled("slow")
            progress(0.5, "simulating")
            time.sleep(0.01)
        raise AssertionError("not cancelled")

    w = make_window(predict_fn=slow)
    qtbot.waitUntil(lambda: w.cancel_button.isVisible(), timeout=10_000)
    qtbot.waitUntil(lambda: "simulating" in w.stage_label.text(), timeout=10_000)
    assert w.progress.value() == 500
    w.cancel_button.click()
    assert not w.cancel_button.isVisible() and not w.progress.isVisible()
    assert "cancelled" in w.stage_label.text()
    assert w.controller.shutdown(5000)


def test_open_bad_file_keeps_the_current_document(make_window, tmp_path, qtbot):
    w = make_window()
    before = w.editor.document.snapshot()
    for name, text, fragment in [("broken.json", "{not json", "not valid JSON"),
                                 ("other.json", '{"format": "something-else"}', "format"),
                                 ("future.json", json.dumps(dict(
                                     json.loads(DEFAULT_SCENARIO.read_text()), version=99)),
                                  "newer than this program")]:
        (tmp_path / name).write_text(text)
        assert not w.open_path(tmp_path / name)
        assert fragment in w.canvas_error.text() and w.canvas_error.isVisible()
        assert w.editor.document.snapshot() == before
        assert w.path == DEFAULT_SCENARIO.resolve()
        assert w.windowTitle().startswith("small_dlrm.json")
    qtbot.mouseClick(w.canvas_error, Qt.LeftButton)  # a file error: a click dismisses it
    assert not w.canvas_error.isVisible() and not w.timeline_error.isVisible()


def test_an_unfinished_design_reopens_with_its_problems(make_window, tmp_path):
    w = make_window("")
    w.editor.add_block("mlp", (0.0, 0.0))  # no input, no loss: not predictable yet
    path = tmp_path / "unfinished.json"
    assert w.save_to(path)
    other = make_window()
    assert other.open_path(path)
    assert other.path == path.resolve()
    assert [n["kind"] for n in other.editor.document.snapshot()["model"]["nodes"]] == ["mlp"]
    assert "problem(s) to fix" in other.canvas_error.text() and "no loss" in \
        other.canvas_error.text()


def test_bad_layout_entries_are_laid_out_afresh(make_window, tmp_path):
    doc = json.loads(DEFAULT_SCENARIO.read_text())
    doc["layout"] = {"model": {"dense": [None, 1], "loss": ["a", "b"], "top_mlp": [1e999, 0]}}
    path = tmp_path / "odd_layout.json"
    path.write_text(json.dumps(doc).replace("Infinity", "1e999"))
    w = make_window()
    assert w.open_path(path) and w.path == path.resolve()
    pos = w.editor.document.snapshot()["layout"]["model"]
    assert all(all(isinstance(c, float) for c in pos[k]) for k in ("dense", "loss", "top_mlp"))


def test_new_starts_from_a_template_not_an_invalid_blank(make_window):
    """File > New opens a copy of the bundled small DLRM, untitled and valid; New from
    Template lists every bundled scenario and a blank canvas."""
    w = make_window("")
    w.new_scenario()
    doc = w.editor.document.snapshot()
    assert w.path is None and doc["name"] == "Small DLRM (8 tables) (copy)"
    assert not w.canvas_error.isVisible()
    entries = [a.text() for a in w.template_menu.actions() if not a.isSeparator()]
    assert "Small DLRM (8 tables)" in entries and entries[-1] == "Blank Canvas"
    assert len(entries) == len(list(DEFAULT_SCENARIO.parent.glob("*.json"))) + 1
    w.template_menu.actions()[-1].trigger()  # the blank canvas
    assert w.editor.document.snapshot()["model"]["nodes"] == []


def test_new_scenario_drops_the_previous_results(make_window, qtbot):
    w = make_window()
    wait_for_timeline(qtbot, w)
    w.new_scenario()
    assert w.prediction is None and w.gantt.timeline is None
    assert w.summary.iteration.value.text() in ("-", "–", "—", "")


def test_a_prediction_that_blames_a_table_outlines_its_block(make_window, qtbot):
    w = make_window()
    wait_for_timeline(qtbot, w)
    tables = next(n for n in w.editor.document.snapshot()["model"]["nodes"]
                  if n["kind"] == "embedding_tables")
    params = json.loads(json.dumps(tables["params"]))
    params["tables"][0]["rows"] = 10 ** 11  # 6.4 TB: more than the a100-1's 40 GB
    w.editor.set_params(tables["id"], params)
    qtbot.waitUntil(lambda: w.canvas_error.isVisible(), timeout=60_000)
    assert "more than the 40 GB" in w.canvas_error.text()
    assert w.canvas_error.node_id == tables["id"]
    assert any("40 GB" in m for m in w.scene._blocks[tables["id"]].issues)


def test_save_is_atomic_and_keeps_the_layout(make_window, tmp_path, qtbot):
    w = make_window()
    w.editor.move(["loss"], [(400.0, 700.0)])
    assert w.windowTitle().startswith("small_dlrm.json*")
    out = tmp_path / "saved.json"
    assert w.save_to(out)
    assert w.windowTitle().startswith("saved.json — ")
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".json") == ["saved.json"]
    saved = load_scenario(out)
    assert saved["layout"]["model"]["loss"] == [400.0, 700.0]
    assert saved["model"] == w.editor.document.snapshot()["model"]
    assert str(out.resolve()) == w.recent_files()[0]
    w2 = make_window(out)
    assert w2.editor.document.position("loss") == (400.0, 700.0)


def test_exports_from_the_window(make_window, qtbot, tmp_path):
    w = make_window()
    wait_for_timeline(qtbot, w)
    png = w.export_timeline(tmp_path / "t.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
    w.prediction.timeline.save_chrome_trace(tmp_path / "t.json")
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]


def test_reset_layout_shows_every_dock(make_window):
    w = make_window("")
    w.summary_dock.hide()
    w.reset_layout()
    assert w.summary_dock.isVisible() and w.timeline_dock.isVisible()


def test_cut_copy_paste_blocks_with_their_edges(make_window):
    w = make_window()
    doc = w.editor.document
    before = doc.snapshot()
    w.scene.select_nodes(["bottom_mlp", "interaction"])  # joined by one edge
    assert w.copy_blocks()
    steps = w.editor.undo_stack.count()
    new = w.paste_blocks()
    assert len(new) == 2 and w.editor.undo_stack.count() == steps + 1  # one undo step
    kinds = {doc.node(i)["kind"] for i in new}
    assert kinds == {"mlp", "interaction"} and not set(new) & set(before_ids(before))
    assert doc.node(new[0])["params"] == doc.node("bottom_mlp")["params"]
    assert doc.has_edge(new[0], new[1])  # the edge between them came along, not the others
    assert sorted(w.scene.selected_node_ids()) == sorted(new)
    x0, y0 = doc.position("bottom_mlp")
    assert doc.position(new[0]) == (x0 + 40.0, y0 + 40.0)
    w.editor.undo_stack.undo()
    assert doc.snapshot() == before
    w.scene.select_nodes(["loss"])
    assert w.cut_blocks() and not doc.has_node("loss")
    pasted = w.paste_blocks()
    assert [doc.node(i)["kind"] for i in pasted] == ["loss"]
    # Text that is not a fragment pastes nothing and says so
    from PySide6.QtGui import QGuiApplication
    QGuiApplication.clipboard().setText("hello")
    assert w.paste_blocks() == []
    assert "no blocks to paste" in w.statusBar().currentMessage()
    menu = {a.text().replace("&", "") for a in w.menuBar().actions()[1].menu().actions()}
    assert {"Cut", "Copy", "Paste"} <= menu


def before_ids(doc):
    return [n["id"] for n in doc["model"]["nodes"]]


def test_status_messages_do_not_cover_the_prediction_status(make_window, qtbot):
    w = make_window()
    wait_for_timeline(qtbot, w)
    w.statusBar().showMessage("Loaded 837 events from 1 trace file(s)", 5000)
    qtbot.wait(20)
    # the stage text sits right of the message area, not under the message
    assert w.run_status.isVisible() and w.stage_label.text().startswith("Iteration")
    assert w.run_status.geometry().left() > w.statusBar().width() // 3


def test_file_menu_exports_the_visible_range_titled_with_scenario_platform_profile(
        make_window, qtbot, tmp_path, monkeypatch):
    w = make_window()
    wait_for_timeline(qtbot, w)
    p = w.prediction
    title = w.export_title()
    assert p.scenario_name in title and p.platform in title and "profile" in title
    file_menu = w.menuBar().actions()[0].menu()
    texts = [a.text() for a in file_menu.actions()]
    assert "Export &Visible Range Image…" in texts
    end = p.timeline.end_us / 1e3
    w.gantt.vb.setXRange(0.0, end / 4, padding=0)
    target = tmp_path / "visible.svg"
    monkeypatch.setattr("explorer.window.main_window.QFileDialog.getSaveFileName",
                        lambda *a, **k: (str(target), "SVG drawing (*.svg)"))
    w.export_visible_action.trigger()
    svg = target.read_text()
    assert "ms shown" in svg and "iteration span" not in svg   # the visible range only
    assert p.scenario_name in svg and p.platform in svg and "profile: " in svg


def test_a_platform_error_leads_to_the_platform_tab_and_its_fault(make_window, qtbot):
    """A GPU drawn without a link: the error bar names it, and a click on it opens the
    Platform tab with that GPU selected."""
    from explorer.window.main_window import PLATFORM_FAULT
    from predictors.hardware.platforms import preset_graph

    w = make_window()
    wait_for_timeline(qtbot, w)
    graph = preset_graph("dgx-h100")
    graph["nodes"].append({"id": "gpu8", "kind": "gpu", "params": {"model": "h100"}})
    w.editor.set_platform(graph)
    qtbot.waitUntil(lambda: w.canvas_error.isVisible(), timeout=60_000)
    assert "gpu8 has no link" in w.canvas_error.text()
    assert w.canvas_error.node_id == PLATFORM_FAULT
    w.canvas_error.sigNodeClicked.emit(w.canvas_error.node_id)
    assert w.tabs.currentWidget() is w.platform_page
    [chosen] = w.platform_page.scene.selectedItems()
    assert chosen.node_id == "gpu8"
    w.editor.undo_stack.undo()
    qtbot.waitUntil(lambda: not w.canvas_error.isVisible(), timeout=120_000)
