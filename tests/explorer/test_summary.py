"""The Summary dock: headline numbers and top ops, greyed out while stale."""
from types import SimpleNamespace

import pytest

from explorer.summary import SummaryPanel
from explorer.timeline.sample import synthetic_timeline


@pytest.fixture
def prediction():
    return SimpleNamespace(
        iteration_ms=2.325, per_rank=[{"iteration_ms": 2.325, "device_active_ms": 0.25}],
        num_ops=218, timeline=synthetic_timeline(ranks=1), platform="a100-1",
        device="NVIDIA A100", notes=["a note"], elapsed_s=0.5,
        top_ops=[{"name": "aten::mm", "category": "gemm", "total_ms": 0.5, "count": 3}])


@pytest.fixture
def panel(qtbot):
    widget = SummaryPanel()
    qtbot.addWidget(widget)
    widget.resize(600, 300)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def darkest(label) -> int:
    """The lowest grey level among the label's pixels (its text's colour)."""
    image = label.grab().toImage()
    return min(image.pixelColor(x, y).lightness()
               for x in range(image.width()) for y in range(image.height()))


def test_headline_numbers(panel, prediction):
    panel.set_prediction(prediction)
    assert panel.iteration.value.text() == "2.325 ms"
    assert panel.active.value.text() == "11 %"
    assert panel.ops.value.text() == "218"
    assert panel.table.rowCount() == 1 and not panel.is_stale()


def test_stale_greys_the_headline_numbers(panel, prediction):
    panel.set_prediction(prediction)
    fresh = {f.caption.text(): darkest(f.value) for f in panel.figures()}
    assert all(v < 90 for v in fresh.values()), fresh  # dark text while current
    panel.set_stale(True)
    assert panel.is_stale() and not panel.table.isEnabled()
    stale = {f.caption.text(): darkest(f.value) for f in panel.figures()}
    for caption in ("iteration (slowest rank)", "device active"):
        assert stale[caption] > 150, stale
    assert all(stale[k] > fresh[k] + 60 for k in fresh), (fresh, stale)
    panel.set_prediction(prediction)  # a new result is current again
    assert not panel.is_stale()
    assert all(darkest(f.value) < 90 for f in panel.figures())
