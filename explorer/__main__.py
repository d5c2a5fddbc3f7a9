"""``python -m explorer [SCENARIO.json] [--screenshot OUT.png] [--export-timeline OUT]``.

Without flags the main window opens on the scenario (the bundled default if none).  With
either flag it predicts, waits for the timeline, writes the file(s) and exits; it then works
without a display (offscreen).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m explorer",
                                description="Design-space explorer for ML training performance.")
    p.add_argument("scenario", nargs="?", help="scenario JSON (default: the bundled small DLRM)")
    p.add_argument("--screenshot", metavar="OUT.png",
                   help="predict, save a picture of the main window and exit")
    p.add_argument("--export-timeline", metavar="OUT.png|.svg|.pdf",
                   help="predict, export the timeline picture and exit")
    p.add_argument("--timeout", type=float, default=300.0, metavar="S",
                   help="longest wait for the prediction in batch mode (default 300)")
    return p


def main(argv: list[str] | None = None, predict_fn=None) -> int:
    args = _parser().parse_args(argv)
    batch = bool(args.screenshot or args.export_timeline)
    if batch and not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY") \
            and sys.platform.startswith("linux"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from predictors.scenario.format import ScenarioError, load_scenario
    from predictors.utils.fileio import writable_target

    from .app import DEFAULT_SCENARIO

    path = Path(args.scenario) if args.scenario else DEFAULT_SCENARIO
    try:
        load_scenario(path)  # fail fast, before any window, with one line naming the field
    except ScenarioError as exc:
        print(f"explorer: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for flag, out in (("--screenshot", args.screenshot), ("--export-timeline", args.export_timeline)):
        try:
            if out:
                writable_target(out)
        except OSError as exc:
            print(f"explorer: error: {flag}: {exc}", file=sys.stderr)
            return EXIT_USAGE

    if args.export_timeline:
        suffix = Path(args.export_timeline).suffix.lower()
        if suffix not in (".png", ".svg", ".pdf"):
            print(f"explorer: error: --export-timeline: unsupported format {suffix!r} "
                  "(use .png, .svg or .pdf)", file=sys.stderr)
            return EXIT_USAGE
    from PySide6.QtWidgets import QApplication

    from .app import APP_NAME, MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName(APP_NAME)
    app.setOrganizationName("ml-dse")
    if not batch:
        window = MainWindow(path, predict_fn=predict_fn)
        window.show()
        return app.exec()
    # Batch runs neither read nor change the user's saved layout: their settings live in a
    # folder of their own, removed afterwards.  (QSettings saves by renaming a temporary
    # file over its path, so it must never be pointed at a path this run did not create.)
    with tempfile.TemporaryDirectory(prefix="ml-dse-batch-") as folder:
        return _batch(app, args, path, predict_fn, Path(folder) / "settings.ini")


def _batch(app, args, path: Path, predict_fn, settings_path: Path) -> int:
    """Predict, write the requested files, close the window; the exit code."""
    from PySide6.QtCore import QBuffer, QEventLoop, QIODevice, QSettings, QTimer

    from predictors.utils.fileio import atomic_write_bytes

    from .app import MainWindow

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


if __name__ == "__main__":
    sys.exit(main())
