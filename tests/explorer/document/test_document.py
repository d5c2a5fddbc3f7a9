"""The scenario document, its commands and the editor's refusals."""
import pytest

from explorer.document.editor import DocumentEditor
from explorer.document.scenario_document import ScenarioDocument, empty_scenario
from predictors.scenario.format import validate_scenario
from predictors.scenario.registry import default_params


def test_load_snapshot_round_trip(qtbot, default_scenario):
    doc = ScenarioDocument()
    with qtbot.waitSignals([doc.sigReset, doc.sigChanged]):
        doc.load(default_scenario)
    snap = doc.snapshot()
    assert snap == default_scenario
    snap["model"]["nodes"].clear()  # a snapshot is a copy: the worker cannot touch the live one
    assert len(doc.node_ids()) == 6
    assert doc.issues() == []
    assert doc.position("tables") == (260.0, 60.0)


def test_missing_layout_gets_positions(qtbot, default_scenario):
    default_scenario["layout"] = {}
    doc = ScenarioDocument(default_scenario)
    ys = {i: doc.position(i)[1] for i in doc.node_ids()}
    assert ys["dense"] < ys["bottom_mlp"] < ys["interaction"] < ys["top_mlp"] < ys["loss"]


def test_new_node_id_is_unused(qtbot, editor):
    doc = editor.document
    assert doc.new_node_id("mlp") == "mlp"
    doc.add_node("mlp", None, (0, 0), "mlp")
    assert doc.new_node_id("mlp") == "mlp_2"
    assert doc.new_node_id("loss") == "loss_2"


def test_add_block_undo_redo(qtbot, editor):
    doc = editor.document
    with qtbot.waitSignal(doc.sigNodeAdded) as blocker:
        node_id = editor.add_block("mlp", (10, 20))
    assert blocker.args == [node_id]
    assert doc.node(node_id)["params"] == default_params("mlp")
    assert doc.position(node_id) == (10.0, 20.0)
    assert editor.is_modified()
    editor.undo_stack.undo()
    assert node_id not in doc.node_ids()
    assert not editor.is_modified()
    editor.undo_stack.redo()
    assert doc.node(node_id)["kind"] == "mlp" and doc.position(node_id) == (10.0, 20.0)


def test_unknown_kind_refused(qtbot, editor):
    with qtbot.waitSignal(editor.sigMessage):
        assert editor.add_block("conv9d", (0, 0)) is None
    assert editor.undo_stack.count() == 0


def test_delete_removes_edges_and_undo_restores_order(qtbot, editor):
    doc = editor.document
    before = doc.snapshot()
    editor.delete(["interaction"])
    assert "interaction" not in doc.node_ids()
    assert all("interaction" not in e for e in doc.edges())
    assert len(doc.edges()) == 2
    assert editor.undo_stack.count() == 1
    editor.undo_stack.undo()
    assert doc.snapshot() == before  # nodes, edges and their order, positions


def test_delete_nodes_and_edges_is_one_step(qtbot, editor):
    doc = editor.document
    before = doc.snapshot()
    editor.delete(["loss"], [("dense", "bottom_mlp"), ("top_mlp", "loss")])
    assert doc.edges() == [("bottom_mlp", "interaction"), ("tables", "interaction"),
                           ("interaction", "top_mlp")]
    assert editor.undo_stack.count() == 1
    editor.undo_stack.undo()
    assert doc.snapshot() == before


@pytest.mark.parametrize("source,target,why", [
    ("mlp_a", "mlp_a", "itself"),
    ("dense", "bottom_mlp", "already"),
    ("loss", "mlp_a", "no output"),
    ("mlp_a", "tables", "no inputs"),
    ("mlp_a", "bottom_mlp", "at most 1"),
    ("top_mlp", "mlp_a", None),  # allowed; then mlp_a -> interaction closes a cycle below
])
def test_connect_refusals(qtbot, editor, source, target, why):
    editor.document.add_node("mlp", None, (0, 0), "mlp_a")
    messages = []
    editor.sigMessage.connect(messages.append)
    ok = editor.connect(source, target)
    if why is None:
        assert ok and editor.document.has_edge(source, target)
        assert not editor.connect("mlp_a", "interaction")
        assert "cycle" in messages[-1]
    else:
        assert not ok
        assert why in messages[-1]
        assert editor.undo_stack.count() == 0


def test_cycle_refused(qtbot, editor):
    # interaction takes any number of inputs, so only the cycle check stops this edge.
    assert not editor.connect("top_mlp", "interaction")
    assert not editor.document.has_edge("top_mlp", "interaction")


def test_connect_and_undo(qtbot, editor):
    doc = editor.document
    editor.delete_edge("top_mlp", "loss")
    assert doc.node_issues("loss")  # a loss with no input is flagged
    with qtbot.waitSignal(doc.sigEdgeAdded):
        assert editor.connect("top_mlp", "loss")
    assert doc.issues() == []
    editor.undo_stack.undo()
    assert not doc.has_edge("top_mlp", "loss")


def test_move_is_one_step(qtbot, editor):
    doc = editor.document
    assert editor.move(["dense", "loss"], [(5, 6), (7, 8)])
    assert doc.position("dense") == (5.0, 6.0) and doc.position("loss") == (7.0, 8.0)
    assert not editor.move(["dense"], [(5, 6)])  # no change, no step
    assert editor.undo_stack.count() == 1
    editor.undo_stack.undo()
    assert doc.position("dense") == (0.0, 0.0) and doc.position("loss") == (130.0, 480.0)


def test_params_training_platform_commands(qtbot, editor):
    doc = editor.document
    editor.set_params("bottom_mlp", {"layers": [8], "activation": "relu", "final": None})
    assert doc.node("bottom_mlp")["params"]["layers"] == [8]
    with qtbot.waitSignal(doc.sigTrainingChanged):
        editor.set_training(dict(doc.training(), batch_size=64))
    with qtbot.waitSignal(doc.sigPlatformChanged):
        editor.set_platform({"preset": "dgx-a100"})
    assert validate_scenario(doc.snapshot())["training"]["batch_size"] == 64
    for _ in range(3):
        editor.undo_stack.undo()
    assert doc.training()["batch_size"] == 512
    assert doc.platform() == {"preset": "a100-1"}
    assert doc.node("bottom_mlp")["params"]["layers"] == [128, 64, 16]


def test_issues_cached_and_refreshed(qtbot, editor):
    doc = editor.document
    editor.set_params("bottom_mlp", {"layers": [0]})
    issues = doc.node_issues("bottom_mlp")
    assert issues and "must be positive" in issues[0].message
    editor.undo_stack.undo()
    assert doc.issues() == []


def test_load_clears_history(qtbot, editor, default_scenario):
    editor.add_block("loss", (0, 0))
    editor.load(empty_scenario("fresh"))
    assert editor.undo_stack.count() == 0 and not editor.is_modified()
    assert editor.document.node_ids() == [] and editor.document.name == "fresh"


def test_default_editor_document_is_empty(qtbot):
    ed = DocumentEditor()
    assert ed.document.node_ids() == []
    assert ed.document.snapshot()["format"] == "ml-dse/scenario"
