"""How the command line starts the window: which files it refuses, and batch runs.

The window opens what File ▸ Open opens, so an unfinished design saved with File ▸ Save
(a scenario that does not validate yet) opens with its problems in the red bar.  A batch
run (``--screenshot``, ``--export-timeline``, ``--export-report``) needs a scenario it can
predict.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from PySide6.QtCore import QBuffer, QEventLoop, QIODevice, QSettings, QTimer

from predictors.scenario.format import (
    ScenarioError,
    migrate_scenario,
    read_scenario,
    validate_scenario,
)
from predictors.utils.fileio import atomic_write_bytes

from .main_window import MainWindow

__all__ = ["launch_refusal", "run_batch", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def launch_refusal(path: str | os.PathLike, batch: bool) -> str | None:
    """Why the command line refuses to start on ``path`` (one line naming the file and the
    field), or None to go on.

    Parameters
    ----------
    path : the scenario file given on the command line
    batch : whether the run predicts and exits (it then needs a valid scenario)

    A file that is not a scenario at all (missing, not JSON, another format, a newer
    version) is refused either way; an invalid scenario only in batch runs.
    """
    try:
        raw = read_scenario(path)
        if batch:
            validate_scenario(raw, str(path))
        else:
            migrate_scenario(raw, str(path))
    except ScenarioError as exc:
        return str(exc)
    return None


def run_batch(app, args, path: Path, predict_fn, settings_path: Path) -> int:
    """Predict, write the requested files, close the window; the exit code.

    ``args`` carries ``screenshot``, ``export_timeline``, ``export_report`` and
    ``timeout`` (seconds); the
    window keeps its settings in ``settings_path`` (never the user's)."""
    settings = QSettings(str(settings_path), QSettings.IniFormat)
    window = MainWindow(path, predict_fn=predict_fn, settings=settings)
    window.resize(1600, 1000)
    window.show()
    outcome: dict = {}
    loop = QEventLoop()
    c = window.controller

    def done(kind: str, value=None) -> None:
        outcome.setdefault(kind, value)
        loop.quit()

    c.sigFinished.connect(lambda p: done("finished", p))
    c.sigFailed.connect(lambda m: done("failed", m))
    c.sigCancelled.connect(lambda: done("cancelled"))
    QTimer.singleShot(int(args.timeout * 1000), lambda: done("timeout"))
    c.start()
    loop.exec()
    code = EXIT_OK
    if "finished" not in outcome:
        reason = outcome.get("failed") or next(iter(outcome), "no result")
        print(f"explorer: error: prediction {reason}", file=sys.stderr)
        code = EXIT_FAILED
    else:
        for _ in range(3):  # let the docks lay out and the Gantt paint
            app.processEvents()
        if args.export_timeline:
            try:
                window.export_timeline(args.export_timeline)
            except OSError as exc:
                print(f"explorer: error: --export-timeline: {exc}", file=sys.stderr)
                code = EXIT_FAILED
        if getattr(args, "export_report", None):
            from ..report import export_report
            try:
                export_report(window, args.export_report)
            except (OSError, ValueError, RuntimeError) as exc:
                print(f"explorer: error: --export-report: {exc}", file=sys.stderr)
                code = EXIT_FAILED
    if args.screenshot:
        window.gantt.fit()
        app.processEvents()
        buffer = QBuffer()
        buffer.open(QIODevice.WriteOnly)
        try:
            if not window.grab().save(buffer, "PNG"):
                raise OSError(f"could not encode {args.screenshot}")
            atomic_write_bytes(args.screenshot, bytes(buffer.data()))
        except OSError as exc:
            print(f"explorer: error: --screenshot: {exc}", file=sys.stderr)
            code = EXIT_FAILED
    c.shutdown()
    window.editor.undo_stack.setClean()  # nothing to ask about on close
    window.close()
    app.processEvents()
    settings.sync()  # flushed while its folder exists; nothing is left to write later
    return code
