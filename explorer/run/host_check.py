"""This host's speed, checked once in the background (a few seconds) so that the bundled
CPU profile is scaled to it (:mod:`predictors.calibrate.host_check`), as ``predict`` on
the command line does before its first CPU prediction."""
from __future__ import annotations

import sys
import threading
from typing import Callable

from PySide6.QtCore import QObject, Signal

__all__ = ["HostCheck"]


class HostCheck(QObject):
    """Takes the check on a thread of its own when none is cached.

    Signals
    -------
    sigChecked()    the check was taken and cached: predictions scale by it from now on
    """

    sigChecked = Signal()

    def __init__(self, parent: QObject | None = None,
                 ensure: Callable[[int], bool] | None = None):
        super().__init__(parent)
        self._ensure = ensure
        self.thread: threading.Thread | None = None

    def after_first_prediction(self, controller, threads: int = 1) -> None:
        """Start once ``controller``'s first prediction has ended, so that the check
        measures an idle machine rather than the app's own start-up."""
        def first(*_):
            controller.sigFinished.disconnect(first)
            controller.sigFailed.disconnect(first)
            self.start(threads)

        controller.sigFinished.connect(first)
        controller.sigFailed.connect(first)

    def start(self, threads: int = 1) -> bool:
        """Start the check for ``threads`` threads; False when none is needed."""
        from predictors.calibrate.host_check import ensure_host_check, needs_host_check

        if self._ensure is None and not needs_host_check(threads):
            return False
        ensure = self._ensure or ensure_host_check

        def work() -> None:
            try:
                taken = ensure(threads)
            except Exception as exc:   # the profile stays unscaled; the app goes on
                print(f"explorer: the host check failed: {exc}", file=sys.stderr)
                return
            if taken:
                try:
                    self.sigChecked.emit()
                except RuntimeError:   # the window closed meanwhile
                    pass

        self.thread = threading.Thread(target=work, name="host-check", daemon=True)
        self.thread.start()
        return True
