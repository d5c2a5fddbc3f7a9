"""``python -m explorer [SCENARIO.json] [--screenshot OUT.png] [--export-timeline OUT]
[--export-report OUT.html|.pdf]``.

Without flags the main window opens on the scenario (the bundled default if none), as
File ▸ Open does: an unfinished design opens with its problems in the red bar.  With any
flag it predicts, waits for the timeline, writes the file(s) and exits; it then works
without a display (offscreen), and refuses a scenario that is not valid (exit 2, one line).
The decisions and the batch run live in :mod:`explorer.window.launch`.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m explorer",
                                description="Design-space explorer for ML training performance.")
    p.add_argument("scenario", nargs="?", help="scenario JSON (default: the bundled small DLRM)")
    p.add_argument("--screenshot", metavar="OUT.png",
                   help="predict, save a picture of the main window and exit")
    p.add_argument("--export-timeline", metavar="OUT.png|.svg|.pdf",
                   help="predict, export the timeline picture and exit")
    p.add_argument("--export-report", metavar="OUT.html|.pdf",
                   help="predict, write the design-review report and exit")
    p.add_argument("--timeout", type=float, default=300.0, metavar="S",
                   help="longest wait for the prediction in batch mode (default 300)")
    return p


def main(argv: list[str] | None = None, predict_fn=None) -> int:
    args = _parser().parse_args(argv)
    batch = bool(args.screenshot or args.export_timeline or args.export_report)
    if batch and not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY") \
            and sys.platform.startswith("linux"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from explorer.window import DEFAULT_SCENARIO
    from explorer.window.launch import EXIT_USAGE, launch_refusal, run_batch
    from predictors.utils.fileio import writable_target

    path = Path(args.scenario) if args.scenario else DEFAULT_SCENARIO
    # Fail fast, before any window, with one line naming the file and the field.
    refusal = launch_refusal(path, batch)
    if refusal is not None:
        print(f"explorer: error: {refusal}", file=sys.stderr)
        return EXIT_USAGE
    for flag, out in (("--screenshot", args.screenshot),
                      ("--export-timeline", args.export_timeline),
                      ("--export-report", args.export_report)):
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
    if args.export_report and Path(args.export_report).suffix.lower() not in (".html", ".pdf"):
        print(f"explorer: error: --export-report: unsupported format "
              f"{Path(args.export_report).suffix.lower()!r} (use .html or .pdf)",
              file=sys.stderr)
        return EXIT_USAGE
    from PySide6.QtWidgets import QApplication

    from explorer.window import APP_NAME, MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName(APP_NAME)
    app.setOrganizationName("ml-dse")
    if not batch:
        from explorer.window.autosave import default_autosave_folder

        window = MainWindow(path, predict_fn=predict_fn,
                            autosave_folder=default_autosave_folder())
        window.show()
        from explorer.run.host_check import HostCheck

        check = HostCheck(window)   # once per host, in the background
        check.sigChecked.connect(window.host_checked)
        check.after_first_prediction(window.controller)
        return app.exec()
    # Batch runs neither read nor change the user's saved layout: their settings live in a
    # folder of their own, removed afterwards.  (QSettings saves by renaming a temporary
    # file over its path, so it must never be pointed at a path this run did not create.)
    with tempfile.TemporaryDirectory(prefix="ml-dse-batch-") as folder:
        return run_batch(app, args, path, predict_fn, Path(folder) / "settings.ini")


if __name__ == "__main__":
    sys.exit(main())
