"""The colours of light and dark: the plots' and the drawn canvases' (model, platform).

Widgets paint with these rather than fixed colours, picked by their palette, so View ▸
Theme turns them dark with the rest of the window; category colours stay the same.
"""
from __future__ import annotations

from dataclasses import dataclass

import weakref
from typing import Callable

import shiboken6
from PySide6.QtCore import QObject
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QWidget

__all__ = ["PlotColors", "LIGHT_PLOTS", "DARK_PLOTS", "CanvasColors", "LIGHT_CANVAS",
           "DARK_CANVAS", "canvas_colors", "plot_colors", "is_dark", "restyle",
           "style_by_theme"]


@dataclass(frozen=True)
class PlotColors:
    """Colours of a pyqtgraph plot: background, axis lines, axis text, and the
    strongest foreground (a selected bar's outline)."""

    background: str
    axis: str
    text: str
    outline: str


LIGHT_PLOTS = PlotColors("#ffffff", "#888888", "#333333", "#000000")
DARK_PLOTS = PlotColors("#1b1e23", "#80868f", "#d5d9df", "#ffffff")


@dataclass(frozen=True)
class CanvasColors:
    """A canvas's background and grid lines; a block's body, its text and its secondary
    text; an edge, and an edge under the pointer; the box behind a link's label."""

    background: QColor
    grid_minor: QColor
    grid_major: QColor
    body: QColor
    text: QColor
    muted: QColor
    edge: QColor
    edge_hover: QColor
    label_box: QColor


LIGHT_CANVAS = CanvasColors(QColor("#f6f7f9"), QColor("#eceef2"), QColor("#dfe2e8"),
                            QColor("#ffffff"), QColor("#1f2430"), QColor("#5f6673"),
                            QColor("#5f6673"), QColor("#5f6673").darker(130),
                            QColor(255, 255, 255, 220))
DARK_CANVAS = CanvasColors(QColor("#1b1e23"), QColor("#22262b"), QColor("#2c3137"),
                           QColor("#2b2f35"), QColor("#e3e5e8"), QColor("#a3a9b2"),
                           QColor("#8d949e"), QColor("#c3c8cf"), QColor(43, 47, 53, 220))


def is_dark(palette: QPalette) -> bool:
    """Whether ``palette`` is a dark one (its window colour is dark)."""
    return palette.color(QPalette.Window).lightness() < 128


def _dark(widget) -> bool:
    return is_dark(widget.palette() if widget is not None else QApplication.palette())


def canvas_colors(widget=None) -> CanvasColors:
    """The canvas colours for ``widget``'s palette (the application's when None)."""
    return DARK_CANVAS if _dark(widget) else LIGHT_CANVAS


def plot_colors(widget=None) -> PlotColors:
    """The plot colours for ``widget``'s palette (the application's when None)."""
    return DARK_PLOTS if _dark(widget) else LIGHT_PLOTS


_FOLLOWERS: "weakref.WeakSet[_StyleFollower]" = weakref.WeakSet()


class _StyleFollower(QObject):
    """Sets its widget's style sheet from the application's palette, now and on every
    :func:`restyle` (a widget whose sheet sets colours no longer follows the palette,
    and gets no event when it changes)."""

    def __init__(self, widget: QWidget, style: Callable[[bool], str]):
        super().__init__(widget)
        self.widget, self.style = widget, style
        _FOLLOWERS.add(self)
        self.apply()

    def apply(self) -> None:
        sheet = self.style(is_dark(QApplication.palette()))
        if self.widget.styleSheet() != sheet:
            self.widget.setStyleSheet(sheet)


def style_by_theme(widget: QWidget, style: Callable[[bool], str]) -> None:
    """Give ``widget`` the style sheet ``style(dark)`` now, and again on every
    :func:`restyle` (a sheet's colours are fixed when it is set)."""
    _StyleFollower(widget, style)


def restyle() -> None:
    """Re-apply every :func:`style_by_theme` sheet: the application's palette changed."""
    for follower in list(_FOLLOWERS):
        if shiboken6.isValid(follower):
            follower.apply()
