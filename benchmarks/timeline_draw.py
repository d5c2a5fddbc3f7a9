"""How fast the Gantt draws a cluster-scale timeline: milliseconds per pan, zoom and scroll
frame.

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/timeline_draw.py [--events N]
        [--ranks R] [--size WxH] [--profile]

Builds a Timeline of 1,000,000 events over 16 ranks, each with a CPU main thread, an
autograd thread, a compute stream and a communication stream (lanes from
``TimelineBuilder``, events in columns as the importers fill them), shows it in the app's
``GanttWidget`` offscreen with every rank expanded, and times frames.  A frame moves the
view (a pan by a tenth of the window, a time zoom by 1.25 at the centre, a scroll by three
rows or a lane-height step), repaints the whole widget at once (``widget.repaint()``) and
handles the queued events.  Prints,
per kind of frame and over all of them, the median, mean and worst milliseconds (wall
clock, and this process's CPU time, which on a shared machine leaves out other processes'
turns), the machine and the command.  The target is under 50 ms a frame.  ``--profile``
adds the functions that took the most time (cProfile).
"""
from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from predictors.engine.timeline import CATEGORIES, Timeline, TimelineBuilder  # noqa: E402

TARGET_MS = 50.0
_KERNELS = [("sgemm_kernel", "gemm"), ("embedding_bag_kernel", "embedding"),
            ("relu_kernel", "elementwise"), ("sum_kernel", "reduction"),
            ("cat_kernel", "memcpy"), ("view_kernel", "view")]
_CPU = [("aten::addmm", "cpu_op"), ("aten::embedding_bag", "cpu_op"),
        ("cudaLaunchKernel", "cpu_overhead")]


def cluster_timeline(events: int = 1_000_000, ranks: int = 16, seed: int = 0) -> Timeline:
    """``events`` events over ``ranks`` ranks: CPU ops on two threads, kernels back to
    back on a compute stream, collectives on a communication stream."""
    rng = np.random.default_rng(seed)
    b = TimelineBuilder(f"{events:,} events, {ranks} ranks")
    names = [n for n, _ in _KERNELS + _CPU] + ["nccl:all_reduce"]
    cols: list[list[np.ndarray]] = [[], [], [], [], []]   # start, dur, lane, category, name

    def lane_events(lane: int, n: int, dur: np.ndarray, gap: np.ndarray, kinds) -> None:
        start = np.cumsum(np.r_[0.0, (dur + gap)[:-1]]) + rng.uniform(0, 50)
        pick = rng.integers(0, len(kinds), n)
        cols[0].append(start)
        cols[1].append(dur)
        cols[2].append(np.full(n, lane))
        cols[3].append(np.array([CATEGORIES.index(kinds[k][1]) for k in range(len(kinds))])[pick])
        cols[4].append(np.array([names.index(kinds[k][0]) for k in range(len(kinds))])[pick])

    per_rank = events // ranks
    for r in range(ranks):
        n = per_rank + (events - per_rank * ranks if r == ranks - 1 else 0)
        n_main, n_grad, n_comm = int(n * 0.3), int(n * 0.2), int(n * 0.02)
        n_kern = n - n_main - n_grad - n_comm
        lane_events(b.lane(r, "cpu", "main"), n_main, rng.lognormal(2.3, 0.6, n_main),
                    rng.uniform(1, 25, n_main), _CPU)
        lane_events(b.lane(r, "cpu", "autograd"), n_grad, rng.lognormal(2.3, 0.6, n_grad),
                    rng.uniform(1, 40, n_grad), _CPU)
        lane_events(b.lane(r, "stream", "stream 7"), n_kern, rng.lognormal(2.6, 0.9, n_kern),
                    rng.exponential(2.0, n_kern), _KERNELS)
        lane_events(b.lane(r, "stream", "stream 13 (comm)"), n_comm,
                    rng.uniform(40, 160, n_comm), rng.uniform(100, 900, n_comm),
                    [("nccl:all_reduce", "communication")])
    start, dur, lane, cat, name = (np.concatenate(c) for c in cols)
    return Timeline.from_arrays(start, dur, lane, cat, name, None, b.lanes, names,
                                title=b.title)


def machine() -> str:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f
                       if line.startswith("model name")) or cpu
    except (OSError, StopIteration):
        pass
    return (f"{cpu or platform.machine()}, {os.cpu_count()} CPUs, "
            f"load average {os.getloadavg()[0]:.2f}, {platform.system()} {platform.release()}")


def frames(gantt, app) -> dict[str, list[tuple[float, float]]]:
    """``kind -> [(wall ms, cpu ms)]`` of each frame."""
    out: dict[str, list[tuple[float, float]]] = {}

    def frame(kind: str, move) -> None:
        w0, c0 = time.perf_counter(), time.process_time()
        move()
        gantt.repaint()       # paints now, as the screen would; then the queued events
        app.processEvents()
        out.setdefault(kind, []).append(((time.perf_counter() - w0) * 1e3,
                                         (time.process_time() - c0) * 1e3))

    gantt.fit()
    for step in [0.1] * 8 + [-0.1] * 8:          # the whole iteration in view
        frame("pan, whole iteration", lambda: gantt.pan(step))
    for _ in range(20):                          # zoom in to a 1/87 of the iteration
        frame("zoom in", lambda: gantt.zoom(0.8))
    for step in [0.1] * 8 + [-0.1] * 8:
        frame("pan, zoomed in", lambda: gantt.pan(step))
    for _ in range(20):
        frame("zoom out", lambda: gantt.zoom(1.25))
    for rows in [3.0] * 8 + [-3.0] * 8:
        frame("scroll rows", lambda: gantt.scroll_rows(rows))
    for factor in [1.25] * 4 + [0.8] * 4:
        frame("lane height", lambda: gantt.zoom_rows(factor))
    return out


def summary(times: list[float]) -> str:
    return (f"{statistics.median(times):8.1f} {statistics.fmean(times):8.1f} "
            f"{max(times):8.1f}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--size", default="1600x900", help="widget size in pixels, WxH")
    ap.add_argument("--profile", action="store_true", help="print the top functions")
    args = ap.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))

    from PySide6 import __version__ as pyside
    from PySide6.QtWidgets import QApplication
    import pyqtgraph as pg

    from explorer.timeline.gantt import GanttWidget

    app = QApplication.instance() or QApplication([])
    t0 = time.perf_counter()
    tl = cluster_timeline(args.events, args.ranks)
    built = time.perf_counter() - t0
    gantt = GanttWidget()
    gantt.resize(width, height)
    gantt.show()
    app.processEvents()
    t0 = time.perf_counter()
    gantt.set_timeline(tl)
    gantt.set_collapsed(set())                   # every rank expanded
    app.processEvents()
    shown = time.perf_counter() - t0
    t0 = time.perf_counter()
    gantt.grab()
    first = time.perf_counter() - t0

    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    result = frames(gantt, app)
    if profiler is not None:
        profiler.disable()

    env = f"QT_QPA_PLATFORM={os.environ['QT_QPA_PLATFORM']} "
    print(f"command: {env}{shlex.join([Path(sys.executable).name] + sys.argv)}")
    print(f"machine: {machine()}")
    print(f"Python {platform.python_version()}, PySide6 {pyside}, pyqtgraph {pg.__version__}, "
          f"Qt platform {app.platformName()}")
    print(f"timeline: {len(tl):,} events, {len(tl.ranks)} ranks, {len(tl.lanes)} lanes, "
          f"{tl.span_ms():.1f} ms; widget {width} x {height}, "
          f"{len(gantt.visible_lanes())} lanes in view")
    print(f"build {built * 1e3:.0f} ms, set_timeline + expand {shown * 1e3:.0f} ms, "
          f"first frame {first * 1e3:.0f} ms")
    print(f"{'frames':<22} {'n':>3} {'median':>8} {'mean':>8} {'worst':>8} "
          f"{'cpu med':>8} {'cpu mean':>8} {'cpu worst':>9}   (ms)")
    every = []
    for kind, times in result.items():
        every += times
        print(f"{kind:<22} {len(times):>3} {summary([w for w, _ in times])} "
              f"{summary([c for _, c in times])}")
    print(f"{'all':<22} {len(every):>3} {summary([w for w, _ in every])} "
          f"{summary([c for _, c in every])}")
    median = statistics.median(w for w, _ in every)
    worst = max(w for w, _ in every)
    print(f"target {TARGET_MS:.0f} ms a frame: median {'met' if median < TARGET_MS else 'missed'}"
          f", worst {'met' if worst < TARGET_MS else 'missed'}")
    if profiler is not None:
        import pstats

        pstats.Stats(profiler).sort_stats("tottime").print_stats(20)
    gantt.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
