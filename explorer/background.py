"""Long work off the GUI thread: progress, cancel, and the newest run wins.

A :class:`BackgroundRunner` runs ``call(progress=..., cancelled=...)`` in a ``QThread``
(predictions, rankings, sweeps, trace loading).
Starting a run abandons the one in progress (its result is dropped when it lands), so a
user who asks again never sees an older answer.  Expected errors (bad input) come back as
their message; anything else as its type and message, with the traceback on stderr.
"""
from __future__ import annotations

import threading
import time
import traceback
from typing import Callable

from PySide6.QtCore import QObject, QThread, Signal

from predictors.utils.gc_pause import pause_collection, resume_collection

__all__ = ["BackgroundRunner"]

# workers that outlived their runner's shutdown, kept alive until they finish
_STILL_RUNNING: set = set()


class _Worker(QThread):
    sigProgress = Signal(int, float, str)
    sigDone = Signal(int, object)
    sigError = Signal(int, str, object)
    sigAborted = Signal(int)

    def __init__(self, run_id: int, call: Callable, runner: "BackgroundRunner", parent=None):
        super().__init__(parent)
        self.run_id, self.call = run_id, call
        self.cancelled_types, self.expected = runner.cancelled_types, runner.expected_errors
        self.describe = runner.describe
        self.cancel_event = threading.Event()

    def run(self) -> None:  # the worker thread
        rid = self.run_id
        try:
            result = self.call(
                progress=lambda f, s: self.sigProgress.emit(rid, float(f), str(s)),
                cancelled=self.cancel_event.is_set)
        except self.cancelled_types:
            self.sigAborted.emit(rid)
        except Exception as exc:  # a bug must not take the app down; say what happened
            if not isinstance(exc, self.expected):
                traceback.print_exc()
            self.sigError.emit(rid, self.describe(exc), exc)
        else:
            if self.cancel_event.is_set():
                self.sigAborted.emit(rid)
            else:
                self.sigDone.emit(rid, result)


class BackgroundRunner(QObject):
    """One kind of long work, run in worker threads, newest run wins.

    Signals
    -------
    sigProgress(float, str)   fraction and stage
    sigFinished(object)       the call's result
    sigFailed(str)            one line saying what went wrong (``last_error`` holds the
                              exception)
    sigCancelled()

    ``describe(exc)`` makes that line; by default an expected error's message, anything
    else ``failure_prefix: Type: message``.
    """

    sigProgress = Signal(float, str)
    sigFinished = Signal(object)
    sigFailed = Signal(str)
    sigCancelled = Signal()

    def __init__(self, cancelled_types: tuple, expected_errors: tuple, failure_prefix: str,
                 parent: QObject | None = None, pause_gc: bool = True,
                 describe: Callable[[BaseException], str] | None = None):
        super().__init__(parent)
        self.pause_gc = pause_gc  # work with torch: see run()
        self.cancelled_types, self.expected_errors = cancelled_types, expected_errors
        self.failure_prefix = failure_prefix
        self.describe = describe or self._describe
        self.last_error: BaseException | None = None
        self._run_id = 0
        self._current: _Worker | None = None
        self._threads: set[_Worker] = set()

    def run(self, call: Callable) -> int:
        """Start ``call(progress=, cancelled=)`` (abandoning a run in progress); returns
        the run id."""
        self._abandon()
        self._run_id += 1
        th = _Worker(self._run_id, call, self)
        th.sigProgress.connect(self._on_progress)
        th.sigDone.connect(self._on_done)
        th.sigError.connect(self._on_error)
        th.sigAborted.connect(self._on_aborted)
        th.finished.connect(self._reap)
        self._threads.add(th)
        self._current = th
        # No automatic garbage collection until this worker has stopped (resumed in
        # _reap, on this thread): a collection the GUI thread starts while a worker holds
        # torch objects can crash (see predictors.utils.gc_pause; seen with rankings too).
        if self.pause_gc:
            pause_collection()
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
        """Cancel every run and wait for them, ``timeout_ms`` in all.  A thread that has
        not stopped by then is kept referenced until it finishes: a QThread destroyed
        while it runs aborts the process."""
        self._abandon()
        deadline = time.monotonic() + timeout_ms / 1e3
        for th in self._threads:
            th.cancel_event.set()
        ok = True
        for th in list(self._threads):
            left = max(0, int((deadline - time.monotonic()) * 1e3))
            if not th.wait(left):
                ok = False
                _STILL_RUNNING.add(th)
                th.finished.connect(lambda th=th: _STILL_RUNNING.discard(th))
            else:  # stopped: reap it now, its finished signal may never be delivered
                self._threads.discard(th)
                th.deleteLater()
                if self.pause_gc:
                    resume_collection()
        return ok

    def _describe(self, exc: BaseException) -> str:
        if isinstance(exc, self.expected_errors):
            return str(exc)
        return f"{self.failure_prefix}: {type(exc).__name__}: {exc}"

    def _abandon(self) -> None:
        if self._current is not None:
            self._current.cancel_event.set()
            self._current = None

    def _mine(self, rid: int) -> bool:
        return self._current is not None and self._current.run_id == rid

    def _on_progress(self, rid, f, stage):
        if self._mine(rid):
            self.sigProgress.emit(f, stage)

    def _on_done(self, rid, result):
        if self._mine(rid):
            self._current = None
            self.last_error = None
            self.sigFinished.emit(result)

    def _on_error(self, rid, message, exc):
        if self._mine(rid):
            self._current = None
            self.last_error = exc
            self.sigFailed.emit(message)

    def _on_aborted(self, rid):
        if self._mine(rid):
            self._current = None
            self.sigCancelled.emit()

    def _reap(self):
        th = self.sender()
        if isinstance(th, _Worker) and not th.isRunning() and th in self._threads:
            self._threads.discard(th)
            th.deleteLater()
            if self.pause_gc:
                resume_collection()  # the pause run() took for this worker
