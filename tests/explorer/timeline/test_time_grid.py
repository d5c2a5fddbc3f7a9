"""The Gantt's vertical grid: a line at each tick of the time axis, in view only, drawn
by the Gantt's own item rather than by the axis's picture."""
import numpy as np

from explorer.timeline.time_grid import TimeGrid
from predictors.engine.timeline import CATEGORIES, Lane, Timeline


def _timeline() -> Timeline:
    start = np.arange(0.0, 10_000.0, 10.0)
    n = len(start)
    return Timeline.from_arrays(start, np.full(n, 5.0), np.zeros(n, np.int64),
                                np.full(n, CATEGORIES.index("cpu_op")), np.zeros(n), None,
                                [Lane(0, "cpu", "CPU main thread")], ["aten::add"],
                                title="grid")


def test_the_grid_follows_the_time_axis_ticks(gantt, qtbot):
    gantt.set_timeline(_timeline())
    gantt.grab()
    grid = gantt.grid
    assert isinstance(grid, TimeGrid)
    assert gantt.plot.getPlotItem().getAxis("bottom").grid is False   # not drawn twice
    axis = gantt.plot.getPlotItem().getAxis("bottom")
    (t0, t1), _ = gantt.vb.viewRange()
    levels = grid.lines()
    major = axis.tickValues(t0, t1, gantt.vb.width())[0][1]
    assert levels[0][1] == [v for v in major if t0 <= v <= t1]
    assert levels[0][0] > levels[-1][0] > 0          # finer levels are fainter
    gantt.zoom(0.01, (t0 + t1) / 2)
    gantt.grab()
    (z0, z1), _ = gantt.vb.viewRange()
    zoomed = grid.lines()
    assert zoomed[0][1] and all(z0 <= v <= z1 for _, vs in zoomed for v in vs)
    assert zoomed[0][1] != levels[0][1]
