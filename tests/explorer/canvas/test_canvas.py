"""The model canvas follows the document, and its gestures become editor commands."""
import pytest
from PySide6.QtCore import QEvent, QMimeData, QPoint, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QMouseEvent, QWheelEvent
from PySide6.QtWidgets import QApplication

from explorer.canvas.model_scene import BLOCK_MIME_TYPE, ModelScene, ModelView
from explorer.canvas.palette import BlockPalette
from explorer.document.scenario_document import empty_scenario
from predictors.scenario.registry import BLOCK_KINDS


@pytest.fixture
def canvas(qtbot, editor):
    scene = ModelScene(editor)
    view = ModelView(scene)
    qtbot.addWidget(view)
    view.resize(900, 700)
    view.show()
    qtbot.waitExposed(view)
    view.fit_all()
    return scene, view


def mouse(view, kind, scene_pt, button=Qt.LeftButton, buttons=None, local=None):
    """Send a mouse event at a scene point to the view's viewport, as a user would."""
    local = QPointF(view.mapFromScene(scene_pt)) if local is None else QPointF(local)
    if buttons is None:
        buttons = Qt.NoButton if kind == QEvent.MouseButtonRelease else button
    event = QMouseEvent(kind, local, QPointF(view.viewport().mapToGlobal(local.toPoint())),
                        button if kind != QEvent.MouseMove else Qt.NoButton, buttons,
                        Qt.NoModifier)
    QApplication.sendEvent(view.viewport(), event)


def drag(view, start, end, button=Qt.LeftButton):
    mouse(view, QEvent.MouseButtonPress, start, button)
    mid = (start + end) / 2
    mouse(view, QEvent.MouseMove, mid, button, button)
    mouse(view, QEvent.MouseMove, end, button, button)
    mouse(view, QEvent.MouseButtonRelease, end, button)


def drop(view, mime: QMimeData, at: QPoint):
    enter = QDragEnterEvent(at, Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    view.dragEnterEvent(enter)
    event = QDropEvent(QPointF(at), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    view.dropEvent(event)
    return enter, event


def test_scene_mirrors_document(canvas):
    scene, _ = canvas
    assert sorted(i.node_id for i in scene.block_items()) == sorted(
        scene.document.node_ids())
    assert len(scene.edge_items()) == 5
    assert scene.block_item("dense").input_port is None
    assert scene.block_item("loss").output_port is None
    assert scene.block_item("interaction").input_port is not None
    assert scene.block_item("bottom_mlp").summary == "MLP 128-64-16"
    assert scene.block_item("tables").pos() == QPointF(260, 60)


def test_drop_from_palette_adds_block_undo_redo(qtbot, canvas):
    scene, view = canvas
    palette = BlockPalette()
    qtbot.addWidget(palette)
    mime = palette.mime_data("transformer_layer")
    assert bytes(mime.data(BLOCK_MIME_TYPE)) == b"transformer_layer"
    at = QPoint(450, 600)
    enter, event = drop(view, mime, at)
    assert enter.isAccepted() and event.isAccepted()
    doc = scene.document
    assert "transformer_layer" in doc.node_ids()
    expected = view.mapToScene(at)
    assert doc.position("transformer_layer") == (expected.x(), expected.y())
    assert scene.block_item("transformer_layer").pos() == expected
    scene.editor.undo_stack.undo()
    assert "transformer_layer" not in doc.node_ids()
    assert scene.block_item("transformer_layer") is None
    scene.editor.undo_stack.redo()
    assert scene.block_item("transformer_layer").pos() == expected


def test_drop_of_other_mime_is_ignored(canvas):
    scene, view = canvas
    mime = QMimeData()
    mime.setText("mlp")
    enter, _ = drop(view, mime, QPoint(100, 100))
    assert not enter.isAccepted()
    assert len(scene.document.node_ids()) == 6


def test_port_drag_connects(qtbot, canvas):
    scene, view = canvas
    editor = scene.editor
    editor.delete_edge("top_mlp", "loss")
    assert scene.edge_item("top_mlp", "loss") is None
    start = scene.block_item("top_mlp").output_port.scenePos()
    end = scene.block_item("loss").input_port.scenePos()
    drag(view, start, end)
    assert scene.document.has_edge("top_mlp", "loss")
    assert scene.edge_item("top_mlp", "loss") is not None
    assert scene.block_item("top_mlp").pos() == QPointF(130, 360)  # the block did not move
    assert not scene.block_item("loss").issues


def test_port_drag_backwards_and_onto_body(canvas):
    scene, view = canvas
    scene.editor.delete_edge("top_mlp", "loss")
    # From the loss's input port onto the body of top_mlp: the edge still goes top_mlp -> loss.
    drag(view, scene.block_item("loss").input_port.scenePos(),
         scene.block_item("top_mlp").scenePos())
    assert scene.document.has_edge("top_mlp", "loss")


def test_port_drag_cycle_refused(qtbot, canvas):
    scene, view = canvas
    messages = []
    scene.editor.sigMessage.connect(messages.append)
    drag(view, scene.block_item("top_mlp").output_port.scenePos(),
         scene.block_item("interaction").input_port.scenePos())
    assert not scene.document.has_edge("top_mlp", "interaction")
    assert messages and "cycle" in messages[0]
    assert scene.editor.undo_stack.count() == 0
    assert not [i for i in scene.items() if type(i).__name__ == "QGraphicsPathItem"]


def test_drag_block_moves_once_with_undo(canvas):
    scene, view = canvas
    item = scene.block_item("loss")
    start = item.scenePos() + QPointF(-40, 5)  # on the body, away from the ports
    drag(view, start, start + QPointF(60, 40))
    doc = scene.document
    assert doc.position("loss") == (190.0, 520.0)  # rounded to whole units
    assert scene.editor.undo_stack.count() == 1
    edge = scene.edge_item("top_mlp", "loss")
    assert edge.path().pointAtPercent(1.0).x() == pytest.approx(190.0)
    scene.editor.undo_stack.undo()
    assert item.pos() == QPointF(130, 480)
    assert edge.path().pointAtPercent(1.0).x() == pytest.approx(130.0)  # edges follow


def test_delete_key_removes_block_and_edges_undo_restores(qtbot, canvas):
    scene, view = canvas
    scene.select_nodes(["interaction"])
    assert scene.selected_node_ids() == ["interaction"]
    view.setFocus()
    qtbot.keyClick(view, Qt.Key_Delete)
    assert scene.block_item("interaction") is None
    assert len(scene.edge_items()) == 2
    assert "interaction" not in scene.document.node_ids()
    scene.editor.undo_stack.undo()
    assert scene.block_item("interaction") is not None
    assert len(scene.edge_items()) == 5
    assert scene.edge_item("tables", "interaction") is not None


def test_delete_selected_edge(canvas):
    scene, _ = canvas
    scene.edge_item("dense", "bottom_mlp").setSelected(True)
    scene.delete_selected()
    assert not scene.document.has_edge("dense", "bottom_mlp")
    assert "dense" in scene.document.node_ids()


def test_rubber_band_selects(qtbot, canvas):
    scene, view = canvas
    ids = []
    scene.sigSelectionChangedIds.connect(ids.append)
    # A box around the top two blocks of the left column, starting on empty canvas.
    drag(view, QPointF(-120, -50), QPointF(120, 160))
    assert scene.selected_node_ids() == ["dense", "bottom_mlp"]
    assert ids[-1] == ["dense", "bottom_mlp"]
    assert scene.editor.undo_stack.count() == 0


def test_scene_follows_reset(canvas, default_scenario):
    scene, _ = canvas
    scene.editor.load(empty_scenario())
    assert scene.block_items() == [] and scene.edge_items() == []
    scene.editor.load(default_scenario)
    assert len(scene.block_items()) == 6 and len(scene.edge_items()) == 5


def test_invalid_block_outlined_with_tooltip(canvas):
    scene, _ = canvas
    scene.editor.delete_edge("dense", "bottom_mlp")
    item = scene.block_item("bottom_mlp")
    assert item.issues and "needs at least 1 input" in item.toolTip()
    scene.editor.undo_stack.undo()
    assert item.issues == [] and "needs" not in item.toolTip()


def test_params_change_updates_block(canvas):
    scene, _ = canvas
    scene.editor.set_params("top_mlp", {"layers": [32, 1], "activation": "relu",
                                        "final": "sigmoid"})
    assert scene.block_item("top_mlp").summary == "MLP 32-1"


def test_zoom_and_fit(qtbot, canvas):
    scene, view = canvas
    view.resetTransform()
    wheel = QWheelEvent(QPointF(450, 350), QPointF(450, 350), QPoint(0, 0), QPoint(0, 240),
                        Qt.NoButton, Qt.NoModifier, Qt.NoScrollPhase, False)
    view.wheelEvent(wheel)
    assert view.transform().m11() > 1.2
    qtbot.keyClick(view, Qt.Key_F)
    visible = view.mapToScene(view.viewport().rect()).boundingRect()
    assert visible.contains(scene.itemsBoundingRect())


def test_middle_drag_pans(canvas):
    scene, view = canvas
    view.resetTransform()
    view.centerOn(0, 0)
    before = view.view_center()
    # In viewport pixels: the scene slides under the mouse while panning.
    for kind, x, y in ((QEvent.MouseButtonPress, 400, 300), (QEvent.MouseMove, 425, 315),
                       (QEvent.MouseMove, 450, 330), (QEvent.MouseButtonRelease, 450, 330)):
        buttons = Qt.NoButton if kind == QEvent.MouseButtonRelease else Qt.MiddleButton
        mouse(view, kind, None, Qt.MiddleButton, buttons, local=QPoint(x, y))
    after = view.view_center()
    assert after.x() == pytest.approx(before.x() - 50, abs=2)
    assert after.y() == pytest.approx(before.y() - 30, abs=2)
    assert scene.document.position("dense") == (0.0, 0.0)  # panning moved nothing


def test_palette_filter_and_double_click(qtbot):
    palette = BlockPalette()
    qtbot.addWidget(palette)
    assert sorted(palette.visible_kinds()) == sorted(BLOCK_KINDS)  # every kind offered
    palette.search.setText("transformer")
    assert palette.visible_kinds() == ["transformer_layer"]
    palette.search.setText("")
    item = palette.item_for("loss")
    assert item.toolTip(0) and "loss" in item.toolTip(0).lower()
    with qtbot.waitSignal(palette.sigAddRequested) as blocker:
        palette.tree.itemDoubleClicked.emit(item, 0)
    assert blocker.args == ["loss"]
