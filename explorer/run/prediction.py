"""Runs the predictor off the GUI thread: debounced after edits, cancellable, one run at a time.

The worker gets a frozen deep copy of the document (never the live one).  A new run cancels
the previous one; results of superseded runs are dropped, so the views only ever see the
newest prediction.
"""
from __future__ import annotations

import copy
from typing import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from predictors.engine.predict import predict
from predictors.profiles import ProfileError
from predictors.scenario.format import ScenarioError

from ..workers import BackgroundRunner

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


class PredictionController(QObject):
    """Predicts the document in a worker thread ``debounce_ms`` after its last change.

    Parameters
    ----------
    document : object with ``snapshot() -> dict`` and a ``sigChanged`` signal, optional
    predict_fn : callable like :func:`predictors.engine.predict.predict` (tests inject fakes)
    debounce_ms : delay after the last edit before a run starts
    profile : what ``predict_fn`` gets as ``profile=`` (None: not passed, i.e. automatic)
    overheads : what ``predict_fn`` gets as ``overheads=``, an
        :class:`~predictors.profiles.OverheadTable` (None: not passed, the profile's)

    Signals
    -------
    sigStarted()                   a run began (the previous result is now stale)
    sigProgress(float, str)        fraction done and stage name
    sigFinished(object)            the :class:`~predictors.engine.predict.Prediction`
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
        # newest run wins; GC paused while a worker holds torch objects (a collection
        # the GUI thread starts mid-prediction can crash the process)
        self.runner = BackgroundRunner((ScenarioError, ProfileError),
                                       "Prediction failed", parent=self, describe=error_text)
        self.runner.sigProgress.connect(self.sigProgress)
        self.runner.sigFinished.connect(self._on_done)
        self.runner.sigFailed.connect(self.sigFailed)
        self.runner.sigCancelled.connect(self.sigCancelled)
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

    @property
    def last_error(self) -> BaseException | None:
        """The exception of the last failed run (None after a success)."""
        return self.runner.last_error

    def start(self, snapshot: dict | None = None) -> int:
        """Cancel any running prediction and start one now; returns the run id."""
        self._timer.stop()
        if snapshot is None:
            if self.document is None:
                raise RuntimeError("no document to predict")
            snapshot = self.document.snapshot()
        snapshot = copy.deepcopy(snapshot)  # frozen: later edits never reach the worker
        # Only explicit choices are passed, so predict functions without ``profile`` or
        # ``overheads`` keywords still work.
        extra = {"profile": self.profile} if self.profile is not None else {}
        if self.overheads is not None:
            extra["overheads"] = self.overheads
        predict_fn = self.predict_fn
        self.sigStarted.emit()
        return self.runner.run(lambda progress, cancelled: predict_fn(
            snapshot, progress=progress, cancelled=cancelled, **extra))

    def cancel(self) -> bool:
        """Cancel the pending or running prediction; True if there was one."""
        pending = self._timer.isActive()
        self._timer.stop()
        if self.runner.cancel():   # says so itself
            return True
        if pending:
            self.sigCancelled.emit()
        return pending

    def is_running(self) -> bool:
        return self.runner.is_running()

    def is_pending(self) -> bool:
        return self._timer.isActive()

    def shutdown(self, timeout_ms: int = 10000) -> bool:
        """Cancel everything and join the worker threads; True if all of them ended."""
        self._timer.stop()
        return self.runner.shutdown(timeout_ms)

    def _on_done(self, prediction) -> None:
        self.last_prediction = prediction
        self.sigFinished.emit(prediction)
