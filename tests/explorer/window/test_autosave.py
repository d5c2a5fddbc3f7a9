"""Unsaved work is written to the app's own folder and offered back after a crash."""
import json

from PySide6.QtWidgets import QMessageBox

from explorer.window import DEFAULT_SCENARIO, MainWindow


def window(qtbot, tmp_path, path, folder):
    from PySide6.QtCore import QSettings

    w = MainWindow(path, predict_fn=lambda doc, progress=None, cancelled=None: None,
                   settings=QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat),
                   autosave_folder=folder, debounce_ms=10**6)
    qtbot.addWidget(w)
    return w


def test_an_edit_is_autosaved_and_offered_back_after_a_crash(qtbot, tmp_path, monkeypatch):
    design = tmp_path / "design.json"
    design.write_text(DEFAULT_SCENARIO.read_text())
    folder = tmp_path / "autosave"
    w = window(qtbot, tmp_path, design, folder)
    assert w.autosave.write_now() is None  # nothing unsaved: nothing written
    w.editor.set_platform({"preset": "h100-1"})
    written = w.autosave.write_now()
    assert written.parent == folder and list(folder.iterdir()) == [written]
    stored = json.loads(written.read_text())
    assert stored["path"] == str(design.resolve())
    assert stored["scenario"]["platform"] == {"preset": "h100-1"}
    assert json.loads(design.read_text())["platform"] != {"preset": "h100-1"}  # untouched
    # the app dies here; the next start opens the same file and is offered the edit
    asked = []
    monkeypatch.setattr(QMessageBox, "question",
                        lambda *a, **k: asked.append(a[2]) or QMessageBox.Yes)
    again = window(qtbot, tmp_path, design, folder)
    again.offer_autosave()
    assert asked and "design.json" in asked[0]
    assert again.editor.document.snapshot()["platform"] == {"preset": "h100-1"}
    assert again.editor.is_modified()  # restored, not saved
    assert again.save_to(design) and not list(folder.iterdir())  # saving removes it


def test_a_declined_autosave_is_forgotten_and_nothing_is_written_without_a_folder(
        qtbot, tmp_path, monkeypatch):
    design = tmp_path / "design.json"
    design.write_text(DEFAULT_SCENARIO.read_text())
    folder = tmp_path / "autosave"
    w = window(qtbot, tmp_path, design, folder)
    w.editor.set_platform({"preset": "h100-1"})
    w.autosave.write_now()
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.No)
    again = window(qtbot, tmp_path, design, folder)
    again.offer_autosave()
    assert again.editor.document.snapshot()["platform"] != {"preset": "h100-1"}
    assert not list(folder.iterdir())
    plain = window(qtbot, tmp_path, design, None)
    assert plain.autosave is None


def test_an_untitled_design_is_offered_back_when_the_app_starts(qtbot, tmp_path,
                                                                monkeypatch):
    folder = tmp_path / "autosave"
    w = window(qtbot, tmp_path, None, folder)  # the bundled default opens
    w.new_scenario()  # untitled
    w.editor.set_platform({"preset": "h100-1"})
    assert w.autosave.write_now().name == "untitled.json"
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.Yes)
    again = window(qtbot, tmp_path, None, folder)
    again.offer_autosave()
    assert again.path is None and again.editor.is_modified()
    assert again.editor.document.snapshot()["platform"] == {"preset": "h100-1"}
