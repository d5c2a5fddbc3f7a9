"""Fixtures of the GUI tests; Qt runs offscreen, so the tests need no display."""
import os

# Before any Qt import: the platform plugin is chosen when QApplication is created.
os.environ["QT_QPA_PLATFORM"] = "offscreen"

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from predictors.scenario.format import load_scenario  # noqa: E402

SCENARIOS = Path(__file__).resolve().parents[2] / "resources" / "scenarios"


@pytest.fixture
def default_scenario() -> dict:
    """The bundled small DLRM, validated: six blocks, five edges."""
    return load_scenario(SCENARIOS / "small_dlrm.json")


@pytest.fixture
def editor(qtbot, default_scenario):
    """A DocumentEditor holding the small DLRM, with a clean undo stack."""
    from explorer.document.editor import DocumentEditor

    ed = DocumentEditor()
    ed.load(default_scenario)
    return ed


def settings_in(tmp_path):
    """Settings in a file of the test's own folder (never the user's)."""
    from PySide6.QtCore import QSettings

    return QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)


@pytest.fixture
def make_window(qtbot, tmp_path):
    """Builds main windows (on ``path``, default: the bundled scenario) with their own
    settings; on teardown, checks that closing one left no prediction, calibration or
    trace-loading thread running, then deletes the windows there and then (the garbage
    collector deleting one during a later test once deadlocked or aborted the run)."""
    from explorer.window import MainWindow

    windows = []

    def make(path=None, **kwargs):
        kwargs.setdefault("debounce_ms", 20)
        w = MainWindow(path, settings=settings_in(tmp_path), **kwargs)
        w.confirm_discard = lambda: True  # never a modal "save changes?" in a test
        w.resize(1280, 800)
        w.show()
        windows.append(w)
        return w

    try:
        yield make
        for w in windows:
            w.close()
            assert not any(t.isRunning() for t in list(w.controller.runner._threads))
            assert not w.profiles.runner.is_running()
            assert not w.profiles.panel.loader.is_running()
            assert not any(t.isRunning() for t in list(w.sharding.runner._threads))
            assert not any(t.isRunning() for t in list(w.sweep.runner._threads))
            assert not any(t.isRunning() for t in list(w.sweep.fit_runner._threads))
    finally:
        for w in windows:
            if w.isVisible():   # a test that failed before the checks above
                w.close()
        destroy(*windows)
        windows.clear()


def destroy(*widgets) -> None:
    """Delete closed windows now, their C++ side first, then their Python wrappers: not
    when the garbage collector happens to run during a later test."""
    import gc

    from PySide6.QtCore import QCoreApplication, QEvent

    for w in widgets:
        w.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.DeferredDelete)
    gc.collect()
