"""Long work reports its progress and stops when asked.

Every long task of the core (a prediction, a sweep, reading a trace, a calibration) takes
two optional callbacks: ``progress(fraction, stage)`` and ``cancelled()``.  When
``cancelled()`` answers True the task raises :class:`Cancelled`, whose message names the
stage it stopped in.
"""
from __future__ import annotations

from typing import Callable

__all__ = ["Cancelled", "Progress", "CancelCheck", "check_cancelled"]

Progress = Callable[[float, str], None]
CancelCheck = Callable[[], bool]


class Cancelled(Exception):
    """The task stopped because its ``cancelled`` callback answered True."""


def check_cancelled(cancelled: CancelCheck | None, stage: str) -> None:
    """Raise :class:`Cancelled` naming ``stage`` when ``cancelled()`` answers True."""
    if cancelled is not None and cancelled():
        raise Cancelled(stage)
