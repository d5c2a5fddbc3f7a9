"""Unsaved work is written to the app's own folder and offered back after a crash."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from paths import ROOT
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


CHILD = """
import sys
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from explorer.__main__ import main
from explorer.window import MainWindow

def edit():
    window = next(w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow))
    window.editor.set_platform({"preset": "h100-1"})   # through the undo stack, as a user's
    print("edited", flush=True)

app = QApplication(sys.argv[:1])
QTimer.singleShot(1000, edit)
sys.exit(main([sys.argv[1]], predict_fn=lambda doc, progress=None, cancelled=None: None))
"""


@pytest.mark.slow
def test_a_killed_app_offers_its_last_edit_back_on_restart(qtbot, tmp_path, monkeypatch):
    """The real app, in its own process, is killed (SIGKILL) after an edit; the next start
    on the same file restores the edit from the app's own data folder."""
    design = tmp_path / "design.json"
    design.write_text(DEFAULT_SCENARIO.read_text())
    home = tmp_path / "home"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(ROOT),
           "HOME": str(home), "XDG_DATA_HOME": str(home / "data"),
           "XDG_CONFIG_HOME": str(home / "config"), "XDG_CACHE_HOME": str(home / "cache")}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(design)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline, written = time.monotonic() + 120, []
        while not written and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.2)
            written = list((home / "data").rglob("autosave/*.json"))
        assert written, f"no autosave within 120 s: {child.poll()} {child.stderr.read()[-2000:]}"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    assert child.returncode == -signal.SIGKILL
    assert json.loads(design.read_text())["platform"] != {"preset": "h100-1"}
    asked = []
    monkeypatch.setattr(QMessageBox, "question",
                        lambda *a, **k: asked.append(a[2]) or QMessageBox.Yes)
    again = window(qtbot, tmp_path, design, written[0].parent)
    again.offer_autosave()
    assert asked and "design.json" in asked[0]
    assert again.editor.document.snapshot()["platform"] == {"preset": "h100-1"}
    assert again.editor.is_modified()


def test_a_burst_of_edits_is_written_once_it_ends_and_not_after_close(qtbot, tmp_path,
                                                                       monkeypatch):
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.Discard)
    design = tmp_path / "design.json"
    design.write_text(DEFAULT_SCENARIO.read_text())
    folder = tmp_path / "autosave"
    w = window(qtbot, tmp_path, design, folder)
    w.autosave.burst.setInterval(300)
    w.editor.set_platform({"preset": "h100-1"})
    w.editor.set_platform({"preset": "h100-8"})
    assert w.autosave.burst.isActive() and not folder.exists()  # the burst goes on
    qtbot.waitUntil(lambda: folder.exists() and any(folder.iterdir()), timeout=5000)
    stored = json.loads(next(folder.iterdir()).read_text())
    assert stored["scenario"]["platform"] == {"preset": "h100-8"}
    w.autosave.stop()
    w.editor.set_platform({"preset": "h100-1"})
    assert not w.autosave.burst.isActive() and not w.autosave.timer.isActive()
