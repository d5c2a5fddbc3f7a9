"""Pause Python's automatic garbage collection while a thread works with torch.

A collection that another thread starts (the GUI's, while a worker thread builds and
captures a model) can clear reference cycles that torch still reaches from C++; the GUI
tests crashed in such collections now and then.  Predictions take milliseconds to a few
seconds, so pausing automatic collection for them costs nothing; garbage is collected
at the next collection after the last pause ends.
"""
from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

__all__ = ["collection_paused", "pause_collection", "resume_collection"]

_lock = threading.Lock()
_state = {"depth": 0, "was_enabled": False}  # pauses in progress (any thread)


def pause_collection() -> None:
    """Start a pause (shared between threads; :func:`resume_collection` ends it)."""
    with _lock:
        if _state["depth"] == 0:
            _state["was_enabled"] = gc.isenabled()
            gc.disable()
        _state["depth"] += 1


def resume_collection() -> None:
    """End one pause; the last one out restores the previous setting."""
    with _lock:
        _state["depth"] = max(0, _state["depth"] - 1)
        if _state["depth"] == 0 and _state["was_enabled"]:
            gc.enable()


@contextmanager
def collection_paused():
    """No automatic collection while any thread is inside this block (re-entrant and
    shared between threads: the last one out restores the previous setting)."""
    pause_collection()
    try:
        yield
    finally:
        resume_collection()
