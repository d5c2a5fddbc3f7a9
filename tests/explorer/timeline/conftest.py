"""The Gantt the timeline tests share: shown, 900 x 400."""
import pytest

from explorer.timeline.gantt import GanttWidget


@pytest.fixture
def gantt(qtbot):
    g = GanttWidget()
    qtbot.addWidget(g)
    g.resize(900, 400)
    g.show()
    qtbot.waitExposed(g)
    return g
