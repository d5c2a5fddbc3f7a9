"""Level of detail for the Gantt's bars, free of Qt: what to draw of a million bars.

When the whole iteration of a cluster shows, most bars are narrower than a pixel and
thousands share a pixel column; drawing each of them every frame costs more than the 50 ms
a frame may take, and drawn over one another, the colour drawn last hides the others.
:class:`PixelColumns` answers, for a view (a time window, the width of a pixel, the rows in
view), per row and pixel column the colour whose bars cover most of the column, as runs of
columns: a stream that runs mostly GEMMs looks mostly GEMM blue at any zoom, a column with
any bar in it is never blank, and a frame draws at most a few rectangles per pixel row.

Each colour's bars are kept as :class:`CoverageBins`: per row, the time its bars cover in
each bin of a power-of-two width.  A coarse view reads the bins of its pixel width (cached,
so a pan reuses them); a fine view, with few bars in its window, measures them exactly.

Examples
--------
>>> import numpy as np
>>> columns = PixelColumns()
>>> columns.add("gemm", [0.0], [8.0], [0.0], [1.0])
>>> columns.add("view", [8.0], [9.0], [0.0], [1.0])
>>> x, width, top, height = columns.rects("gemm", 0.0, 10.0, 2.0, 0.0, 1.0)
>>> x.tolist(), width.tolist()
([0.0], [8.0])
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["PixelColumns", "CoverageBins", "busy_intervals", "DIRECT_LIMIT"]

# Busy intervals in the window up to which a frame measures them itself; past it, the
# cached bins of the frame's pixel width are read instead.
DIRECT_LIMIT = 30_000
_MIN_SHARE = 1e-3   # a bar of no duration still marks its column, below any real one


def busy_intervals(start, end, row) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Disjoint ``(start, end, row, count)`` intervals covering the bars of each row,
    sorted by row, then start; ``count`` is how many bars each interval covers.

    Bars that overlap or nest (CPU ops inside CPU ops) become one interval: in one colour
    on one row they paint the same pixels."""
    start = np.asarray(start, np.float64)
    end = np.maximum(np.asarray(end, np.float64), start)
    row = np.asarray(row, np.int64)
    n = len(start)
    if not n:
        return np.zeros(0), np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.lexsort((start, row))
    s, e, r = start[order], end[order], row[order]
    # the running end of each row: a bar starting before it belongs to the interval
    cuts = np.flatnonzero(r[1:] != r[:-1]) + 1
    run = np.empty_like(e)
    for a, b in zip(np.r_[0, cuts], np.r_[cuts, n]):
        np.maximum.accumulate(e[a:b], out=run[a:b])
    new = np.ones(n, bool)
    new[1:] = (s[1:] > run[:-1]) | (r[1:] != r[:-1])
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, n - 1]
    return s[first], run[last], r[first], np.diff(np.r_[first, n])


def _spread(s, e, r, origin: float, width: float, lo: int, hi: int):
    """``(row, bin, cover)`` of intervals over bins ``[origin + k width, + width)``,
    ``k`` in ``lo .. hi``: the time each interval covers in each bin it touches."""
    b0 = np.clip(np.floor((s - origin) / width + 1e-9).astype(np.int64), lo, hi)
    b1 = np.clip(np.ceil((e - origin) / width - 1e-9).astype(np.int64) - 1, b0, hi)
    n = b1 - b0 + 1
    k = np.repeat(b0 - np.cumsum(n) + n, n) + np.arange(int(n.sum()))
    rows = np.repeat(r, n)
    ss, ee = np.repeat(s, n), np.repeat(e, n)
    left = origin + k * width
    cover = np.minimum(ee, left + width) - np.maximum(ss, left)
    return rows, k, np.maximum(cover, _MIN_SHARE * width)


def _combine(rows, bins, cover):
    """Sum the covers of equal ``(row, bin)`` pairs (given sorted by row, then bin)."""
    if not len(rows):
        return rows, bins, cover
    new = np.ones(len(rows), bool)
    new[1:] = (rows[1:] != rows[:-1]) | (bins[1:] != bins[:-1])
    first = np.flatnonzero(new)
    return rows[first], bins[first], np.add.reduceat(cover, first)


class CoverageBins:
    """The bars of one colour, per row: their busy intervals, and how much of each bin of a
    power-of-two width they cover (cached per width).

    Parameters
    ----------
    start, end : array of float
        Each bar's start and end (the Gantt's milliseconds).
    row : array of int
        Each bar's row, ``0 .. nrows - 1``.
    """

    def __init__(self, start, end, row):
        self.total = len(start)
        self.base = busy_intervals(start, end, row)
        self.nrows = int(self.base[2].max()) + 1 if len(self.base[2]) else 0
        self._bounds = np.searchsorted(self.base[2], np.arange(self.nrows + 1))
        self._levels: dict[int, tuple] = {}

    def busy(self) -> float:
        """The time the bars cover, overlaps counted once."""
        return float((self.base[1] - self.base[0]).sum())

    def level(self, k: int):
        """``(row, bin, cover)`` over bins ``[j 2**k, (j + 1) 2**k)``, sorted, cached."""
        if k not in self._levels:
            finer = [j for j in self._levels if j < k]
            if finer:   # halve a finer level's bins: no interval is spread twice
                j = max(finer)
                rows, bins, cover = self._levels[j][0]
                level = _combine(rows, bins >> (k - j), cover)
            else:
                s, e, r, _ = self.base
                big = np.iinfo(np.int64).max // 4
                level = _combine(*_spread(s, e, r, 0.0, math.ldexp(1.0, k), -big, big))
            self._levels[k] = (level, np.searchsorted(level[0], np.arange(self.nrows + 1)))
        return self._levels[k][0]

    def columns(self, t0: float, px: float, ncol: int, row0: int, row1: int):
        """``(row, column, cover)``: the time the bars of rows ``row0 .. row1`` cover in
        each column ``[t0 + c px, t0 + (c + 1) px)``, ``c`` in ``0 .. ncol - 1``."""
        row1 = min(row1, self.nrows - 1)
        if row1 < row0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        t1 = t0 + ncol * px
        s, e, r, _ = self.base
        idx = _window(self._bounds, row0, row1, lambda a, b: (
            a + int(np.searchsorted(e[a:b], t0, side="left")),
            a + int(np.searchsorted(s[a:b], t1, side="right"))))
        if len(idx) <= DIRECT_LIMIT:
            return _spread(s[idx], e[idx], r[idx], t0, px, 0, ncol - 1)
        k = math.frexp(px)[1] - 1          # 2**k <= px: a bin falls in one or two columns
        rows, bins, cover = self.level(k)
        width = math.ldexp(1.0, k)
        b_lo, b_hi = math.floor(t0 / width) - 1, math.ceil(t1 / width) + 1
        idx = _window(self._levels[k][1], row0, row1, lambda a, b: (
            a + int(np.searchsorted(bins[a:b], b_lo, side="left")),
            a + int(np.searchsorted(bins[a:b], b_hi, side="right"))))
        col = np.floor(((bins[idx] + 0.5) * width - t0) / px).astype(np.int64)
        keep = (col >= 0) & (col < ncol)
        return rows[idx][keep], col[keep], cover[idx][keep]


def _window(bounds, row0: int, row1: int, span) -> np.ndarray:
    """The indices ``span(a, b)`` picks in each row's slice ``[a, b)``, concatenated."""
    pieces = []
    for r in range(row0, row1 + 1):
        a, b = int(bounds[r]), int(bounds[r + 1])
        if a < b:
            i, j = span(a, b)
            if i < j:
                pieces.append(np.arange(i, j))
    return np.concatenate(pieces) if pieces else np.zeros(0, np.int64)


class PixelColumns:
    """Bars of several colours on shared rows, resolved per pixel column: each column of
    a row shows the colour whose bars cover most of it (ties: the higher ``z``).

    Colours are added with :meth:`add`; :meth:`rects` answers one colour's rectangles of
    a frame (computed once per frame for all colours).
    """

    def __init__(self):
        self._raw: dict = {}        # key -> (start, end, top, bottom, z)
        self._bars: dict | None = None
        self._frame_key = None
        self._frame: dict = {}

    def add(self, key, start, end, top, bottom, z: float = 0.0) -> None:
        """The bars of colour ``key``: ``[start, end]`` in time, ``[top, bottom]`` in y."""
        self._raw[key] = tuple(np.asarray(a, np.float64) for a in (start, end, top, bottom)) \
            + (float(z),)
        self._bars, self._frame_key = None, None

    def _build(self) -> None:
        tops = np.unique(np.concatenate([v[2] for v in self._raw.values()] or [np.zeros(0)]))
        bottom = tops.copy()
        self._bars = {}
        for key, (s, e, top, bot, z) in self._raw.items():
            row = np.searchsorted(tops, top)
            np.maximum.at(bottom, row, bot)
            self._bars[key] = (CoverageBins(s, e, row), z)
        self.row_top = tops
        # a row's bottom: the tallest of its bars (the Gantt's are all one height)
        self.row_bottom = np.maximum.accumulate(bottom) if len(bottom) else bottom

    def bins(self, key) -> CoverageBins:
        if self._bars is None:
            self._build()
        return self._bars[key][0]

    def rows_in(self, y0: float, y1: float) -> tuple[int, int]:
        """The first and last row overlapping ``[y0, y1]``."""
        if self._bars is None:
            self._build()
        return (int(np.searchsorted(self.row_bottom, y0, side="left")),
                int(np.searchsorted(self.row_top, y1, side="right")) - 1)

    def rects(self, key, t0: float, t1: float, px: float, y0: float, y1: float):
        """``(x, width, top, height)`` of colour ``key``'s rectangles in the view
        ``[t0, t1] x [y0, y1]`` drawn at ``px`` per pixel."""
        frame = (t0, t1, px, y0, y1)
        if frame != self._frame_key:
            self._frame = self._resolve(t0, t1, px, y0, y1)
            self._frame_key = frame
        return self._frame.get(key, (np.zeros(0),) * 4)

    def _resolve(self, t0, t1, px, y0, y1) -> dict:
        if not px > 0 or not math.isfinite(px):
            raise ValueError(f"a pixel's width must be positive and finite, not {px!r}")
        if self._bars is None:
            self._build()
        r0, r1 = self.rows_in(y0, y1)
        if r1 < r0 or not self._bars:
            return {}
        t0 -= px   # a column of margin on both sides: no edge bar is cut short
        ncol = int(math.ceil((t1 - t0) / px)) + 2
        nrow = r1 - r0 + 1
        keys = list(self._bars)
        # per colour, row and column: how much of the column its bars cover
        cover = np.zeros((len(keys), nrow * ncol))
        for k, key in enumerate(keys):
            rows, cols, time = self._bars[key][0].columns(t0, px, ncol, r0, r1)
            if len(rows):
                cover[k] = np.bincount((rows - r0) * ncol + cols, time, nrow * ncol)
        z = np.array([self._bars[key][1] for key in keys])
        score = np.where(cover > 0, cover / px + 1e-6 * (z[:, None] + 1), 0.0)
        winner = score.argmax(axis=0).reshape(nrow, ncol)
        drawn = (score.max(axis=0) > 0).reshape(nrow, ncol)
        out = {}
        for k, key in enumerate(keys):
            mine = (winner == k) & drawn
            if not mine.any():
                continue
            edges = np.diff(np.pad(mine, ((0, 0), (1, 1))).astype(np.int8), axis=1)
            rs, cs = np.nonzero(edges == 1)
            _, ce = np.nonzero(edges == -1)       # row-major: pairs with the starts
            rows = rs + r0
            out[key] = (t0 + cs * px, (ce - cs) * px, self.row_top[rows],
                        self.row_bottom[rows] - self.row_top[rows])
        return out
