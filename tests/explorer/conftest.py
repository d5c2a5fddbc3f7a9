"""Fixtures of the GUI tests; Qt runs offscreen, so the tests need no display."""
import os

# Before any Qt import: the platform plugin is chosen when QApplication is created.
os.environ["QT_QPA_PLATFORM"] = "offscreen"

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from predictors.scenario import load_scenario  # noqa: E402

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
