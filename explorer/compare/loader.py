"""Loads recorded traces off the GUI thread, with progress and cancel; the newest load wins."""
from __future__ import annotations

import threading
import traceback
from typing import Callable

from PySide6.QtCore import QObject, QThread, Signal

from predictors.traces import Cancelled, TraceError, load_recording

__all__ = ["TraceLoader"]


class _LoadThread(QThread):
    sigProgress = Signal(int, float, str)
    sigDone = Signal(int, object)
    sigError = Signal(int, str)
    sigAborted = Signal(int)

    def __init__(self, run_id: int, paths: list[str], load_fn: Callable, parent=None):
        super().__init__(parent)
        self.run_id, self.paths, self.load_fn = run_id, paths, load_fn
        self.cancel_event = threading.Event()

    def run(self) -> None:  # the worker thread
        rid = self.run_id
        try:
            rec = self.load_fn(self.paths,
                               progress=lambda f, s: self.sigProgress.emit(rid, float(f), str(s)),
                               cancelled=self.cancel_event.is_set)
        except Cancelled:
            self.sigAborted.emit(rid)
        except TraceError as exc:
            self.sigError.emit(rid, str(exc))
        except Exception as exc:  # a bug must not take the app down; say what happened
            traceback.print_exc()
            self.sigError.emit(rid, f"Could not load the trace: {type(exc).__name__}: {exc}")
        else:
            if self.cancel_event.is_set():
                self.sigAborted.emit(rid)
            else:
                self.sigDone.emit(rid, rec)


class TraceLoader(QObject):
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
    sigProgress = Signal(float, str)
    sigFinished = Signal(object)
    sigFailed = Signal(str)
    sigCancelled = Signal()

    def __init__(self, load_fn: Callable | None = None, parent: QObject | None = None):
        super().__init__(parent)
        self.load_fn = load_fn or load_recording
        self._run_id = 0
        self._current: _LoadThread | None = None
        self._threads: set[_LoadThread] = set()

    def load(self, paths: list[str]) -> int:
        """Start loading ``paths`` (cancelling a load in progress); returns the run id."""
        self._abandon()
        self._run_id += 1
        th = _LoadThread(self._run_id, [str(p) for p in paths], self.load_fn)
        th.sigProgress.connect(self._on_progress)
        th.sigDone.connect(self._on_done)
        th.sigError.connect(self._on_error)
        th.sigAborted.connect(self._on_aborted)
        th.finished.connect(self._reap)
        self._threads.add(th)
        self._current = th
        self.sigStarted.emit(list(th.paths))
        th.start()
        return self._run_id

    def cancel(self) -> bool:
        running = self._current is not None
        self._abandon()
        if running:
            self.sigCancelled.emit()
        return running

    def is_running(self) -> bool:
        return self._current is not None

    def shutdown(self, timeout_ms: int = 10000) -> bool:
        self._abandon()
        ok = True
        for th in list(self._threads):
            th.cancel_event.set()
            ok = th.wait(timeout_ms) and ok
        return ok

    def _abandon(self) -> None:
        if self._current is not None:
            self._current.cancel_event.set()
            self._current = None

    def _mine(self, rid: int) -> bool:
        return self._current is not None and self._current.run_id == rid

    def _on_progress(self, rid, f, stage):
        if self._mine(rid):
            self.sigProgress.emit(f, stage)

    def _on_done(self, rid, rec):
        if self._mine(rid):
            self._current = None
            self.sigFinished.emit(rec)

    def _on_error(self, rid, message):
        if self._mine(rid):
            self._current = None
            self.sigFailed.emit(message)

    def _on_aborted(self, rid):
        if self._mine(rid):
            self._current = None
            self.sigCancelled.emit()

    def _reap(self):
        th = self.sender()
        if isinstance(th, _LoadThread) and not th.isRunning():
            self._threads.discard(th)
            th.deleteLater()
