"""The Summary dock: headline numbers and top ops, greyed out while stale."""
from types import SimpleNamespace

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication

from explorer.run.summary import SummaryPanel
from explorer.window import theme
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


def memory_rank(rank, peak, device=40e9):
    return {"rank": rank, "iteration_ms": 2.0, "device_active_ms": 1.0,
            "peak_memory_bytes": peak,
            "memory": {"peak_bytes": peak, "peak_op": "aten::mm (backward, top)",
                       "resident_bytes": {"parameters": peak // 2, "inputs": 0},
                       "at_peak_bytes": {"activations": peak // 2, "gradients": 0},
                       "gradient_bytes": 0, "device_bytes": device, "fits": peak <= device}}


def reddest(label) -> int:
    """How far the label's most saturated red pixel leans to red."""
    image = label.grab().toImage()
    return max(image.pixelColor(x, y).red() - image.pixelColor(x, y).green()
               for x in range(image.width()) for y in range(image.height()))


def test_peak_memory_of_the_highest_rank_with_its_breakdown(panel, prediction):
    prediction.per_rank = [memory_rank(0, 4_000_000_000), memory_rank(1, 12_000_000_000)]
    panel.set_prediction(prediction)
    assert panel.memory.value.text() == "12.0 GB"
    assert panel.memory.caption.text() == "peak memory · rank 1 · 30 % of 40.0 GB"
    tip = panel.memory.toolTip()
    assert "Peak at aten::mm (backward, top)" in tip
    assert "parameters: 6.0 GB" in tip and "activations and temporaries: 6.0 GB" in tip
    assert "inputs" not in tip   # nothing to show
    assert reddest(panel.memory.value) < 40


def test_a_step_that_does_not_fit_is_red_even_after_a_stale_spell(panel, prediction):
    prediction.per_rank = [memory_rank(0, 50_000_000_000)]
    prediction.notes = ["does not fit: the step needs 50.0 GB", "a note"]
    panel.set_prediction(prediction)
    assert panel.memory.caption.text() == "peak memory · does not fit 40.0 GB"
    assert reddest(panel.memory.value) > 100
    assert "#c0392b" in panel.notes.text()
    panel.set_stale(True)
    assert reddest(panel.memory.value) < 40 and "Out of date" in panel.memory.toolTip()
    panel.set_stale(False)
    assert reddest(panel.memory.value) > 100 and "Peak at" in panel.memory.toolTip()
    panel.clear()
    assert panel.memory.value.text() == "–" and panel.memory.toolTip() == ""
    assert panel.memory.caption.text() == "peak memory"


def test_no_memory_figures_show_a_dash(panel, prediction):
    panel.set_prediction(prediction)
    assert panel.memory.value.text() == "–"


def test_a_narrow_dock_wraps_the_figures_above_the_notes(qtbot, prediction):
    """Six figures side by side would set a minimum width of some 650 px (the window grew
    to hold them); in a narrow panel they wrap onto rows, and the notes sit below the last
    row, never under it."""
    panel = SummaryPanel()
    qtbot.addWidget(panel)
    panel.set_prediction(prediction)
    panel.resize(300, 260)   # short too: the panel scrolls rather than overlap
    panel.show()
    qtbot.waitExposed(panel)
    assert panel.minimumSizeHint().width() < 300
    inner = panel.notes.parentWidget()
    tops = {f.mapTo(inner, f.rect().topLeft()).y() for f in panel.figures()}
    assert len(tops) >= 3    # at least three rows
    qtbot.waitUntil(lambda: max(f.mapTo(inner, f.rect().bottomLeft()).y()
                                for f in panel.figures())
                    < panel.notes.mapTo(inner, panel.notes.rect().topLeft()).y())


def test_the_verdict_and_the_stated_range_are_shown(panel, prediction):
    prediction.verdict = {"bound": "host", "text": "host-bound: the GPU is active 11 % of "
                          "the step", "what_if": ["a larger per-GPU batch", "CUDA graphs"]}
    prediction.iteration_ms_low, prediction.iteration_ms_high = 2.0, 3.1
    panel.set_prediction(prediction)
    assert panel.verdict.text().startswith("host-bound")
    assert "CUDA graphs" in panel.verdict.toolTip()
    assert "80 % range 2–3.1 ms" in panel.iteration.caption.text()
    panel.clear()
    assert panel.verdict.text() == "" and "range" not in panel.iteration.caption.text()


def test_a_verdict_with_an_apostrophe_is_shown_as_written(panel, prediction):
    prediction.verdict = {"bound": "host", "text": "host-bound: the CPU's launches & syncs"}
    prediction.platform = "Tom's <rig> & co"
    panel.set_prediction(prediction)
    for label, text in ((panel.verdict, "host-bound: the CPU's launches & syncs"),
                        (panel.where.value, "Tom's <rig> & co")):
        # shown as plain text, so the text is what the label displays
        assert label.textFormat() == Qt.PlainText
        assert label.text() == text
        assert "&#x27;" not in label.text() and "&amp;" not in label.text()


def lightest(label) -> int:
    image = label.grab().toImage()
    return max(image.pixelColor(x, y).lightness()
               for x in range(image.width()) for y in range(image.height()))


def card(figure) -> int:
    """The lightness of a figure card's background, just inside its border."""
    return figure.grab().toImage().pixelColor(4, figure.height() // 2).lightness()


def test_the_dark_theme_gives_light_text_on_dark_cards(qtbot, panel, prediction):
    prediction.verdict = {"bound": "host", "text": "host-bound"}
    panel.set_prediction(prediction)
    assert card(panel.iteration) > 200 and darkest(panel.iteration.value) < 90
    assert panel.verdict.palette().color(QPalette.WindowText).lightness() < 100
    theme.apply_theme(True)
    try:
        QApplication.processEvents()   # the widgets hear of the new palette
        for label in (panel.verdict, panel.notes):
            assert label.palette().color(QPalette.WindowText).lightness() > 128
        assert card(panel.iteration) < 80
        assert lightest(panel.iteration.value) > 180
        panel.set_stale(True)   # greyed: dimmer than fresh text, still on a dark card
        assert 80 < panel.verdict.palette().color(QPalette.WindowText).lightness() < 180
        assert card(panel.iteration) < 80
    finally:
        theme.apply_theme(False)
    QApplication.processEvents()
    panel.set_stale(False)
    assert card(panel.iteration) > 200 and darkest(panel.iteration.value) < 90
    assert panel.verdict.palette().color(QPalette.WindowText).lightness() < 100
