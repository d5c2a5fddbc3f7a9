"""Runs the predictor off the GUI thread: debounced after edits, cancellable, one run at a time.

The worker gets a frozen deep copy of the document (never the live one).  A new run cancels
the previous one; results of superseded runs are dropped, so the views only ever see the
newest prediction.
"""
from __future__ import annotations

import copy
import threading
import traceback
from typing import Callable

from PySide6.QtCore import QObject, QThread, QTimer, Signal

from predictors.gc_pause import collection_paused, pause_collection, resume_collection
from predictors.predict import Cancelled, predict
from predictors.profiles import ProfileError
from predictors.scenario import ScenarioError

__all__ = ["PredictionController", "error_text"]


def error_text(exc: BaseException) -> str:
    """One line naming the field at fault where there is one."""
    if isinstance(exc, ScenarioError):
        issues = getattr(exc, "issues", [])
        if issues:
            head = "; ".join(str(i) for i in issues[:3])
            more = f" (and {len(issues) - 3} more)" if len(issues) > 3 else ""
            return f"Invalid scenario: {head}{more}"
        return f"Invalid scenario: {exc}"
    if isinstance(exc, ProfileError):  # e.g. a CPU profile chosen for a GPU platform
        return f"Profile: {exc}"
    return f"Prediction failed: {type(exc).__name__}: {exc}"


class _PredictThread(QThread):
    """One prediction run; its signals carry the run id so stale runs can be ignored."""

    sigProgress = Signal(int, float, str)
    sigDone = Signal(int, object)
    sigError = Signal(int, str, object)
    sigAborted = Signal(int)

    def __init__(self, run_id: int, snapshot: dict, predict_fn: Callable, parent=None,
                 profile=None, overheads=None):
        super().__init__(parent)
        self.run_id = run_id
        self.snapshot = snapshot
        self.predict_fn = predict_fn
        self.profile = profile
        self.overheads = overheads
        self.cancel_event = threading.Event()

    def run(self) -> None:  # runs in the worker thread
        rid = self.run_id
        # Only explicit choices are passed, so predict functions without ``profile`` or
        # ``overheads`` keywords still work.
        extra = {"profile": self.profile} if self.profile is not None else {}
        if self.overheads is not None:
            extra["overheads"] = self.overheads
        try:
            with collection_paused():  # see predictors.gc_pause
                result = self.predict_fn(
                    self.snapshot,
                    progress=lambda f, stage: self.sigProgress.emit(rid, float(f),
                                                                     str(stage)),
                    cancelled=self.cancel_event.is_set, **extra)
        except Cancelled:
            self.sigAborted.emit(rid)
        except Exception as exc:  # every failure is reported, none kills the app
            if not isinstance(exc, (ScenarioError, ProfileError)):
                traceback.print_exc()
            self.sigError.emit(rid, error_text(exc), exc)
        else:
            if self.cancel_event.is_set():
                self.sigAborted.emit(rid)
            else:
                self.sigDone.emit(rid, result)


class PredictionController(QObject):
    """Predicts the document in a worker thread ``debounce_ms`` after its last change.

    Parameters
    ----------
    document : object with ``snapshot() -> dict`` and a ``sigChanged`` signal, optional
    predict_fn : callable like :func:`predictors.predict.predict` (tests inject fakes)
    debounce_ms : delay after the last edit before a run starts
    profile : what ``predict_fn`` gets as ``profile=`` (None: not passed, i.e. automatic)
    overheads : what ``predict_fn`` gets as ``overheads=``, an
        :class:`~predictors.profiles.OverheadTable` (None: not passed, the profile's)

    Signals
    -------
    sigStarted()                   a run began (the previous result is now stale)
    sigProgress(float, str)        fraction done and stage name
    sigFinished(object)            the :class:`~predictors.predict.Prediction`
    sigFailed(str)                 one-line error; ``last_error`` holds the exception
    sigCancelled()                 the user cancelled the run
    """

    sigStarted = Signal()
    sigProgress = Signal(float, str)
    sigFinished = Signal(object)
    sigFailed = Signal(str)
    sigCancelled = Signal()

    def __init__(self, document=None, predict_fn: Callable | None = None,
                 debounce_ms: int = 400, parent: QObject | None = None, profile=None,
                 overheads=None):
        super().__init__(parent)
        self.predict_fn = predict_fn or predict
        self.profile = profile
        self.overheads = overheads
        self.document = None
        self.last_prediction = None
        self.last_error: BaseException | None = None
        self._run_id = 0
        self._current: _PredictThread | None = None
        self._threads: set[_PredictThread] = set()
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(int(debounce_ms))
        self._timer.timeout.connect(self.start)
        if document is not None:
            self.set_document(document)

    # --- public API -----------------------------------------------------------------------

    def set_document(self, document) -> None:
        """Follow ``document``: every ``sigChanged`` (and ``sigReset``) schedules a run."""
        if self.document is not None:
            for name in ("sigChanged", "sigReset"):
                sig = getattr(self.document, name, None)
                if sig is not None:
                    try:
                        sig.disconnect(self.schedule)
                    except (RuntimeError, TypeError):
                        pass
        self.document = document
        for name in ("sigChanged", "sigReset"):
            sig = getattr(document, name, None)
            if sig is not None:
                sig.connect(self.schedule)

    def set_profile(self, profile) -> None:
        """Predict with ``profile`` from now on: None (the bundled profile of the platform's
        device), ``"roofline"``, a profile name or path, or a ``DeviceProfile``.  A change
        schedules a run when there is a document."""
        if profile is self.profile or (isinstance(profile, str) and profile == self.profile):
            return
        self.profile = profile
        if self.document is not None:
            self.schedule()

    def set_overheads(self, overheads) -> None:
        """Predict with these CPU overheads (an :class:`~predictors.profiles.OverheadTable`,
        e.g. measured from the user's trace) instead of the profile's; None goes back to
        the profile's.  A change schedules a run when there is a document.  A session
        setting, like the profile: never part of the scenario."""
        if overheads is self.overheads:
            return
        self.overheads = overheads
        if self.document is not None:
            self.schedule()

    def schedule(self, *args) -> None:
        """(Re)start the debounce timer; the run starts when edits pause."""
        self._timer.start()

    def start(self, snapshot: dict | None = None) -> int:
        """Cancel any running prediction and start one now; returns the run id."""
        self._timer.stop()
        if snapshot is None:
            if self.document is None:
                raise RuntimeError("no document to predict")
            snapshot = self.document.snapshot()
        snapshot = copy.deepcopy(snapshot)  # frozen: later edits never reach the worker
        self._abandon_current()
        self._run_id += 1
        th = _PredictThread(self._run_id, snapshot, self.predict_fn, profile=self.profile,
                            overheads=self.overheads)
        th.sigProgress.connect(self._on_progress)
        th.sigDone.connect(self._on_done)
        th.sigError.connect(self._on_error)
        th.sigAborted.connect(self._on_aborted)
        th.finished.connect(self._on_thread_finished)
        self._threads.add(th)
        self._current = th
        self.sigStarted.emit()
        # Paused here and resumed in _reap, on this (GUI) thread once the worker has
        # stopped: a collection the GUI thread starts in the instant the worker leaves
        # its own pause, while torch objects of the worker are still alive, crashed the
        # GUI tests (a segfault in "Garbage-collecting", session 5).
        pause_collection()
        th.start()
        return self._run_id

    def cancel(self) -> bool:
        """Cancel the pending or running prediction; True if there was one."""
        pending = self._timer.isActive()
        self._timer.stop()
        running = self._current is not None
        self._abandon_current()
        if running or pending:
            self.sigCancelled.emit()
        return running or pending

    def is_running(self) -> bool:
        return self._current is not None

    def is_pending(self) -> bool:
        return self._timer.isActive()

    def shutdown(self, timeout_ms: int = 10000) -> bool:
        """Cancel everything and join the worker threads; True if all of them ended."""
        self._timer.stop()
        self._abandon_current()
        ok = True
        for th in list(self._threads):
            th.cancel_event.set()
            ok = th.wait(timeout_ms) and ok
            if not th.isRunning():
                self._reap(th)
        return ok

    # --- internals --------------------------------------------------------------------------

    def _abandon_current(self) -> None:
        if self._current is not None:
            self._current.cancel_event.set()
            self._current = None

    def _is_current(self, rid: int) -> bool:
        return self._current is not None and self._current.run_id == rid

    def _on_progress(self, rid: int, fraction: float, stage: str) -> None:
        if self._is_current(rid):
            self.sigProgress.emit(fraction, stage)

    def _on_done(self, rid: int, prediction) -> None:
        if self._is_current(rid):
            self._current = None
            self.last_prediction = prediction
            self.last_error = None
            self.sigFinished.emit(prediction)

    def _on_error(self, rid: int, message: str, exc) -> None:
        if self._is_current(rid):
            self._current = None
            self.last_error = exc
            self.sigFailed.emit(message)

    def _on_aborted(self, rid: int) -> None:
        if self._is_current(rid):  # cancelled from inside predict_fn, not by us
            self._current = None
            self.sigCancelled.emit()

    def _on_thread_finished(self) -> None:
        th = self.sender()
        if isinstance(th, _PredictThread):
            self._reap(th)

    def _reap(self, th: _PredictThread) -> None:
        if th in self._threads and not th.isRunning():
            self._threads.discard(th)
            th.deleteLater()
            resume_collection()  # the pause start() took for this thread
