"""Level of detail of the Gantt's bars: every bar's time is kept at every pixel width, each
pixel column shows the colour that covers most of it, and the Gantt draws only what is in
view."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import explorer.timeline.level_of_detail as lod
from explorer.timeline.lane_bars import LaneBarsItem
from explorer.timeline.level_of_detail import CoverageBins, PixelColumns, busy_intervals
from predictors.engine.timeline import CATEGORIES, Lane, Timeline


def test_nested_and_overlapping_bars_are_one_interval_with_their_count():
    start = np.array([0.0, 2.0, 3.0, 20.0, 5.0])
    end = np.array([10.0, 4.0, 12.0, 21.0, 6.0])
    row = np.array([0, 0, 0, 0, 1])
    s, e, r, c = busy_intervals(start, end, row)
    assert s.tolist() == [0.0, 20.0, 5.0] and e.tolist() == [12.0, 21.0, 6.0]
    assert r.tolist() == [0, 0, 1] and c.tolist() == [3, 1, 1]
    assert CoverageBins(start, end, row).busy() == 14.0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 100), st.floats(0, 5), st.integers(0, 3)),
                min_size=1, max_size=60),
       st.floats(1e-2, 20), st.booleans())
@example([(0.0, 0.0, 0), (0.5, 0.0, 0)], 1.0, True)   # two marks in one column
def test_the_bins_keep_every_bars_time_at_any_pixel_width(bars, px, coarse):
    start = np.array([b[0] for b in bars])
    end = start + np.array([b[1] for b in bars])
    row = np.array([b[2] for b in bars])
    bins = CoverageBins(start, end, row)
    t0 = -2 * px
    ncol = int(np.ceil((110 - t0) / px))
    limit = lod.DIRECT_LIMIT
    lod.DIRECT_LIMIT = -1 if coarse else limit   # coarse: the cached power-of-two bins
    try:
        rows, cols, cover = bins.columns(t0, px, ncol, 0, 3)
    finally:
        lod.DIRECT_LIMIT = limit
    # the totals stay: the time covered, give or take the marks of bars that cover less
    # than a thousandth of a column (at most one at each end of a bar)
    assert bins.busy() - 1e-9 <= cover.sum() <= bins.busy() + 2e-3 * px * len(bars) + 1e-9
    # every bar marks the column it starts in (the power-of-two bins: or a neighbour)
    slack = 1 if coarse else 0
    for s, r in zip(start, row):
        c = int(np.floor((s - t0) / px + 1e-9))
        assert np.any((rows == r) & (np.abs(cols - c) <= slack))


def test_each_pixel_column_shows_the_colour_that_covers_most_of_it():
    # a stream of 1 ms GEMMs with a 0.05 ms view op after each, 1000 of them
    gemm_start = np.arange(1000) * 1.1
    view_start = gemm_start + 1.02
    columns = PixelColumns()
    columns.add("gemm", gemm_start, gemm_start + 1.0, np.zeros(1000), np.ones(1000), z=1)
    columns.add("view", view_start, view_start + 0.05, np.zeros(1000), np.ones(1000), z=1)
    x, w, top, h = columns.rects("gemm", 0.0, 1100.0, 5.0, 0.0, 1.0)   # 5 ms a pixel
    assert w.sum() >= 1090.0 and top.tolist() == [0.0] * len(x) and h.tolist() == [1.0] * len(x)
    assert len(columns.rects("view", 0.0, 1100.0, 5.0, 0.0, 1.0)[0]) == 0  # never on top
    # zoomed in, each op has its own pixels again
    x, w, _, _ = columns.rects("view", 0.0, 11.0, 0.01, 0.0, 1.0)
    assert len(x) == 10 and np.all(w == pytest.approx(0.05, abs=0.011))
    # a launch inside its CPU op: the higher z wins the columns both cover whole
    inner = PixelColumns()
    inner.add("cpu_op", [0.0], [10.0], [0.0], [1.0], z=1)
    inner.add("cpu_overhead", [4.0], [6.0], [0.0], [1.0], z=2)
    x, w, _, _ = inner.rects("cpu_overhead", 0.0, 10.0, 0.1, 0.0, 1.0)
    assert x.tolist() == pytest.approx([4.0]) and w.tolist() == pytest.approx([2.0])
    assert inner.rects("cpu_op", 0.0, 10.0, 0.1, 0.0, 1.0)[1].sum() == pytest.approx(8.0)
    with pytest.raises(ValueError):
        inner.rects("cpu_op", 0.0, 10.0, 0.0, 0.0, 1.0)


def test_a_column_with_any_bar_is_never_blank_and_rows_out_of_view_are_not_drawn():
    rng = np.random.default_rng(0)
    n = 20_000
    start = rng.uniform(0, 1000, n)
    end = start + rng.lognormal(-2, 1.5, n)
    row = rng.integers(0, 6, n)
    kind = rng.integers(0, 3, n)
    columns = PixelColumns()
    for k in range(3):
        sel = kind == k
        columns.add(k, start[sel], end[sel], row[sel].astype(float), row[sel] + 0.8, z=k)
    px = 0.7
    drawn = []
    for k in range(3):
        x, w, top, _ = columns.rects(k, 0.0, 1000.0, px, 1.9, 3.5)   # rows 2 and 3
        assert set(top.tolist()) <= {2.0, 3.0}
        drawn += [(t, c) for xi, wi, t in zip(x, w, top)
                  for c in range(int(round((xi + px) / px)), int(round((xi + wi + px) / px)))]
    assert len(drawn) == len(set(drawn))                 # one colour per column
    sel = (row == 2) | (row == 3)
    touched = {(float(r), int(np.floor((s + px) / px + 1e-9))) for s, r in zip(start[sel], row[sel])}
    assert touched <= set(drawn)


def many_bars_timeline(n=200_000, lanes=8, seed=0):
    rng = np.random.default_rng(seed)
    start = np.sort(rng.uniform(0, 1e6, n))
    return Timeline.from_arrays(start, rng.uniform(0.1, 5.0, n), rng.integers(0, lanes, n),
                                rng.integers(0, len(CATEGORIES), n), np.zeros(n), None,
                                [Lane(i // 4, "cpu" if i % 4 < 2 else "stream", f"t{i}")
                                 for i in range(lanes)], ["op"], title="many")


def test_the_gantt_draws_per_pixel_column_in_view_only(gantt, qtbot):
    tl = many_bars_timeline()
    gantt.set_timeline(tl)
    items = list(gantt._bars.values())
    assert all(isinstance(item, LaneBarsItem) for item in items)
    assert sum(item.bins.total for item in items) == len(tl)
    gantt.grab()
    whole = sum(item.drawn for item in items)
    width_px = gantt.vb.width()
    assert 0 < whole <= len(tl.lanes) * (width_px + 4)   # at most a rectangle a column
    x0, x1 = gantt.x_range()
    gantt.zoom(1e-4, (x0 + x1) / 2)
    gantt.grab()
    z0, z1 = gantt.x_range()
    in_view = int(((tl.start_us / 1e3 <= z1) & ((tl.start_us + tl.dur_us) / 1e3 >= z0)).sum())
    assert 0 < sum(item.drawn for item in items) <= in_view + 2 * len(tl.lanes)
    # Qt asks an item under the mouse for its shape: the bounds, not a million rectangles
    assert items[0].shape().elementCount() == 5


@pytest.mark.parametrize("chunk", [1 << 15, 7])
def test_bins_binned_near_the_view_as_it_moves_equal_those_binned_from_all_the_bars(
        monkeypatch, chunk):
    # chunk 7: a row's bins are binned in parts, and parts of several rows at once
    monkeypatch.setattr(lod, "_CHUNK", chunk)
    rng = np.random.default_rng(3)
    n = 4000
    start = rng.uniform(0, 500, n)
    end = start + np.where(rng.random(n) < 0.1, 0.0, rng.lognormal(-1, 1.5, n))
    row = rng.integers(0, 12, n)
    row[row == 5] = 6                               # a row with no bars
    bins = CoverageBins(start, end, row)
    for k in (-3, 0, 2):
        whole = bins.level(k)
        width = 2.0 ** k
        # zoom in on a window, pan right and left, scroll down, jump far, zoom out
        for t0, t1, row0, row1 in [(200, 260, 2, 6), (215, 275, 2, 6), (290, 350, 2, 6),
                                   (150, 210, 2, 6), (150, 210, 6, 11), (-40, 20, 0, 3),
                                   (480, 540, 0, 11), (-100, 600, 0, 11)]:
            b_lo, b_hi = int(np.floor(t0 / width)) - 1, int(np.ceil(t1 / width)) + 1
            got = bins.window(k, row0, row1, b_lo, b_hi)
            sel = ((whole[0] >= row0) & (whole[0] <= row1) & (whole[1] >= b_lo)
                   & (whole[1] <= b_hi))
            for a, b in zip(got, whole):
                np.testing.assert_array_equal(a, b[sel])   # to the bit
        assert len(bins._levels[k].bins) == 12


def test_a_view_of_the_whole_span_bins_the_next_zoom_levels_once(monkeypatch):
    """The first drawing of the whole span also bins the three finer widths, so that the
    first zoom-ins (whose view and margins still cover the span) bin nothing, and their
    bins equal those binned from all the bars; a view of part of the span bins only its
    own width."""
    monkeypatch.setattr(lod, "DIRECT_LIMIT", 10)   # every view reads the bins
    rng = np.random.default_rng(5)
    start = rng.uniform(0, 1000, 5000)
    end, row = start + rng.uniform(0, 0.5, 5000), rng.integers(0, 8, 5000)
    bins = CoverageBins(start, end, row)
    extended = []
    real = bins._extend
    monkeypatch.setattr(bins, "_extend", lambda lvl, k, *a: (extended.append(k),
                                                             real(lvl, k, *a)))
    bins.columns(-1.0, 1.0, 1003, 0, 7)            # 1 ms a pixel: level 0
    assert sorted(set(extended)) == [-3, -2, -1, 0]
    extended.clear()
    for width in (640.0, 512.0, 410.0, 328.0, 262.0):   # zoom in at the centre
        bins.columns(500 - width / 2, width / 1000, 1000, 0, 7)
    assert extended == []
    whole = bins.level(-2)
    got = bins.window(-2, 0, 7, 0, 3000)
    sel = (whole[1] >= 0) & (whole[1] <= 3000)
    for a, b in zip(got, whole):
        np.testing.assert_array_equal(a, b[sel])    # to the bit
    part = CoverageBins(start, end, row)
    part.columns(200.0, 0.5, 400, 0, 7)             # 200-400 ms of 0-1000: level -1 only
    assert set(part._levels) == {-1}
