"""Work that is never lost: the design being edited is written to the app's own data
folder while it has unsaved changes (two seconds after a burst of edits ends, and every
half minute), and offered back the next time its file (or an untitled design) is opened
after a crash.

One file per design, named by a hash of its path (``untitled`` for a new design):
``{"format": "ml-dse/autosave", "path": ..., "saved_at": ..., "scenario": {...}}``.
Saving, or closing without saving after the user said so, removes it.
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from PySide6.QtCore import QObject, QStandardPaths, QTimer

from predictors.scenario.format import scenario_to_json
from predictors.utils.fileio import atomic_write_bytes

__all__ = ["Autosave", "default_autosave_folder", "AUTOSAVE_FORMAT"]

AUTOSAVE_FORMAT = "ml-dse/autosave"
INTERVAL_MS = 30_000
BURST_MS = 2_000   # edits further apart than this end a burst, which is then written


def default_autosave_folder() -> Path:
    """``<AppDataLocation>/autosave``: the application's own data, never the user's files."""
    base = QStandardPaths.writableLocation(QStandardPaths.AppDataLocation) or \
        str(Path.home() / ".ml-dse")
    return Path(base) / "autosave"


class Autosave(QObject):
    """Writes ``editor``'s document ``burst_ms`` after its last edit, and every
    ``interval_ms``, while it has unsaved changes."""

    def __init__(self, editor, folder: Path, path_of, interval_ms: int = INTERVAL_MS,
                 burst_ms: int = BURST_MS, parent: QObject | None = None):
        super().__init__(parent)
        self.editor, self.folder, self._path_of = editor, Path(folder), path_of
        self._written_index: int | None = None
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.write_now)
        self.timer.start()
        self.burst = QTimer(self)
        self.burst.setSingleShot(True)
        self.burst.setInterval(burst_ms)
        self.burst.timeout.connect(self.write_now)
        editor.undo_stack.indexChanged.connect(self._edited)

    def _edited(self, _index: int) -> None:
        if self.timer.isActive():  # not stopped
            self.burst.start()  # restarts: the burst ends burst_ms after its last edit

    def stop(self) -> None:
        """No more writes: the window is closing (a later one would bring back an
        autosave the user just discarded)."""
        self.timer.stop()
        self.burst.stop()

    def file_for(self, path: Path | None) -> Path:
        key = hashlib.sha1(str(path).encode()).hexdigest()[:16] if path else "untitled"
        return self.folder / f"{key}.json"

    def write_now(self) -> Path | None:
        """Write the document if it changed since the last write and is not saved."""
        stack = self.editor.undo_stack
        if not self.editor.is_modified() or stack.index() == self._written_index:
            return None
        path = self._path_of()
        doc = {"format": AUTOSAVE_FORMAT, "path": str(path) if path else None,
               "saved_at": time.time(),
               "scenario": json.loads(scenario_to_json(self.editor.document.snapshot()))}
        target = self.file_for(path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(target, json.dumps(doc).encode())
        except OSError:
            return None  # the next tick tries again; the user's file is untouched
        self._written_index = stack.index()
        return target

    def discard(self, path: Path | None) -> None:
        """Forget the autosave of ``path`` (it was saved, or the user declined it)."""
        self.file_for(path).unlink(missing_ok=True)
        self._written_index = None

    def pending(self, path: Path | None) -> dict | None:
        """The autosave of ``path`` when it is newer than the file (any for an untitled
        design), else None."""
        target = self.file_for(path)
        try:
            doc = json.loads(target.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(doc, dict) or doc.get("format") != AUTOSAVE_FORMAT \
                or not isinstance(doc.get("scenario"), dict):
            return None
        try:
            newer = path is None or float(doc.get("saved_at", 0)) > Path(path).stat().st_mtime
        except OSError:
            newer = True  # the file is gone: the autosave is all there is
        return doc if newer else None
