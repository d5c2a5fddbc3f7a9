"""The platform canvas: presets drawn as their graphs, devices dragged in, links drawn
with a Shift-drag, kinds and models edited, every change one undo step."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt
from PySide6.QtGui import QDropEvent
from PySide6.QtTest import QTest

from explorer.document.editor import DocumentEditor
from explorer.platform import PlatformPage, default_link
from explorer.platform.scene import DEVICE_KINDS, DEVICE_MIME, DeviceItem, LinkItem
from predictors.hardware.platforms import resolve_platform
from predictors.scenario.format import ScenarioError, validate_platform


@pytest.fixture
def page(qtbot, default_scenario):
    editor = DocumentEditor()
    doc = dict(default_scenario, platform={"preset": "dgx-a100"})
    editor.load(doc)
    p = PlatformPage(editor)
    qtbot.addWidget(p)
    p.resize(1200, 700)
    p.show()
    p.view.fit_all()
    return p


def kinds(page):
    return sorted(i.kind for i in page.scene.items() if isinstance(i, DeviceItem))


def test_a_preset_is_drawn_as_its_graph(page, tmp_path):
    assert kinds(page).count("gpu") == 8 and "nvswitch" in kinds(page)
    links = [i for i in page.scene.items() if isinstance(i, LinkItem)]
    assert sorted({l.kind for l in links}) == ["nic200", "nvlink3"]
    assert "NVLink3, 300 GB/s" in page.description.text()
    page.grab().save(str(tmp_path / "platform.png"))


def test_adding_a_device_makes_the_preset_custom_in_one_undo_step(page):
    editor = page.editor
    page.buttons[0].click()  # GPU
    platform = editor.document.platform()
    assert "nodes" in platform and kinds(page).count("gpu") == 9
    p = resolve_platform(platform)
    assert p.gpus == 9 and p.device == "NVIDIA A100-SXM4-40GB"
    # not linked yet: the line names it until it is
    new = [n["id"] for n in platform["nodes"] if n["kind"] == "gpu"][-1]
    assert f"{new} has no link to the other GPUs" in page.description.text()
    with pytest.raises(ScenarioError, match=f"{new} has no link"):
        validate_platform(platform)
    editor.undo_stack.undo()
    assert editor.document.platform() == {"preset": "dgx-a100"}


def test_a_device_dropped_on_the_canvas_lands_there(page):
    mime = QMimeData()
    mime.setData(DEVICE_MIME, b"nic")
    target = QPoint(300, 300)
    event = QDropEvent(QPointF(target), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    page.view.dropEvent(event)
    where = page.editor.document.platform_positions()
    scene_pos = page.view.mapToScene(target)
    nic = next(k for k in where if k.startswith("nic") and k != "nic")
    assert where[nic] == pytest.approx([scene_pos.x(), scene_pos.y()])


def test_shift_drag_links_two_devices_with_a_default_kind(page):
    page.editor.set_platform({"nodes": [{"id": "g0", "kind": "gpu", "params": {"model": "h100"}},
                                        {"id": "g1", "kind": "gpu", "params": {"model": "h100"}}],
                              "edges": []}, {"g0": [0, 0], "g1": [400, 0]})
    page.view.resetTransform()
    page.view.centerOn(200, 0)
    a = page.view.mapFromScene(QPointF(0, 0))
    b = page.view.mapFromScene(QPointF(400, 0))
    QTest.mousePress(page.view.viewport(), Qt.LeftButton, Qt.ShiftModifier, a)
    QTest.mouseMove(page.view.viewport(), b)
    QTest.mouseRelease(page.view.viewport(), Qt.LeftButton, Qt.ShiftModifier, b)
    edges = page.editor.document.platform()["edges"]
    assert edges == [{"source": "g0", "target": "g1", "kind": "nvlink4"}]
    assert resolve_platform(page.editor.document.platform()).intra_link == "nvlink4"
    # the link's kind is edited from the selection bar
    link = next(i for i in page.scene.items() if isinstance(i, LinkItem))
    link.setSelected(True)
    assert page.link_kind.isVisible()
    page.link_kind.setCurrentIndex(page.link_kind.findData("pcie5"))
    page.link_kind.activated.emit(page.link_kind.currentIndex())
    assert page.editor.document.platform()["edges"][0]["kind"] == "pcie5"


def test_gpu_model_applies_to_every_gpu_and_delete_removes_links(page):
    gpu = page.scene.devices["gpu0"]
    gpu.setSelected(True)
    assert page.gpu_model.isVisible()
    page.gpu_model.setCurrentIndex(page.gpu_model.findData("h100"))
    page.gpu_model.activated.emit(page.gpu_model.currentIndex())
    platform = page.editor.document.platform()
    models = {n["params"]["model"] for n in platform["nodes"] if n["kind"] == "gpu"}
    assert models == {"h100"}
    assert resolve_platform(platform).device == "NVIDIA H100 80GB HBM3"
    page.scene.clearSelection()
    page.scene.devices["nvswitch"].setSelected(True)
    assert page.scene.delete_selected()
    platform = page.editor.document.platform()
    assert not any(e["kind"].startswith("nvlink") for e in platform["edges"])
    assert "gpu0 has no link to the other GPUs" in page.description.text()


def test_moving_a_device_keeps_the_preset(page):
    item = page.scene.devices["gpu3"]
    before = QPointF(item.pos())
    start = page.view.mapFromScene(item.pos())
    end = start + QPoint(40, 60)
    delta = page.view.mapToScene(end) - page.view.mapToScene(start)
    QTest.mousePress(page.view.viewport(), Qt.LeftButton, Qt.NoModifier, start)
    QTest.mouseMove(page.view.viewport(), end)
    QTest.mouseRelease(page.view.viewport(), Qt.LeftButton, Qt.NoModifier, end)
    assert page.editor.document.platform() == {"preset": "dgx-a100"}
    moved = page.editor.document.platform_positions()["gpu3"]
    assert moved == pytest.approx([before.x() + delta.x(), before.y() + delta.y()], abs=8)  # drag threshold
    assert page.editor.undo_stack.undoText() == "Move devices"


def test_default_links_and_one_gpu_model():
    assert default_link("gpu", "nvswitch", "a100") == "nvlink3"
    assert default_link("gpu", "pcie_switch", "a100") == "pcie4"
    assert default_link("nic", "node", "h100") == "nic400"
    with pytest.raises(ScenarioError, match="one GPU model"):
        validate_platform({"nodes": [{"id": "a", "kind": "gpu", "params": {"model": "a100"}},
                                     {"id": "b", "kind": "gpu", "params": {"model": "h100"}}]})


def test_an_undo_in_the_middle_of_a_link_drag_does_not_crash(page):
    page.buttons[0].click()  # something to undo
    page.view.resetTransform()
    gpu = page.scene.devices["gpu0"]
    page.view.centerOn(gpu)
    a = page.view.mapFromScene(gpu.pos())
    QTest.mousePress(page.view.viewport(), Qt.LeftButton, Qt.ShiftModifier, a)
    QTest.mouseMove(page.view.viewport(), a + QPoint(60, 0))
    page.editor.undo_stack.undo()  # rebuilds the scene under the gesture
    QTest.mouseMove(page.view.viewport(), a + QPoint(90, 10))
    QTest.mouseRelease(page.view.viewport(), Qt.LeftButton, Qt.ShiftModifier,
                       a + QPoint(90, 10))
    assert page.editor.document.platform() == {"preset": "dgx-a100"}


def test_odd_entries_of_a_custom_graph_are_skipped_not_raised(qtbot, default_scenario):
    editor = DocumentEditor()
    doc = dict(default_scenario, platform={
        "nodes": [{"id": "g0", "kind": "gpu", "params": 5}, "junk", {"id": [1], "kind": "gpu"},
                  {"kind": "cpu"}, {"id": "g1", "kind": "gpu"}],
        "edges": ["x", {"source": "g0", "target": "g1", "kind": 7},
                  {"source": "g0", "target": "g1", "kind": "nvlink3"}]})
    editor.load(doc)  # as an unfinished file opens
    page = PlatformPage(editor)
    qtbot.addWidget(page)
    assert sorted(page.scene.devices) == ["g0", "g1"] and len(page.scene.links) == 1
    page.scene.devices["g0"].setSelected(True)  # the selection bar copes too
    assert "⚠" in page.description.text()
    page.grab()


def test_edits_that_change_nothing_keep_the_preset(page):
    page.scene.devices["gpu0"].setSelected(True)
    page.gpu_model.activated.emit(page.gpu_model.currentIndex())  # the same model again
    assert page.editor.document.platform() == {"preset": "dgx-a100"}
    assert not page.editor.undo_stack.canUndo()


def test_a_new_gpu_model_brings_its_nvlink_generation(page):
    page.scene.set_device_params("gpu0", {"model": "h100"}, all_gpus=True)
    kinds_ = {e["kind"] for e in page.editor.document.platform()["edges"]}
    assert "nvlink4" in kinds_ and "nvlink3" not in kinds_


def test_a_gpu_without_nvlink_turns_the_nvswitch_into_a_pcie_switch(page, qtbot):
    with qtbot.waitSignal(page.editor.sigMessage) as said:
        page.scene.set_device_params("gpu0", {"model": "l4"}, all_gpus=True)
    assert "no NVLink" in said.args[0] and "nvswitch" in said.args[0]
    platform = page.editor.document.platform()
    assert "nvswitch" not in {n["kind"] for n in platform["nodes"]}
    assert {e["kind"] for e in platform["edges"]} == {"pcie4", "nic200"}
    assert "⚠" not in page.description.text() and "L4" in page.description.text()
    page.editor.undo_stack.undo()                       # one edit, undone whole
    assert page.editor.document.platform() == {"preset": "dgx-a100"}


def test_another_preset_drops_the_old_positions(page):
    page.editor.set_platform({"preset": "dgx-a100"}, {"gpu0": [900.0, 900.0]}, "Move")
    assert page.editor.document.platform_positions() == {"gpu0": [900.0, 900.0]}
    assert page.scene.devices["gpu0"].pos() == QPointF(900.0, 900.0)
    page.editor.set_platform({"preset": "dgx-h100"})  # as the Inspector or a sweep does
    assert page.editor.document.platform_positions() == {}
    assert page.scene.devices["gpu0"].pos() != QPointF(900.0, 900.0)  # laid out afresh


def test_gpus_without_nvlink_default_to_pcie_links():
    from explorer.platform.scene import default_link

    assert default_link("gpu", "gpu", "l4") == "pcie4"
    assert default_link("gpu", "nvswitch", "l40s") == "pcie4"
    assert default_link("gpu", "gpu", "a100") == "nvlink3"
    assert default_link("nic", "nic", "l4") == "nic400"


def test_the_preset_box_shows_its_whole_text(page, tmp_path):
    from PySide6.QtWidgets import QStyle, QStyleOptionComboBox

    page.buttons[0].click()  # a custom graph now: the box's longest entry
    combo = page.combo
    assert combo.currentText() == PlatformPage.CUSTOM

    def room() -> int:
        opt = QStyleOptionComboBox()
        combo.initStyleOption(opt)
        return combo.style().subControlRect(QStyle.CC_ComboBox, opt,
                                            QStyle.SC_ComboBoxEditField, combo).width()

    need = combo.fontMetrics().horizontalAdvance(PlatformPage.CUSTOM)
    page.layout().activate()
    assert room() >= need, (room(), need)
    assert PlatformPage.CUSTOM in combo.toolTip()
    page.grab().save(str(tmp_path / "platform-custom.png"))


@pytest.mark.parametrize("index", range(6))
def test_an_added_device_lands_in_sight_beside_the_others(page, index):
    from explorer.platform.scene import DEVICE_KINDS

    view = page.view
    view.resetTransform()  # zoomed in on the middle of the preset, as after a look around
    view.scale(1.4, 1.4)
    view.centerOn(page.scene.devices["gpu3"])
    before = set(page.scene.devices)
    kind = list(DEVICE_KINDS)[index]
    assert page.buttons[index].kind == kind
    page.buttons[index].click()
    (new,) = set(page.scene.devices) - before
    item = page.scene.devices[new]
    visible = view.mapToScene(view.viewport().rect()).boundingRect()
    assert visible.contains(item.sceneBoundingRect()), (kind, item.pos(), visible)
    others = [d.sceneBoundingRect() for n, d in page.scene.devices.items() if n != new]
    assert not any(item.sceneBoundingRect().intersects(r) for r in others)


def test_a_link_its_ends_cannot_take_is_named_on_the_summary_line(page, tmp_path):
    """NVLink from a GPU to the NIC: the summary line names the link and why, and fixing
    its kind clears it."""
    page.resize(900, 560)
    assert page.scene.link("gpu0", "nic", "nvlink3")
    text = page.description.text()
    assert text.startswith("⚠") and "NVLink3 link gpu0–nic" in text and "not a nic" in text
    page.grab().save(str(tmp_path / "bad-link.png"))
    index = next(i for i, e in enumerate(page.editor.document.platform()["edges"])
                 if {e["source"], e["target"]} == {"gpu0", "nic"})
    # a click on the line selects that link
    QTest.mouseClick(page.description, Qt.LeftButton)
    [chosen] = page.scene.selectedItems()
    assert isinstance(chosen, LinkItem) and chosen.index == index
    assert page.selection_label.text() == "Link kind"
    assert page.scene.set_link_kind(index, "pcie4")
    assert "⚠" not in page.description.text()
    page.editor.undo_stack.undo()
    page.editor.undo_stack.undo()
    assert page.editor.document.platform() == {"preset": "dgx-a100"}


def test_a_click_on_the_line_selects_the_host_without_gpus(page):
    page.buttons[list(DEVICE_KINDS).index("node")].click()
    platform = page.editor.document.platform()
    host = [n["id"] for n in platform["nodes"] if n["kind"] == "node"][-1]
    assert f"host '{host}' has no GPUs" in page.description.text()
    assert page.show_fault()
    [chosen] = page.scene.selectedItems()
    assert isinstance(chosen, DeviceItem) and chosen.node_id == host
    page.editor.undo_stack.undo()
    assert not page.show_fault()      # nothing at fault: nothing to select
