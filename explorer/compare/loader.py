"""Loads recorded traces off the GUI thread, with progress and cancel; the newest load wins."""
from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QObject, Signal

from predictors.traces import TraceError, load_recording

from ..workers import BackgroundRunner

__all__ = ["TraceLoader"]


class TraceLoader(BackgroundRunner):
    """Reads Kineto files (the ranks of one job) in a worker thread.

    Signals
    -------
    sigStarted(list)          paths being loaded
    sigProgress(float, str)   fraction and stage
    sigFinished(object)       the :class:`~predictors.traces.Recording`
    sigFailed(str)            one line naming the file and the problem
    sigCancelled()
    """

    sigStarted = Signal(list)

    def __init__(self, load_fn: Callable | None = None, parent: QObject | None = None):
        super().__init__((TraceError,), "Could not load the trace", parent,
                         pause_gc=False)  # JSON only, no torch
        self.load_fn = load_fn or load_recording

    def load(self, paths: list[str]) -> int:
        """Start loading ``paths`` (cancelling a load in progress); returns the run id."""
        paths = [str(p) for p in paths]
        self._abandon()
        self.sigStarted.emit(list(paths))
        return self.run(lambda progress, cancelled: self.load_fn(
            paths, progress=progress, cancelled=cancelled))
