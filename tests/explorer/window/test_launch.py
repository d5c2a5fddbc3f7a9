"""The command line opens any file the GUI saved: an unfinished design opens in the window
with its problems shown; batch runs refuse it with one line and exit 2."""
import pytest

from explorer.__main__ import main
from explorer.document.editor import DocumentEditor
from explorer.document.scenario_document import empty_scenario
from explorer.window.launch import EXIT_USAGE, launch_refusal
from predictors.scenario.format import ScenarioError, load_scenario, save_scenario


@pytest.fixture
def draft(qtbot, tmp_path):
    """An unfinished design, saved as File ▸ Save saves it: one MLP, no input, no loss."""
    editor = DocumentEditor()
    editor.load(empty_scenario("Draft"))
    editor.add_block("mlp", (0.0, 0.0))
    path = tmp_path / "draft.json"
    save_scenario(editor.document.snapshot(), path)
    with pytest.raises(ScenarioError):
        load_scenario(path)
    return path


def test_the_window_is_started_on_a_draft_and_batch_runs_refuse_it(draft):
    assert launch_refusal(draft, batch=False) is None
    refusal = launch_refusal(draft, batch=True)
    assert refusal and "\n" not in refusal and "draft.json" in refusal and "loss" in refusal


@pytest.mark.parametrize("name, text", [("missing.json", None), ("broken.json", "{not json"),
                                        ("other.json", '{"format": "something-else"}')])
def test_a_file_that_is_no_scenario_is_refused_either_way(tmp_path, name, text):
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    for batch in (False, True):
        refusal = launch_refusal(path, batch)
        assert refusal and name in refusal and "\n" not in refusal


def test_the_window_opens_a_draft_with_its_problems(draft, make_window):
    w = make_window(draft)
    assert w.path == draft.resolve()
    assert w.windowTitle().startswith("draft.json — ")
    assert [n["kind"] for n in w.editor.document.snapshot()["model"]["nodes"]] == ["mlp"]
    assert w.canvas_error.isVisible()
    assert "problem(s) to fix" in w.canvas_error.text() and "no loss" in w.canvas_error.text()


@pytest.mark.parametrize("flag, out", [("--export-timeline", "t.png"),
                                       ("--screenshot", "s.png")])
def test_batch_flags_on_a_draft_exit_2_with_one_line(draft, tmp_path, capsys, flag, out):
    assert main([str(draft), flag, str(tmp_path / out)]) == EXIT_USAGE
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("explorer: error: ") and "draft.json" in \
        lines[0]
    assert not (tmp_path / out).exists()
