"""View ▸ Theme: light or dark as the desktop is, or as the user picks; the palette and
the plots' backgrounds and axis text follow, the bars keep their category colours."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pyqtgraph as pg
import pytest
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication

from explorer.timeline.colors import CATEGORY_COLORS
from explorer.window import theme


def _plot_background(gantt) -> QColor:
    return gantt.plot.backgroundBrush().color()


def _axis_text(gantt) -> QColor:
    return gantt.plot.getPlotItem().getAxis("bottom").textPen().color()


@pytest.fixture
def window(make_window, monkeypatch):
    """A window on a light desktop, left light for the next test whatever happens."""
    monkeypatch.setattr(theme, "desktop_is_dark", lambda: False)
    w = make_window()
    try:
        yield w
    finally:
        w.theme.set_choice(theme.FOLLOW)


def test_dark_theme_darkens_the_palette_and_the_plots(qtbot, window):
    w = window
    assert not w.theme.is_dark()
    assert _plot_background(w.gantt).lightness() > 200
    assert QApplication.palette().color(QPalette.Window).lightness() > 128
    with qtbot.waitSignal(w.theme.sigChanged) as changed:
        w.theme.actions[theme.DARK].trigger()
    assert changed.args == [True]
    assert QApplication.palette().color(QPalette.Window).lightness() < 80
    for gantt in (w.gantt, w.compare.view.predicted, w.compare.view.recorded):
        assert _plot_background(gantt).lightness() < 60
        assert _axis_text(gantt).lightness() > 180
    # the lane names are drawn in the axis's (light) text colour
    assert w.gantt.lane_axis.textPen().color().lightness() > 180
    w.theme.set_choice(theme.LIGHT)
    assert QApplication.palette().color(QPalette.Window).lightness() > 128
    assert _plot_background(w.gantt).lightness() > 200
    assert _axis_text(w.gantt).lightness() < 100


def test_bars_keep_their_category_colours(qtbot, window):
    w = window
    qtbot.waitUntil(lambda: w.gantt.timeline is not None, timeout=60_000)
    before = {cat: pg.mkBrush(item.opts["brush"]).color().name() for cat, item in w.gantt._bars.items()}
    assert before
    w.theme.set_choice(theme.DARK)
    after = {cat: pg.mkBrush(item.opts["brush"]).color().name() for cat, item in w.gantt._bars.items()}
    assert after == before == {cat: QColor(CATEGORY_COLORS[cat]).name() for cat in before}


def test_choice_is_remembered_and_the_desktop_followed(qtbot, window, make_window,
                                                        monkeypatch):
    w = window
    view = next(a.menu() for a in w.menuBar().actions() if a.text() == "&View")
    menu = next(a.menu() for a in view.actions() if a.menu() is not None
                and a.text() == "&Theme")
    assert [a.text() for a in menu.actions()] == ["Follow &Desktop", "&Light", "D&ark"]
    assert w.theme.actions[theme.FOLLOW].isChecked()
    w.theme.set_choice(theme.DARK)
    assert w.settings.value(theme.SETTING) == theme.DARK
    again = make_window()   # same settings file: opens dark
    assert again.theme.choice == theme.DARK and again.theme.actions[theme.DARK].isChecked()
    assert _plot_background(again.gantt).lightness() < 60
    again.theme.set_choice(theme.FOLLOW)
    w.theme.set_choice(theme.FOLLOW)
    assert _plot_background(w.gantt).lightness() > 200
    # the desktop turns dark: a window that follows it turns dark too
    monkeypatch.setattr(theme, "desktop_is_dark", lambda: True)
    QApplication.styleHints().colorSchemeChanged.emit(QApplication.styleHints().colorScheme())
    assert w.theme.is_dark()
    assert _plot_background(w.gantt).lightness() < 60
    monkeypatch.setattr(theme, "desktop_is_dark", lambda: False)
    w.theme.set_choice(theme.FOLLOW)
    assert _plot_background(w.gantt).lightness() > 200


def test_hover_and_selection_outlines_take_the_theme_foreground(qtbot, window):
    from explorer.timeline.gantt import GanttWidget

    w = window
    boxes = (w.gantt._hover_box, w.gantt._sel_box)
    assert all(b.pen().color().lightness() < 60 for b in boxes)
    w.theme.set_choice(theme.DARK)
    assert all(b.pen().color().lightness() > 180 for b in boxes)
    assert w.gantt._sel_box.pen().widthF() > w.gantt._hover_box.pen().widthF()
    fresh = GanttWidget()   # made while dark (the Sharding dock's stacked timelines)
    qtbot.addWidget(fresh)
    assert fresh._hover_box.pen().color().lightness() > 180
    w.theme.set_choice(theme.LIGHT)
    assert all(b.pen().color().lightness() < 60 for b in boxes)



def _median_lightness(widget) -> int:
    """The median lightness of ``widget`` as drawn (a grab, sampled on a grid)."""
    image = widget.grab().toImage()
    values = sorted(image.pixelColor(x, y).lightness()
                    for x in range(0, image.width(), 7) for y in range(0, image.height(), 7))
    return values[len(values) // 2]


def _block_body(window) -> int:
    """The lightness of the first block's body as drawn: just under its coloured header,
    right of its text."""
    from explorer.canvas.items import BLOCK_W, HEADER_H
    rect = window.scene.block_items()[0].sceneBoundingRect()
    spot = window.view.mapFromScene(rect.center().x() + BLOCK_W / 2 - 6,
                                    rect.top() + 4 + HEADER_H + 4)
    return window.view.viewport().grab().toImage().pixelColor(spot).lightness()


def test_canvases_and_the_heat_maps_empty_cells_follow_the_theme(qtbot, window):
    """The model canvas, a block's body, the platform canvas, the profile's label and the
    sharding heat map's empty cells turn dark with the theme, and light again."""
    w = window
    w.resize(1200, 800)
    w.show()
    qtbot.waitExposed(w)
    placement = w.sharding.view.placement
    assert _median_lightness(w.view.viewport()) > 200
    assert _block_body(w) > 200
    assert int(placement.image.lut[0][0]) > 200
    assert _median_lightness(w.profiles.label) > 200
    w.theme.set_choice(theme.DARK)
    qtbot.wait(20)   # the new palette reaches the widgets through the event loop
    assert _median_lightness(w.view.viewport()) < 60
    assert _block_body(w) < 80
    assert int(placement.image.lut[0][0]) < 60
    assert _median_lightness(w.profiles.label) < 80   # a style sheet's colours follow too
    w.tabs.setCurrentWidget(w.platform_page)
    assert _median_lightness(w.platform_page.view.viewport()) < 60
    w.theme.set_choice(theme.LIGHT)
    w.tabs.setCurrentIndex(0)
    qtbot.wait(20)
    assert _median_lightness(w.view.viewport()) > 200
    assert _block_body(w) > 200
    assert _median_lightness(w.profiles.label) > 200
