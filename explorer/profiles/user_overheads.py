"""CPU overheads measured from the user's own recorded GPU trace, for the Profiles tab (the
measuring runs in a worker thread; :func:`predictors.traces.overhead_tables.overheads_from_recording`
does the work)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from predictors.profiles import OverheadTable
from predictors.utils.progress import Cancelled

__all__ = ["TraceOverheads", "measure_trace_overheads"]


@dataclass
class TraceOverheads:
    """CPU overheads measured from the user's recorded trace (the ranks of one job)."""

    table: OverheadTable
    paths: list[str]
    ops: int
    devices: list[str]

    @property
    def files_text(self) -> str:
        return files_text(self.paths)


def files_text(paths) -> str:
    """Trace files in a few words: one name, or the first and how many more."""
    names = [os.path.basename(p) for p in paths]
    if len(names) == 1:
        return _shorten(names[0])
    return f"{_shorten(names[0])} and {len(names) - 1} more rank file(s)"


def _shorten(name: str, width: int = 40) -> str:
    """``name`` with its middle elided so that it fits ``width`` characters."""
    if len(name) <= width:
        return name
    keep = width - 1
    return f"{name[:keep - keep // 2]}…{name[-(keep // 2):]}"


def measure_trace_overheads(paths, progress: Callable[[float, str], None] | None = None,
                            cancelled: Callable[[], bool] | None = None) -> TraceOverheads:
    """Read recorded GPU trace(s) (the ranks of one job) and measure T1-T5 per op.

    Runs in a worker thread.  Raises :class:`~predictors.traces.TraceError` with one line for
    a file that cannot be read, a CPU-only trace (its op times include the kernels) or a
    trace without CPU ops; :class:`~predictors.traces.Cancelled` when ``cancelled()``."""
    from predictors.traces.overhead_tables import overheads_from_recording
    from predictors.traces.recording import load_recording

    paths = [os.fspath(p) for p in paths]
    rec = load_recording(paths, progress=progress, cancelled=cancelled)
    if cancelled is not None and cancelled():
        raise Cancelled("measuring overheads")
    if progress is not None:
        progress(0.96, "measuring CPU overheads per op")
    table, info = overheads_from_recording(rec, files_text(paths))
    return TraceOverheads(table, paths, int(info["ops"]), info["devices"])
