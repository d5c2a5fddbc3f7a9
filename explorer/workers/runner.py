"""Long work off the GUI thread: progress, cancel, and one clear outcome per run.

A :class:`BackgroundRunner` runs ``call(progress=..., cancelled=...)`` in a ``QThread``
(predictions, calibrations, rankings, sweeps, trace loading).  The call reports progress
through ``progress(fraction, stage)``, polls ``cancelled()`` and stops by raising
:class:`~predictors.utils.progress.Cancelled`.

Two policies share this lifecycle:

- *newest run wins* (the default): starting a run abandons the one in progress (its result
  is dropped when it lands), so a user who asks again never sees an older answer; a cancel
  is reported at once.
- *exclusive* (``exclusive=True``, the calibration): one run at a time, a second is refused
  while a thread still works, and a cancel is reported only once the call has stopped, so
  two runs never overlap (two calibrations would measure each other).

Expected errors (bad input) come back as their message; anything else as its type and
message, with the traceback on stderr.
"""
from __future__ import annotations

import threading
import time
import traceback
from typing import Callable

from PySide6.QtCore import QObject, QThread, Signal

from predictors.utils.gc_pause import pause_collection, resume_collection
from predictors.utils.progress import Cancelled

__all__ = ["BackgroundRunner"]

# workers that outlived their runner's shutdown, kept alive until they finish
_STILL_RUNNING: set = set()


class _Worker(QThread):
    sigProgress = Signal(int, float, str)
    sigDone = Signal(int, object)
    sigError = Signal(int, str, object)
    sigAborted = Signal(int)

    def __init__(self, run_id: int, call: Callable, cancel_event: threading.Event,
                 runner: "BackgroundRunner", parent=None):
        super().__init__(parent)
        self.run_id, self.call, self.cancel_event = run_id, call, cancel_event
        self.expected, self.describe = runner.expected_errors, runner.describe

    def run(self) -> None:  # the worker thread
        rid = self.run_id
        try:
            result = self.call(
                progress=lambda f, s: self.sigProgress.emit(rid, float(f), str(s)),
                cancelled=self.cancel_event.is_set)
        except Exception as exc:  # a bug must not take the app down; say what happened
            # An error raised while stopping on request is part of the cancel.
            if isinstance(exc, Cancelled) or self.cancel_event.is_set():
                self.sigAborted.emit(rid)
                return
            if not isinstance(exc, self.expected):
                traceback.print_exc()
            self.sigError.emit(rid, self.describe(exc), exc)
        else:
            # A call that returns has finished: it checks ``cancelled()`` itself before
            # any step it must not take once cancelled.
            self.sigDone.emit(rid, result)


class BackgroundRunner(QObject):
    """One kind of long work, run in worker threads.

    Parameters
    ----------
    expected_errors : exception types whose message alone is the failure's line
    failure_prefix : what the line of any other failure starts with
    parent : the owning QObject
    pause_gc : no automatic garbage collection while a worker runs (work with torch)
    describe : ``describe(exc) -> str`` makes the failure's line; by default an expected
        error's message, anything else ``failure_prefix: Type: message``
    exclusive : one run at a time, cancel reported once the call stopped (see the module)

    Signals
    -------
    sigProgress(float, str)   fraction and stage
    sigFinished(object)       the call's result
    sigFailed(str)            one line saying what went wrong (``last_error`` holds the
                              exception)
    sigCancelled()
    """

    sigProgress = Signal(float, str)
    sigFinished = Signal(object)
    sigFailed = Signal(str)
    sigCancelled = Signal()

    def __init__(self, expected_errors: tuple, failure_prefix: str,
                 parent: QObject | None = None, pause_gc: bool = True,
                 describe: Callable[[BaseException], str] | None = None,
                 exclusive: bool = False):
        super().__init__(parent)
        self.pause_gc = pause_gc  # work with torch: see run()
        self.expected_errors = expected_errors
        self.failure_prefix = failure_prefix
        self.describe = describe or self._describe
        self.exclusive = exclusive
        self.last_error: BaseException | None = None
        self._run_id = 0
        # the run whose outcome is reported: its id and cancel flag (None: none)
        self._current: tuple[int, threading.Event] | None = None
        self._threads: set[_Worker] = set()

    def run(self, call: Callable) -> int:
        """Start ``call(progress=, cancelled=)``; returns the run id.

        Newest run wins: a run in progress is abandoned.  Exclusive: raises
        ``RuntimeError`` while a run is in progress."""
        if self.exclusive and self.is_running():
            raise RuntimeError("a run is already in progress")
        self._abandon()
        self._run_id += 1
        cancel_event = threading.Event()
        th = _Worker(self._run_id, call, cancel_event, self)
        th.sigProgress.connect(self._on_progress)
        th.sigDone.connect(self._on_done)
        th.sigError.connect(self._on_error)
        th.sigAborted.connect(self._on_aborted)
        th.finished.connect(self._reap)
        self._threads.add(th)
        self._current = (self._run_id, cancel_event)
        # No automatic garbage collection until this worker has stopped (resumed in
        # _reap, on this thread): a collection the GUI thread starts while a worker holds
        # torch objects can crash (see predictors.utils.gc_pause; seen with rankings too).
        if self.pause_gc:
            pause_collection()
        th.start()
        return self._run_id

    def cancel(self) -> bool:
        """Ask the run in progress to stop; True if there was one.

        Newest run wins: the run is abandoned and ``sigCancelled`` comes at once.
        Exclusive: ``sigCancelled`` comes when the call has stopped."""
        if self._current is None:
            return False
        if self.exclusive:
            self._current[1].set()
            return True
        self._abandon()
        self.sigCancelled.emit()
        return True

    def is_running(self) -> bool:
        """Newest run wins: whether a run's outcome is still to come.  Exclusive: whether
        a worker thread still works (a cancelled one included)."""
        if self.exclusive:
            return any(th.isRunning() for th in self._threads)
        return self._current is not None

    def shutdown(self, timeout_ms: int = 10000) -> bool:
        """Cancel every run and wait for them, ``timeout_ms`` in all; True if all ended.

        A thread that has not stopped by then is kept referenced until it finishes: a
        QThread destroyed while it runs aborts the process.  Newest run wins: the
        outcome of the run in progress is dropped.  Exclusive: it is still reported."""
        if self.exclusive:
            if self._current is not None:
                self._current[1].set()
        else:
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
            self._current[1].set()
            self._current = None

    def _take(self, rid: int) -> bool:
        """Whether ``rid`` is the reported run; if so it is over."""
        if self._current is not None and self._current[0] == rid:
            self._current = None
            return True
        return False

    def _on_progress(self, rid, f, stage):
        if self._current is not None and self._current[0] == rid:
            self.sigProgress.emit(f, stage)

    def _on_done(self, rid, result):
        if self._take(rid):
            self.last_error = None
            self.sigFinished.emit(result)

    def _on_error(self, rid, message, exc):
        if self._take(rid):
            self.last_error = exc
            self.sigFailed.emit(message)

    def _on_aborted(self, rid):
        if self._take(rid):
            self.sigCancelled.emit()

    def _reap(self):
        th = self.sender()
        if isinstance(th, _Worker) and not th.isRunning() and th in self._threads:
            self._threads.discard(th)
            th.deleteLater()
            if self.pause_gc:
                resume_collection()  # the pause run() took for this worker
