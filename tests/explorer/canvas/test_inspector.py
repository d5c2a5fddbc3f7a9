"""The inspector edits parameters and settings through the editor, one undo step per edit."""
import pytest
from PySide6.QtCore import Qt

from explorer.canvas.inspector import Inspector


@pytest.fixture
def inspector(qtbot, editor):
    widget = Inspector(editor)
    qtbot.addWidget(widget)
    widget.resize(420, 600)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def type_into(qtbot, line_edit, text):
    """Replace the text and press Enter, as a user would."""
    line_edit.setFocus()
    line_edit.selectAll()
    qtbot.keyClick(line_edit, Qt.Key_Backspace)
    qtbot.keyClicks(line_edit, text)
    qtbot.keyClick(line_edit, Qt.Key_Return)


def test_form_built_from_param_specs(inspector):
    inspector.set_node("bottom_mlp")
    assert set(inspector.fields) == {"layers", "activation", "final"}
    assert inspector.fields["layers"].widget.text() == "128, 64, 16"
    assert inspector.fields["activation"].widget.currentText() == "relu"
    assert inspector.fields["final"].read() == "relu"
    inspector.set_node("interaction")
    spin = inspector.fields["layers"].widget
    assert spin.minimum() == 1 and spin.value() == 3  # default filled in for display


def test_int_list_edit_is_one_undo_step(qtbot, inspector, editor):
    inspector.set_node("bottom_mlp")
    type_into(qtbot, inspector.fields["layers"].widget, "64, 32")
    assert editor.document.node("bottom_mlp")["params"]["layers"] == [64, 32]
    assert editor.undo_stack.count() == 1
    editor.undo_stack.undo()
    # The form follows the document (sigNodeChanged), so undo shows in the field.
    assert inspector.fields["layers"].widget.text() == "128, 64, 16"


@pytest.mark.parametrize("text,message", [("64, 0", "layers[1]: must be positive"),
                                          ("64, x", "'x' is not an integer"),
                                          ("", "at least one integer")])
def test_invalid_int_list_rejected(qtbot, inspector, editor, text, message):
    inspector.set_node("bottom_mlp")
    type_into(qtbot, inspector.fields["layers"].widget, text)
    field = inspector.fields["layers"]
    assert message in field.error
    assert not field.error_label.isHidden()
    assert editor.document.node("bottom_mlp")["params"]["layers"] == [128, 64, 16]
    assert editor.undo_stack.count() == 0
    type_into(qtbot, field.widget, "16")  # fixing it clears the message
    assert field.error is None and field.error_label.isHidden()
    assert editor.undo_stack.count() == 1


def test_spin_and_combo_commit(inspector, editor):
    inspector.set_node("dense")
    inspector.fields["features"].widget.setValue(20)
    assert editor.document.node("dense")["params"]["features"] == 20
    inspector.set_node("top_mlp")
    combo = inspector.fields["final"].widget
    combo.setCurrentIndex(combo.findData(None))
    assert editor.document.node("top_mlp")["params"]["final"] is None
    assert editor.undo_stack.count() == 2


def test_tables_edit_add_remove(inspector, editor):
    inspector.set_node("tables")
    field = inspector.fields["tables"]
    table = field.table
    assert table.rowCount() == 8
    table.item(1, 0).setText("0")
    assert "tables[1].rows: must be positive" in field.error
    assert editor.undo_stack.count() == 0
    table.item(1, 0).setText("1234")
    assert editor.document.node("tables")["params"]["tables"][1]["rows"] == 1234
    table.cellWidget(0, 3).setCurrentText("uniform")
    assert editor.document.node("tables")["params"]["tables"][0]["distribution"] == {
        "kind": "uniform"}
    field.add_button.click()
    assert len(editor.document.node("tables")["params"]["tables"]) == 9
    table.selectRow(0)
    field.remove_button.click()
    tables = editor.document.node("tables")["params"]["tables"]
    assert len(tables) == 8 and tables[0]["rows"] == 1234
    assert editor.undo_stack.count() == 4
    for _ in range(4):
        editor.undo_stack.undo()
    assert table.rowCount() == 8 and table.item(1, 0).text() == "50000"


def test_a_cell_edit_keeps_the_table_widget_and_its_cursor(qtbot, inspector, editor):
    inspector.set_node("tables")
    table = inspector.fields["tables"].table
    items = [table.item(r, 0) for r in range(table.rowCount())]
    table.setCurrentCell(2, 1)
    table.item(2, 1).setText("32")  # commits one undo step
    assert editor.document.node("tables")["params"]["tables"][2]["dim"] == 32
    # the rows were not rebuilt under the editing cell: same items, same cursor
    assert [table.item(r, 0) for r in range(table.rowCount())] == items
    assert (table.currentRow(), table.currentColumn()) == (2, 1)
    editor.undo_stack.undo()  # an undo does reload what changed
    assert table.item(2, 1).text() != "32"


def test_removing_a_row_while_a_cell_is_invalid_keeps_widget_and_model_equal(inspector,
                                                                            editor):
    inspector.set_node("tables")
    field = inspector.fields["tables"]
    field.table.item(0, 1).setText("abc")
    assert "is not an integer" in field.error
    field.table.selectRow(5)
    field.remove_button.click()
    assert field.table.rowCount() == len(editor.document.node("tables")["params"]["tables"])
    assert "before adding or removing tables" in field.error
    assert editor.undo_stack.count() == 0


def test_lr_refuses_nan_and_infinity(qtbot, inspector, editor):
    inspector.set_node(None)
    for text in ("nan", "inf"):
        type_into(qtbot, inspector.fields["lr"].widget, text)
        assert "must be a positive number" in inspector.fields["lr"].error
    assert editor.undo_stack.count() == 0


def test_zipf_alpha_validated(inspector, editor):
    inspector.set_node("tables")
    field = inspector.fields["tables"]
    field.table.item(0, 4).setText("-1")
    assert "alpha: must be a positive number" in field.error
    assert editor.undo_stack.count() == 0


def test_no_selection_shows_training(qtbot, inspector, editor):
    inspector.follow_selection(["dense", "loss"])  # several blocks: the settings
    assert inspector.node_id is None
    assert inspector.fields["batch_size"].widget.value() == 512
    inspector.fields["batch_size"].widget.setValue(1024)
    assert editor.document.training()["batch_size"] == 1024
    type_into(qtbot, inspector.fields["lr"].widget, "abc")
    assert "not a number" in inspector.fields["lr"].error
    assert editor.undo_stack.count() == 1
    combo = inspector.fields["dtype"].widget
    combo.setCurrentIndex(combo.findData("bfloat16"))
    assert editor.document.training()["dtype"] == "bfloat16"
    presets = inspector.fields["preset"].widget
    presets.setCurrentIndex(presets.findData("local-cpu"))
    assert editor.document.platform() == {"preset": "local-cpu"}
    assert inspector.fields["threads"].widget.isEnabled()
    editor.undo_stack.undo()
    assert presets.currentData() == "a100-1"


def test_the_input_pipeline_shows_its_default_and_changes_in_one_undo_step(inspector, editor):
    inspector.follow_selection([])
    combo = inspector.fields["input_pipeline"].widget
    assert combo.currentData() == "resident"   # the default
    combo.setCurrentIndex(combo.findData("torchrec"))
    assert editor.document.training()["input_pipeline"] == "torchrec"
    assert editor.undo_stack.count() == 1
    editor.undo_stack.undo()
    assert editor.document.training().get("input_pipeline", "resident") == "resident"
    assert combo.currentData() == "resident"


def test_follows_removal_and_shows_issues(inspector, editor):
    node_id = editor.add_block("mlp", (0, 600))
    inspector.follow_selection([node_id])
    assert inspector.node_id == node_id
    assert "needs at least 1 input" in inspector.issues_label.text()
    assert not inspector.issues_label.isHidden()
    editor.undo_stack.undo()
    assert inspector.node_id is None and "batch_size" in inspector.fields


@pytest.mark.parametrize("node_id", [None, "tables", "bottom_mlp", "interaction", "dense"])
def test_form_fits_a_narrow_dock(qtbot, inspector, node_id):
    """At the dock's usual ~290 px nothing is clipped on the right: fields shrink, the
    title wraps, and there is no horizontal scrolling."""
    inspector.resize(290, 700)
    inspector.set_node(node_id)
    qtbot.wait(10)  # let the scroll area lay out the new form
    viewport = inspector.scroll.viewport().width()
    content = inspector.scroll.widget()
    assert content.minimumSizeHint().width() <= viewport
    assert content.width() <= viewport
    assert inspector.title.wordWrap()
    assert inspector.title.geometry().right() <= viewport
    for field in inspector.fields.values():
        right = field.container.mapTo(content, field.container.rect().topRight()).x()
        assert right <= viewport, field.name
        assert field.widget.width() >= 60, field.name


def test_tables_editor_fits_a_narrow_dock(qtbot, inspector):
    """The eight tables of the small DLRM show in full: no scroll bars, no cut numbers."""
    inspector.resize(290, 700)
    inspector.set_node("tables")
    qtbot.wait(10)
    table = inspector.fields["tables"].table
    assert not table.horizontalScrollBar().isVisible()
    assert not table.verticalScrollBar().isVisible()
    header = table.horizontalHeader()
    for col in range(3):  # rows, dim, pooling: each number fits its column
        assert header.sectionSize(col) >= table.sizeHintForColumn(col), col
    assert header.model().headerData(2, Qt.Horizontal, Qt.ToolTipRole).startswith("pooling")


def test_the_sharding_plan_shows_and_resets_to_auto(qtbot, editor):
    from explorer.canvas.inspector import Inspector
    inspector = Inspector(editor)
    qtbot.addWidget(inspector)
    assert inspector.sharding_label.text().startswith("auto")
    assert not inspector.sharding_reset.isEnabled()
    editor.set_parallelism({"embedding_sharding": {"tables/0": 0, "tables/1": 0}},
                           "Apply sharding plan 'x'")
    assert inspector.sharding_label.text() == "a plan: 2 table(s) on 1 rank(s)"
    inspector.sharding_reset.click()
    assert editor.document.parallelism() == {"embedding_sharding": "auto"}
    editor.undo_stack.undo()
    assert editor.document.parallelism()["embedding_sharding"] == {"tables/0": 0,
                                                                   "tables/1": 0}
    # every kind of placement is summed up (an object is not a rank)
    editor.set_parallelism({"embedding_sharding": {
        "tables/0": 0, "tables/1": {"kind": "tw", "rank": 1}, "tables/2": "rw",
        "tables/3": {"kind": "cw", "ranks": [0, 1]}, "tables/4": {"kind": "twrw",
                                                                  "ranks": [0, 1]}}},
        "Apply sharding plan 'y'")
    assert inspector.sharding_label.text() == ("a plan: 2 table(s) on 2 rank(s), 1 row-wise, "
                                               "1 column-wise, 1 table-row-wise")


@pytest.mark.parametrize("text,shown", [("99999999999", "99,999,999,999"), ("-3", "-3")])
def test_a_number_out_of_range_is_named_not_silently_changed(qtbot, inspector, editor, text,
                                                             shown):
    inspector.follow_selection([])
    field = inspector.fields["batch_size"]
    type_into(qtbot, field.widget.lineEdit(), text)
    assert field.widget.value() == 512 and editor.document.training()["batch_size"] == 512
    assert editor.undo_stack.count() == 0
    assert field.error == (f"batch_size: {shown} is out of range (1 to 16,777,216); the "
                           "value is unchanged")
    type_into(qtbot, field.widget.lineEdit(), "1024")  # a value in range commits, clears
    assert editor.document.training()["batch_size"] == 1024 and field.error is None
