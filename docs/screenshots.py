"""Real screenshots of the explorer for the user guide.

Runs the app offscreen, drives it to each view and saves ``widget.grab()`` PNGs::

    .venv/bin/python docs/screenshots.py            # all of them, into docs/images/
    .venv/bin/python docs/screenshots.py compare    # only the named ones

The predictions are real (bundled profiles); ranking shardings and sweeping take a few
seconds each, the whole run about a minute.  The user's saved settings are never read or
written: the app keeps them in a temporary folder.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SCENARIOS = ROOT / "resources" / "scenarios"
SAMPLE_CPU_TRACE = ROOT / "sample_traces" / "small_dlrm_cpu1.pt.trace.json.gz"
DGX1_TRACES = ROOT.parent / "shared" / "data" / "traces" / "param-dlrm-v100-8rank"
OUT = Path(__file__).resolve().parent / "images"
TIMEOUT_S = 300


class Driver:
    """Opens main windows with throw-away settings and waits for their background work."""

    def __init__(self, tmp: Path):
        from PySide6.QtWidgets import QApplication

        self.app = QApplication.instance() or QApplication(sys.argv[:1])
        self.app.setApplicationName("ML DSE Explorer")
        self.tmp = tmp
        self.windows: list = []

    def settle(self, rounds: int = 8) -> None:
        for _ in range(rounds):
            self.app.processEvents()

    def run_until(self, signal, start, what: str) -> None:
        """Connect to ``signal``, call ``start()`` and run the event loop until it fires."""
        from PySide6.QtCore import QEventLoop, QTimer

        loop = QEventLoop()
        fired = []

        def slot(*_args):
            fired.append(True)
            loop.quit()

        signal.connect(slot)
        try:
            start()
            if not fired:
                QTimer.singleShot(TIMEOUT_S * 1000, loop.quit)
                loop.exec()
        finally:
            signal.disconnect(slot)
        if not fired:
            raise SystemExit(f"screenshots: timed out waiting for {what}")
        self.settle()

    def window(self, scenario: Path, size=(1440, 900)):
        """A main window on ``scenario``, predicted."""
        from PySide6.QtCore import QSettings

        from explorer.window import MainWindow

        settings = QSettings(str(self.tmp / f"settings{len(self.windows)}.ini"),
                             QSettings.IniFormat)
        w = MainWindow(scenario, settings=settings)
        w.confirm_discard = lambda: True
        w.resize(*size)
        w.show()
        self.settle()
        self.run_until(w.controller.sigFinished, w.controller.start,
                       f"the prediction of {scenario.name}")
        w.gantt.fit()
        self.settle()
        self.windows.append(w)
        return w

    def close_all(self) -> None:
        for w in self.windows:
            w.editor.undo_stack.setClean()
            w.close()
        self.settle()


def save(widget, name: str, rect=None) -> Path:
    """``widget.grab()`` (of ``rect`` within it, when given) as ``docs/images/NAME``."""
    OUT.mkdir(parents=True, exist_ok=True)
    pixmap = widget.grab(rect) if rect is not None else widget.grab()
    path = OUT / name
    if not pixmap.save(str(path), "PNG"):
        raise SystemExit(f"screenshots: could not write {path}")
    print(f"{path.relative_to(ROOT)}: {pixmap.width()}x{pixmap.height()}, "
          f"{path.stat().st_size / 1024:.0f} KB")
    return path


def union_rect(window, widgets):
    """The rectangle of ``window`` that holds all of ``widgets``."""
    from PySide6.QtCore import QPoint, QRect

    rect = QRect()
    for w in widgets:
        top_left = w.mapTo(window, QPoint(0, 0))
        rect = rect.united(QRect(top_left, w.size()))
    return rect


# --- the shots ---------------------------------------------------------------------------

def on_preset(d: Driver, preset: str) -> Path:
    """The small DLRM on a platform preset, as a scenario file of the run's own."""
    doc = json.loads((SCENARIOS / "small_dlrm.json").read_text())
    doc["platform"] = {"preset": preset}
    path = d.tmp / f"small_dlrm_{preset}.json"
    path.write_text(json.dumps(doc))
    return path


def shot_main(d: Driver) -> None:
    """The whole window on the small DLRM: canvas, palette, inspector, timeline, summary."""
    w = d.window(SCENARIOS / "small_dlrm.json")
    save(w, "main-window.png")


def shot_inspector(d: Driver) -> None:
    """The model canvas with the embedding-tables block selected and its parameters in
    the Inspector."""
    w = d.window(SCENARIOS / "small_dlrm.json", size=(1300, 820))
    tables = next(n["id"] for n in w.editor.document.snapshot()["model"]["nodes"]
                  if n["kind"] == "embedding_tables")
    w.scene.select_nodes([tables])
    d.settle()
    save(w, "model-inspector.png",
         union_rect(w, [w.centralWidget(), w.inspector_dock]))


def shot_platform_and_multi_gpu(d: Driver) -> None:
    """The MLPerf DLRM-DCNv2 on a DGX A100: the Platform tab and the 8-rank timeline."""
    from PySide6.QtCore import Qt

    w = d.window(SCENARIOS / "mlperf_dlrm_dcnv2.json", size=(1800, 1000))
    # the Platform tab
    w.tabs.setCurrentWidget(w.platform_page)
    d.settle()
    w.platform_page.view.fit_all()
    d.settle()
    save(w.centralWidget(), "platform-canvas.png")
    # the timeline: ranks 0 and 1 unfolded, the others folded
    ranks = set(w.prediction.timeline.ranks)
    w.gantt.set_collapsed(ranks - {0, 1})
    w.resizeDocks([w.timeline_dock], [560], Qt.Vertical)
    d.settle()
    w.gantt.fit()
    d.settle()
    save(w.timeline_dock, "timeline-ranks.png")


def shot_timeline_16(d: Driver) -> None:
    """The 64-table DLRM on two nodes of 8 H100: 16 ranks grouped by node, ranks 0 and 8
    unfolded, the others folded, and Find op marking the embeddings' all-to-alls."""
    from PySide6.QtCore import Qt

    doc = json.loads((SCENARIOS / "dlrm_64tables_8gpu.json").read_text())
    doc["platform"] = {"preset": "2node-8x-h100"}
    path = d.tmp / "dlrm_64tables_2node.json"
    path.write_text(json.dumps(doc))
    w = d.window(path, size=(1600, 1000))
    w.gantt.set_collapsed(set(w.prediction.timeline.ranks) - {0, 8})
    w.resizeDocks([w.timeline_dock], [680], Qt.Vertical)
    d.settle()
    w.gantt.fit()
    w.gantt.search.field.setText("all_to_all")
    w.gantt.search.search()
    d.settle()
    save(w.timeline_dock, "timeline-16-ranks.png")


def shot_link_lanes(d: Driver) -> None:
    """64 tables on a DGX A100: the ranks folded above the links' group, one lane per
    NVLink port, a bar per collective; the longest all-reduce's bytes and utilisation
    pinned under the plot."""
    from PySide6.QtCore import Qt

    w = d.window(SCENARIOS / "dlrm_64tables_8gpu.json", size=(1600, 1000))
    tl = w.prediction.timeline
    w.gantt.set_collapsed(set(tl.ranks))
    w.resizeDocks([w.timeline_dock], [640], Qt.Vertical)
    d.settle()
    w.gantt.fit()
    w.gantt.scroll_rows(1e9)   # down to the last link
    d.settle()
    # the details of the longest collective on gpu0's port, pinned under the plot
    lane = next(i for i, l in enumerate(tl.lanes) if l.kind == "link")
    bars = [i for i in range(len(tl)) if tl.lane[i] == lane]
    pick = max(bars, key=lambda i: tl.dur_us[i])
    w.gantt.select_event(pick)
    d.settle()
    save(w.timeline_dock, "link-lanes.png")


def select_plans(view, rows) -> None:
    """Select these rows of the Sharding table (several: the charts compare them)."""
    from PySide6.QtCore import QItemSelectionModel

    view.table.clearSelection()
    model = view.table.selectionModel()
    for row in rows:
        model.select(view.table.model().index(row, 0),
                     QItemSelectionModel.Select | QItemSelectionModel.Rows)


def shot_sharding(d: Driver) -> None:
    """64 tables on a DGX A100 ranked with a 10 s search: the placement heat map of the
    best plan, the per-rank breakdown and the stacked timelines of three plans (the best,
    the best planner's, all row-wise)."""
    from PySide6.QtCore import Qt

    w = d.window(SCENARIOS / "dlrm_64tables_8gpu.json", size=(1400, 900))
    s, v = w.sharding, w.sharding.view
    v.budget.setValue(10)
    d.run_until(s.runner.sigFinished, s.run, "the sharding ranking")
    w.resizeDocks([s.dock], [430], Qt.Vertical)
    names = [p.plan.name for p in v.ranking.plans]
    rows = [0] + [names.index(n) for n in ("greedy by kernel time", "row-wise")
                  if n in names[1:]]
    v.table.selectRow(0)
    v.tabs.setCurrentWidget(v.placement)
    d.settle()
    save(s.dock, "sharding-heatmap.png")
    select_plans(v, rows[:3])
    v.tabs.setCurrentWidget(v.breakdown)
    d.settle()
    save(s.dock, "sharding-breakdown.png")
    v.tabs.setCurrentWidget(v.timelines)
    d.settle()
    save(s.dock, "sharding-stacked.png")


def shot_sharding_nodes(d: Driver) -> None:
    """The MLPerf DLRM on two nodes of 8 H100, its two largest tables table-row-wise (one
    on each node), ranked with a 10 s search: the placement heat map of its plan."""
    from PySide6.QtCore import Qt

    doc = json.loads((SCENARIOS / "mlperf_dlrm_dcnv2.json").read_text())
    doc["platform"] = {"preset": "2node-8x-h100"}
    tables = doc["model"]["nodes"][[n["kind"] for n in doc["model"]["nodes"]].index(
        "embedding_tables")]["params"]["tables"]
    big = sorted(range(len(tables)), key=lambda j: -tables[j]["rows"])[:2]
    doc["parallelism"] = {"embedding_sharding": {
        f"tables/{j}": {"kind": "twrw", "ranks": list(range(8 * n, 8 * n + 8))}
        for n, j in enumerate(big)}}
    path = d.tmp / "mlperf_dlrm_2node_twrw.json"
    path.write_text(json.dumps(doc))
    w = d.window(path, size=(1400, 900))
    s, v = w.sharding, w.sharding.view
    v.budget.setValue(10)
    d.run_until(s.runner.sigFinished, s.run, "the sharding ranking")
    w.resizeDocks([s.dock], [430], Qt.Vertical)
    names = [p.plan.name for p in v.ranking.plans]
    v.table.selectRow(names.index("the scenario's plan"))
    v.tabs.setCurrentWidget(v.placement)
    d.settle()
    save(s.dock, "sharding-nodes.png")


def shot_sweep(d: Driver) -> None:
    """BERT-base on one A100-40GB: Up to What Fits, then the sweep up to that batch."""
    from PySide6.QtCore import Qt

    w = d.window(SCENARIOS / "bert_base.json", size=(1440, 900))
    sw = w.sweep
    d.run_until(sw.runner.sigFinished, sw.fit, "the largest batch and its sweep")
    w.resizeDocks([sw.dock], [380], Qt.Vertical)
    d.settle()
    save(sw.dock, "sweep-dock.png")


def shot_compare(d: Driver) -> None:
    """The small DLRM predicted on this CPU above the step recorded by
    ``python -m predictors measure ... --trace`` (sample_traces/)."""
    from PySide6.QtCore import Qt

    doc = json.loads((SCENARIOS / "small_dlrm.json").read_text())
    doc["platform"] = {"preset": "local-cpu", "threads": 1}
    path = d.tmp / "small_dlrm_cpu.json"
    path.write_text(json.dumps(doc))
    w = d.window(path, size=(1800, 1100))
    c = w.compare
    d.run_until(c.loader.sigFinished, lambda: c.load([str(SAMPLE_CPU_TRACE)]),
                "the recorded trace")
    w.resizeDocks([c.dock], [700], Qt.Vertical)
    d.settle()
    save(c.dock, "compare-dock.png")


def shot_profiles(d: Driver) -> None:
    """The Profiles tab on an H200 platform, its measured profile selected."""
    from PySide6.QtCore import Qt

    w = d.window(on_preset(d, "h200-1"), size=(1440, 1000))
    w.palette_dock.hide()
    w.inspector_dock.hide()
    w.resizeDocks([w.timeline_dock], [200], Qt.Vertical)
    panel = w.profiles.panel
    w.tabs.setCurrentWidget(panel)
    panel.select_profile(ROOT / "resources" / "profiles" / "gpu" / "nvidia-h200-measured.json")
    d.settle()
    save(w.centralWidget(), "profiles-tab.png")


def shot_dgx1(d: Driver) -> None:
    """The Platform tab on the DGX-1 preset: the hybrid cube-mesh as two quads."""
    w = d.window(on_preset(d, "dgx1-v100"), size=(1500, 950))
    w.palette_dock.hide()
    w.inspector_dock.hide()
    w.tabs.setCurrentWidget(w.platform_page)
    d.settle()
    w.platform_page.view.fit_all()
    d.settle()
    save(w.centralWidget(), "platform-dgx1.png")


def shot_compare_ranks(d: Driver) -> None:
    """The 64-table DLRM predicted on a DGX-1 above the eight ranks PARAM recorded on one
    (public traces in ../shared/data; skipped when they are absent), in a window 1280 px
    wide: the Compare dock."""
    from PySide6.QtCore import Qt

    files = sorted(DGX1_TRACES.glob("worker*_step_12.*.pt.trace.json.gz"))
    if not files:
        print(f"compare-ranks: skipped, no traces in {DGX1_TRACES}")
        return
    doc = json.loads((SCENARIOS / "dlrm_64tables_8gpu.json").read_text())
    doc["platform"] = {"preset": "dgx1-v100"}
    path = d.tmp / "dlrm_64tables_dgx1.json"
    path.write_text(json.dumps(doc))
    w = d.window(path, size=(1280, 1100))
    c = w.compare
    d.run_until(c.loader.sigFinished, lambda: c.load([str(f) for f in files]),
                "the recorded traces")
    w.summary_dock.hide()
    w.resizeDocks([c.dock], [820], Qt.Vertical)
    d.settle()
    c.view.recorded.set_collapsed({r for r in range(8)} - {0})
    c.view.predicted.set_collapsed({r for r in range(8)} - {0})
    d.settle()
    save(c.dock, "compare-ranks.png")


def shot_timeline_range(d: Driver) -> None:
    """The small DLRM's timeline: a GEMM kernel clicked (the arrow from its launch) and a
    range selected (its per-op totals under the plot)."""
    import numpy as np
    from PySide6.QtCore import Qt

    w = d.window(SCENARIOS / "small_dlrm.json", size=(1300, 900))
    g, tl = w.gantt, w.prediction.timeline
    kernel = next(int(i) for i in np.argsort(tl.start_us, kind="stable")
                  if tl.lanes[tl.lane[i]].kind == "stream"
                  and tl.names[tl.name_id[i]] == "aten::addmm")
    t = float(tl.start_us[kernel]) / 1e3
    w.resizeDocks([w.timeline_dock], [520], Qt.Vertical)
    d.settle()
    g.vb.setXRange(0.0, t + 0.9, padding=0)
    g.select_event(kernel)
    g.sigEventClicked.emit(kernel)
    g.select_time_range(t - 0.05, t + 0.6)
    d.settle()
    save(w.timeline_dock, "timeline-range.png")


def shot_report(d: Driver) -> None:
    """The top of the design-review report of the MLPerf DLRM-DCNv2 on a DGX A100, laid
    out as File > Export Report writes it."""
    from PySide6.QtCore import Qt, QUrl
    from PySide6.QtGui import QColor, QImage, QPainter, QTextDocument

    from explorer.report import report_html

    w = d.window(SCENARIOS / "mlperf_dlrm_dcnv2.json")
    text, images = report_html(w)
    doc = QTextDocument()
    for name, image in images.items():
        doc.addResource(QTextDocument.ImageResource, QUrl(name),
                        image.scaledToWidth(880, Qt.SmoothTransformation)
                        if image.width() > 880 else image)
    doc.setHtml(text)
    doc.setTextWidth(900)
    image = QImage(900, 1250, QImage.Format_ARGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    doc.drawContents(painter)
    painter.end()
    image.save(str(OUT / "report.png"))


SHOTS = {"main": shot_main, "inspector": shot_inspector,
         "multi-gpu": shot_platform_and_multi_gpu, "sharding": shot_sharding,
         "sweep": shot_sweep,
         "compare": shot_compare, "profiles": shot_profiles, "dgx1": shot_dgx1,
         "compare-ranks": shot_compare_ranks, "timeline-range": shot_timeline_range,
         "report": shot_report, "link-lanes": shot_link_lanes,
         "sharding-nodes": shot_sharding_nodes, "timeline-16": shot_timeline_16}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shots", nargs="*", metavar="SHOT",
                        help=f"which ones (default: all): {', '.join(SHOTS)}")
    args = parser.parse_args(argv)
    unknown = [s for s in args.shots if s not in SHOTS]
    if unknown:
        parser.error(f"unknown shot(s): {', '.join(unknown)} (choose from {', '.join(SHOTS)})")
    with tempfile.TemporaryDirectory(prefix="ml-dse-shots-") as tmp:
        d = Driver(Path(tmp))
        try:
            for name in args.shots or SHOTS:
                SHOTS[name](d)
        finally:
            d.close_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
