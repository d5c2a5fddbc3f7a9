"""The Help menu's windows: the user guide, rendered from its Markdown, and the keyboard
shortcuts, read from the window's actions (so the list is always the one in force)."""
from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtCore import QUrl
from PySide6.QtGui import (
    QAction,
    QDesktopServices,
    QImageReader,
    QKeySequence,
    QPalette,
    QTextCursor,
)
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QMainWindow,
    QMenu,
    QTableWidgetItem,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from ..widgets import read_only_table

__all__ = ["USER_GUIDE", "UserGuideDialog", "ShortcutsDialog", "action_shortcuts",
           "plain_text"]

USER_GUIDE = Path(__file__).resolve().parents[2] / "docs" / "user-guide.md"


def plain_text(text: str) -> str:
    """An action's text without its mnemonic ampersands (``"Save &As…"`` -> ``"Save As…"``)."""
    return re.sub(r"&(.)", r"\1", text)


def shortcut_text(action: QAction) -> str:
    """The action's shortcuts as the platform writes them, comma-separated ("" if none)."""
    return ", ".join(s.toString(QKeySequence.NativeText) for s in action.shortcuts()
                     if not s.isEmpty())


def action_shortcuts(window: QMainWindow) -> list[tuple[str, str]]:
    """``(where, keys)`` of every action of ``window`` that has a shortcut: menu actions as
    ``"File ▸ Save"`` in menu order, then any other action by its text."""
    rows: list[tuple[str, str]] = []
    seen: set[QAction] = set()

    def walk(menu: QMenu, trail: list[str]) -> None:
        for action in menu.actions():
            if action.isSeparator():
                continue
            here = trail + [plain_text(action.text())]
            if action.menu() is not None:
                walk(action.menu(), here)
                continue
            seen.add(action)
            keys = shortcut_text(action)
            if keys:
                rows.append((" ▸ ".join(here), keys))

    for top in window.menuBar().actions():
        if top.menu() is not None:
            walk(top.menu(), [plain_text(top.text())])
    for action in window.findChildren(QAction):
        keys = shortcut_text(action)
        if keys and action not in seen:
            seen.add(action)
            rows.append((plain_text(action.text()), keys))
    return rows


class ShortcutsDialog(QDialog):
    """Help ▸ Keyboard Shortcuts: a table of ``(where, keys)`` rows."""

    def __init__(self, rows: list[tuple[str, str]], parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Keyboard Shortcuts")
        self.resize(460, 520)
        self.table = read_only_table(["Action", "Keys"], self)
        self.table.setRowCount(len(rows))
        for r, (where, keys) in enumerate(rows):
            self.table.setItem(r, 0, QTableWidgetItem(where))
            self.table.setItem(r, 1, QTableWidgetItem(keys))
        note = QLabel("Keys of the canvases and the timeline (F, W/S/A/D, +/− row height, "
                      "Up/Down/Page scroll, Ctrl+F to find an op, Enter / Shift+Enter to "
                      "step through what it finds, Delete, Space-drag) are in Help ▸ User "
                      "Guide.", self)
        note.setWordWrap(True)
        note.setForegroundRole(QPalette.PlaceholderText)
        buttons = QDialogButtonBox(QDialogButtonBox.Close, self)
        buttons.rejected.connect(self.reject)
        box = QVBoxLayout(self)
        box.addWidget(self.table, 1)
        box.addWidget(note)
        box.addWidget(buttons)

    def rows(self) -> list[tuple[str, str]]:
        """What the table shows."""
        return [(self.table.item(r, 0).text(), self.table.item(r, 1).text())
                for r in range(self.table.rowCount())]


class UserGuideDialog(QDialog):
    """Help ▸ User Guide: the guide's Markdown rendered (pictures and links to the other
    docs included), with a button to open it in the system's browser or editor."""

    def __init__(self, path: Path = USER_GUIDE, parent: QWidget | None = None):
        super().__init__(parent)
        self.path = Path(path)
        self.setWindowTitle("User Guide")
        self.resize(900, 760)
        self.browser = QTextBrowser(self)
        self.browser.setOpenExternalLinks(True)  # web links: the system browser
        # a .md source renders as Markdown; relative pictures and links resolve beside it
        self.browser.setSource(QUrl.fromLocalFile(str(self.path)))
        self.fit_pictures(840)
        buttons = QDialogButtonBox(QDialogButtonBox.Close, self)
        self.external_button = buttons.addButton("Open Externally",
                                                 QDialogButtonBox.ActionRole)
        self.external_button.setToolTip(f"Open {self.path.name} with the system's viewer")
        self.external_button.clicked.connect(self.open_externally)
        buttons.rejected.connect(self.reject)
        box = QVBoxLayout(self)
        box.addWidget(self.browser, 1)
        box.addWidget(buttons)

    def fit_pictures(self, max_width: int) -> int:
        """Scale the pictures wider than ``max_width`` pixels down to it (the screenshots
        are grabs of a full window); returns how many pictures there are."""
        doc = self.browser.document()
        count = 0
        block = doc.begin()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                fragment = it.fragment()
                it += 1
                image = fragment.charFormat()
                if not image.isImageFormat():
                    continue
                count += 1
                image = image.toImageFormat()
                size = QImageReader(str(self.path.parent / image.name())).size()
                if size.width() <= max_width or size.height() <= 0:
                    continue
                image.setWidth(max_width)
                image.setHeight(size.height() * max_width / size.width())
                cursor = QTextCursor(doc)
                cursor.setPosition(fragment.position())
                cursor.setPosition(fragment.position() + fragment.length(),
                                   QTextCursor.KeepAnchor)
                cursor.setCharFormat(image)
            block = block.next()
        return count

    def open_externally(self) -> bool:
        return QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.path)))
