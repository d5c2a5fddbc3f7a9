"""Light and dark: the app's palette and the plots' colours.

The theme follows the desktop's colour scheme (``QStyleHints.colorScheme()`` and its
``colorSchemeChanged`` signal) unless the user picks one in View ▸ Theme; the choice is
kept in the window's ``QSettings``.  The category colours of the bars stay the same in
both themes.
"""
from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction, QActionGroup, QColor, QPalette, QPen
from PySide6.QtWidgets import QApplication, QGraphicsItem, QMenu, QWidget

from ..widgets.theme_colors import DARK_PLOTS, LIGHT_PLOTS, PlotColors, is_dark, restyle

__all__ = ["FOLLOW", "LIGHT", "DARK", "PlotColors", "ThemeController", "apply_theme",
           "dark_palette", "desktop_is_dark", "install_theme", "outline_pen", "style_new_plots",
           "style_plots"]

FOLLOW, LIGHT, DARK = "desktop", "light", "dark"
SETTING = "view/theme"
_CHOICES = ((FOLLOW, "Follow &Desktop"), (LIGHT, "&Light"), (DARK, "D&ark"))


OUTLINE = 0x7E51   # QGraphicsItem data key of an outline that follows the theme

_state = {"dark": False, "light": None}   # what is applied; the app's own light palette


def desktop_is_dark() -> bool:
    """Whether the desktop asks for dark colours (False where it does not say)."""
    app = QApplication.instance()
    return app is not None and app.styleHints().colorScheme() == Qt.ColorScheme.Dark


def dark_palette() -> QPalette:
    """A dark palette for every colour group (Fusion draws it faithfully)."""
    p = QPalette()
    roles = {
        QPalette.Window: "#2b2e33", QPalette.WindowText: "#e3e5e8",
        QPalette.Base: "#1f2226", QPalette.AlternateBase: "#262a2f",
        QPalette.ToolTipBase: "#33373d", QPalette.ToolTipText: "#e3e5e8",
        QPalette.PlaceholderText: "#8a9099", QPalette.Text: "#e3e5e8",
        QPalette.Button: "#33373d", QPalette.ButtonText: "#e3e5e8",
        QPalette.BrightText: "#ff6b6b", QPalette.Light: "#454a51",
        QPalette.Midlight: "#3a3e44", QPalette.Mid: "#24272b", QPalette.Dark: "#181a1d",
        QPalette.Shadow: "#0d0e10", QPalette.Highlight: "#3d7bd9",
        QPalette.HighlightedText: "#ffffff", QPalette.Link: "#7fb0ff",
        QPalette.LinkVisited: "#b89cff",
    }
    for role, colour in roles.items():
        p.setColor(role, QColor(colour))
    for role in (QPalette.WindowText, QPalette.Text, QPalette.ButtonText):
        p.setColor(QPalette.Disabled, role, QColor("#7d838c"))
    p.setColor(QPalette.Disabled, QPalette.Button, QColor("#2e3136"))
    p.setColor(QPalette.Disabled, QPalette.Highlight, QColor("#4a4f57"))
    return p


def _light_palette(app: QApplication) -> QPalette:
    """The palette the app had before any dark one (the style's own when that was dark)."""
    if _state["light"] is None:
        own = QPalette(app.palette())
        _state["light"] = app.style().standardPalette() if is_dark(own) else own
    return QPalette(_state["light"])


def _outline(colors: PlotColors, width: float, strong: bool) -> QPen:
    return pg.mkPen(colors.outline if strong else colors.text, width=width, cosmetic=True)


def outline_pen(item, width: float, strong: bool = False) -> QPen:
    """A pen in the theme's foreground for ``item`` (a box drawn around bars), which
    :func:`style_plots` recolours when the theme changes; ``strong``: the strongest
    colour (a selection)."""
    QGraphicsItem.setData(item, OUTLINE, [float(width), bool(strong)])
    return _outline(DARK_PLOTS if _state["dark"] else LIGHT_PLOTS, width, strong)


def style_plots(root: QWidget, colors: PlotColors) -> None:
    """Give every pyqtgraph plot under ``root`` the background and axis colours
    ``colors``, and its :func:`outline_pen` items their outline (the other items drawn
    in them keep their colours)."""
    dark = colors is DARK_PLOTS
    for plot in root.findChildren(pg.PlotWidget):
        if not dark and not plot.property("darkTheme"):
            continue   # a plot never made dark keeps its own light colours
        plot.setBackground(colors.background)
        for axis in plot.getPlotItem().axes.values():
            item = axis["item"]
            item.setPen(pg.mkPen(colors.axis))
            item.setTextPen(pg.mkPen(colors.text))
        for item in plot.scene().items():
            spec = QGraphicsItem.data(item, OUTLINE)   # some items' own .data is their data
            if spec:
                item.setPen(_outline(colors, *spec))
        plot.setProperty("darkTheme", dark)


def style_new_plots(root: QWidget) -> None:
    """Give the plots under ``root``, made after the theme was applied, its colours
    (a plot that passes its own background starts light)."""
    if _state["dark"]:
        style_plots(root, DARK_PLOTS)


def apply_theme(dark: bool) -> None:
    """Make the app and the plots of all its windows dark or light."""
    app = QApplication.instance()
    if app is None:
        return
    light = _light_palette(app)
    if dark != _state["dark"]:
        app.setPalette(dark_palette() if dark else light)
        _state["dark"] = dark
    colors = DARK_PLOTS if dark else LIGHT_PLOTS
    # plots created later start dark too (those that pass their own background keep it)
    own = _state.setdefault("pyqtgraph", {k: pg.getConfigOption(k)
                                          for k in ("background", "foreground")})
    pg.setConfigOptions(**({"background": colors.background, "foreground": colors.text}
                           if dark else own))
    for root in app.topLevelWidgets():
        style_plots(root, colors)
    restyle()


class ThemeController(QObject):
    """View ▸ Theme (Follow Desktop, Light, Dark) on ``window``, persisted in its
    ``settings``; applies the theme now and whenever the desktop's scheme changes.

    Signals
    -------
    sigChanged(bool)  the theme was applied; True when dark
    """

    sigChanged = Signal(bool)

    def __init__(self, window, settings=None):
        super().__init__(window)
        self.window = window
        self.settings = settings if settings is not None else window.settings
        choice = str(self.settings.value(SETTING, FOLLOW))
        self.choice = choice if choice in dict(_CHOICES) else FOLLOW
        self.group = QActionGroup(self)
        self.actions: dict[str, QAction] = {}
        for key, text in _CHOICES:
            action = QAction(text, window)
            action.setCheckable(True)
            action.setChecked(key == self.choice)
            action.triggered.connect(lambda _checked=False, k=key: self.set_choice(k))
            self.group.addAction(action)
            self.actions[key] = action
        QApplication.instance().styleHints().colorSchemeChanged.connect(
            self._on_desktop_changed)
        self.apply()

    def menu_into(self, menu, before: QAction | None = None):
        """Add the Theme submenu to ``menu`` (before ``before``); returns it."""
        sub = QMenu("&Theme", menu)
        sub.addActions(list(self.actions.values()))
        if before is not None:
            menu.insertMenu(before, sub)
        else:
            menu.addMenu(sub)
        return sub

    def is_dark(self) -> bool:
        return self.choice == DARK or (self.choice == FOLLOW and desktop_is_dark())

    def set_choice(self, choice: str) -> None:
        """Follow the desktop (``FOLLOW``) or force ``LIGHT`` or ``DARK``; remembered."""
        if choice not in self.actions:
            raise ValueError(f"unknown theme {choice!r}")
        self.choice = choice
        self.actions[choice].setChecked(True)
        self.settings.setValue(SETTING, choice)
        self.apply()

    def apply(self) -> None:
        dark = self.is_dark()
        apply_theme(dark)
        self.sigChanged.emit(dark)

    def _on_desktop_changed(self, *_args) -> None:
        if self.choice == FOLLOW:
            self.apply()


def install_theme(window) -> ThemeController:
    """Add View ▸ Theme to ``window`` (before Reset Layout) and apply the theme."""
    theme = ThemeController(window)
    view = next((a.menu() for a in window.menuBar().actions()
                 if a.menu() is not None and a.text().replace("&", "") == "View"), None)
    if view is not None:
        reset = next((a for a in view.actions() if a.text().replace("&", "") ==
                      "Reset Layout"), None)
        theme.menu_into(view, reset)
    return theme
