"""The main window, its menus, the Help dialogs, and how the command line starts it."""
from .main_window import APP_NAME, DEFAULT_SCENARIO, MainWindow

__all__ = ["MainWindow", "APP_NAME", "DEFAULT_SCENARIO"]
