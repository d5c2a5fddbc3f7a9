"""Level of detail for the Gantt's bars, free of Qt: what to draw of a million bars.

When the whole iteration of a cluster shows, most bars are narrower than a pixel and
thousands share a pixel column; drawing each of them every frame costs more than the 50 ms
a frame may take, and drawn over one another, the colour drawn last hides the others.
:class:`PixelColumns` answers, for a view (a time window, the width of a pixel, the rows in
view), per row and pixel column the colour whose bars cover most of the column, as runs of
columns: a stream that runs mostly GEMMs looks mostly GEMM blue at any zoom, a column with
any bar in it is never blank, and a frame draws at most a few rectangles per pixel row.

Each colour's bars are kept as :class:`CoverageBins`: per row, the time its bars cover in
each bin of a power-of-two width.  A coarse view reads the bins of its pixel width, binned
the first time for the rows in view and a view's width of time on either side, and cached
(a pan or scroll bins only what it uncovers); a fine view, with few bars in its window,
measures them exactly.

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


def _bin_span(s, e, origin: float, width: float):
    """The first and last bin ``[origin + k width, + width)`` each interval touches."""
    b0 = np.floor((s - origin) / width + 1e-9).astype(np.int64)
    b1 = np.ceil((e - origin) / width - 1e-9).astype(np.int64) - 1
    return b0, b1


def _pieces(s, e, b0, n, origin: float, width: float):
    """``(interval, bin, cover)``: the time each interval covers in its ``n`` bins from
    ``b0`` on (none where ``n`` is 0), in the order of the intervals, then of the bins."""
    total = int(n.sum())
    if total == len(n) and (not total or n.min() == 1):     # one bin each
        src, k = np.arange(total), b0
    else:
        src = np.repeat(np.arange(len(n)), n)
        k = np.repeat(b0 - np.cumsum(n) + n, n) + np.arange(total)
    ss, ee = s[src], e[src]
    left = origin + k * width
    cover = np.minimum(ee, left + width) - np.maximum(ss, left)
    return src, k, np.maximum(cover, _MIN_SHARE * width)


def _spread(s, e, r, origin: float, width: float, lo: int, hi: int):
    """``(row, bin, cover)`` of intervals over bins ``[origin + k width, + width)``,
    ``k`` in ``lo .. hi``: the time each interval covers in each bin it touches."""
    b0, b1 = _bin_span(s, e, origin, width)
    b0 = np.clip(b0, lo, hi)
    src, k, cover = _pieces(s, e, b0, np.clip(b1, b0, hi) - b0 + 1, origin, width)
    return r[src], k, cover


def _combine(rows, bins, cover):
    """Sum the covers of equal ``(row, bin)`` pairs (given sorted by row, then bin)."""
    if not len(rows):
        return rows, bins, cover
    new = np.ones(len(rows), bool)
    new[1:] = (rows[1:] != rows[:-1]) | (bins[1:] != bins[:-1])
    first = np.flatnonzero(new)
    return rows[first], bins[first], np.add.reduceat(cover, first)


def _bin_parts(s, e, lo, hi, first, last, width: float):
    """``(bin, cover, cuts)``: per part ``p``, in ``bin[cuts[p]:cuts[p + 1]]`` (sorted),
    what the intervals ``first[p] .. last[p] - 1`` of one row (those of them that touch the
    bins) cover in the bins ``lo[p] .. hi[p]`` of ``[k width, (k + 1) width)``; to the bit
    what :func:`_spread` from 0 over all the bins, then :func:`_combine`, gives there."""
    count = last - first
    if np.array_equal(first[1:], last[:-1]):     # one run of intervals: no copy
        ss, ee = s[first[0]:last[-1]], e[first[0]:last[-1]]
    else:
        idx = np.repeat(first - np.cumsum(count) + count, count) + np.arange(int(count.sum()))
        ss, ee = s[idx], e[idx]
    if len(first) == 1:
        lo_i, hi_i = int(lo[0]), int(hi[0])
    else:
        lo_i, hi_i = np.repeat(lo, count), np.repeat(hi, count)
    b0, b1 = _bin_span(ss, ee, 0.0, width)
    keep = (np.maximum(b1, b0) >= lo_i) & (b0 <= hi_i)
    b0 = np.clip(b0, lo_i, hi_i)
    n = np.clip(b1, b0, hi_i)
    n -= b0
    n += 1
    n[~keep] = 0
    _, bins, cover = _pieces(ss, ee, b0, n, 0.0, width)
    # the first piece of each part, then of each bin in it: the sums of the bins
    at = np.r_[0, np.cumsum(n)][np.r_[0, np.cumsum(count)]]
    new = np.ones(len(bins), bool)
    new[1:] = bins[1:] != bins[:-1]
    new[at[:-1][at[:-1] < len(bins)]] = True
    first_piece = np.flatnonzero(new)
    if not len(first_piece):
        return bins, cover, np.zeros(len(first) + 1, np.int64)
    return (bins[first_piece], np.add.reduceat(cover, first_piece),
            np.searchsorted(first_piece, at))


# Rows above and below the view that a frame bins with it, so that a scroll of a few rows
# finds them binned; and the time binned on either side of the view, in view widths.
_ROW_MARGIN = 4
_TIME_MARGIN = 1
_CHUNK = 1 << 15    # intervals binned at a time
# Finer widths binned with a view of the whole span: the first zoom-ins from it would each
# bin the whole span again (their view and its margins still cover it), the first drawing
# does it once instead.
_PREBIN = 3


class _Level:
    """The bins of one power-of-two width, per row, for the bins ``lo[r] .. hi[r]`` (both
    included) binned so far: ``bins[r]`` (sorted) and ``cover[r]``."""

    def __init__(self, bounds):
        nrows = len(bounds) - 1
        empty = bounds[1:] == bounds[:-1]
        big = np.iinfo(np.int64).max // 4
        self.lo = np.where(empty, -big, 0)    # a row with no bars: binned everywhere
        self.hi = np.where(empty, big, -1)
        self.bins = [np.zeros(0, np.int64)] * nrows
        self.cover = [np.zeros(0)] * nrows

    def missing(self, rows: np.ndarray, b_lo: int, b_hi: int) -> np.ndarray:
        """The rows among ``rows`` not binned for all of ``b_lo .. b_hi``."""
        return rows[(self.lo[rows] > b_lo) | (self.hi[rows] < b_hi)]


class CoverageBins:
    """The bars of one colour, per row: their busy intervals, and how much of each bin of a
    power-of-two width they cover (binned where a view needs them, and cached).

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
        self._levels: dict[int, _Level] = {}
        s, e = self.base[0], self.base[1]
        self._span = (float(s.min()), float(e.max())) if len(s) else (0.0, 0.0)

    def busy(self) -> float:
        """The time the bars cover, overlaps counted once."""
        return float((self.base[1] - self.base[0]).sum())

    def level(self, k: int):
        """``(row, bin, cover)`` over bins ``[j 2**k, (j + 1) 2**k)``, every row and bin,
        sorted: the time the bars cover in each bin (each bar at least a ``_MIN_SHARE`` of
        the bin), binned from all the intervals, uncached.  :meth:`window` reads parts."""
        s, e, r, _ = self.base
        big = np.iinfo(np.int64).max // 4
        return _combine(*_spread(s, e, r, 0.0, math.ldexp(1.0, k), -big, big))

    def window(self, k: int, row0: int, row1: int, b_lo: int, b_hi: int):
        """The part of :meth:`level` ``k`` in rows ``row0 .. row1`` and bins ``b_lo ..
        b_hi``, equal to it to the bit.  Binned the first time a view needs it, with a
        margin of :data:`_ROW_MARGIN` rows and :data:`_TIME_MARGIN` view widths, so that
        a zoom bins only what is near the view, and a pan or scroll only what it uncovers."""
        row1 = min(row1, self.nrows - 1)
        if row1 < row0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        lvl = self._levels.get(k)
        if lvl is None:
            lvl = self._levels[k] = _Level(self._bounds)
        if len(lvl.missing(np.arange(row0, row1 + 1), b_lo, b_hi)):
            near = np.arange(max(row0 - _ROW_MARGIN, 0),
                             min(row1 + _ROW_MARGIN, self.nrows - 1) + 1)
            m = _TIME_MARGIN * (b_hi - b_lo + 1)
            self._extend(lvl, k, lvl.missing(near, b_lo, b_hi), b_lo - m, b_hi + m)
        bins, cover, count = [], [], np.zeros(row1 - row0 + 1, np.int64)
        for r in range(row0, row1 + 1):
            b = lvl.bins[r]
            i, j = np.searchsorted(b, b_lo, side="left"), np.searchsorted(b, b_hi, side="right")
            if i < j:
                bins.append(b[i:j])
                cover.append(lvl.cover[r][i:j])
                count[r - row0] = j - i
        if not bins:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        return (np.repeat(np.arange(row0, row1 + 1), count), np.concatenate(bins),
                np.concatenate(cover))

    def _extend(self, lvl: _Level, k: int, rows, lo: int, hi: int) -> None:
        """Bin ``rows`` of ``lvl`` for ``lo .. hi`` too: the bins each lacks."""
        # jobs: (row, first bin, last bin, side): a row's new bins go before (-1) or after
        # (1) those it has, or replace them (0) where the two would not touch
        jobs = []
        for r in rows.tolist():
            old_lo, old_hi = int(lvl.lo[r]), int(lvl.hi[r])
            if old_hi < old_lo or hi < old_lo - 1 or lo > old_hi + 1:
                jobs.append((r, lo, hi, 0))
                lvl.lo[r], lvl.hi[r] = lo, hi
                continue
            if lo < old_lo:
                jobs.append((r, lo, old_lo - 1, -1))
            if hi > old_hi:
                jobs.append((r, old_hi + 1, hi, 1))
            lvl.lo[r], lvl.hi[r] = min(lo, old_lo), max(hi, old_hi)
        width = math.ldexp(1.0, k)
        done = self._bin_jobs(jobs, width)
        for (r, _, _, side), (bins, cover) in zip(jobs, done):
            if side > 0:
                bins, cover = [lvl.bins[r]] + bins, [lvl.cover[r]] + cover
            elif side < 0:
                bins, cover = bins + [lvl.bins[r]], cover + [lvl.cover[r]]
            lvl.bins[r] = np.concatenate(bins) if len(bins) > 1 else bins[0]
            lvl.cover[r] = np.concatenate(cover) if len(cover) > 1 else cover[0]

    def _bin_jobs(self, jobs, width: float) -> list:
        """Per job ``(row, first bin, last bin, _)``: ``([bins, ...], [cover, ...])``, the
        part of the level in those bins, as pieces to concatenate.  Binned a few thousand
        intervals at a time: small arrays stay in the cache and need no fresh memory."""
        s, e, _, _ = self.base
        # parts of the jobs, split by bins to hold at most _CHUNK intervals each, and the
        # intervals that may touch each part (a bin of slack; :func:`_bin_parts` keeps
        # exactly those)
        parts = []
        for n, (r, b0, b1, _) in enumerate(jobs):
            a, b = int(self._bounds[r]), int(self._bounds[r + 1])
            ends, starts = e[a:b], s[a:b]
            i, j = np.searchsorted(ends, (b0 - 1) * width), np.searchsorted(
                starts, (b1 + 2) * width, side="right")
            split = min(-(-(j - i) // _CHUNK), b1 - b0 + 1)
            edges = [b0 + (b1 - b0 + 1) * m // split for m in range(split + 1)] if split > 1 \
                else [b0, b1 + 1]
            for lo, hi in zip(edges[:-1], np.subtract(edges[1:], 1).tolist()):
                if len(edges) > 2:
                    i = np.searchsorted(ends, (lo - 1) * width)
                    j = np.searchsorted(starts, (hi + 2) * width, side="right")
                parts.append((n, lo, hi, a + int(i), a + max(int(j), int(i))))
        out = [([], []) for _ in jobs]
        batch, size = [], 0
        for part in parts + [None]:
            if part is None or (batch and size + part[4] - part[3] > _CHUNK):
                _, lo, hi, first, last = map(np.array, zip(*batch))
                bins, cover, cuts = _bin_parts(s, e, lo, hi, first, last, width)
                for m, (n, *_) in enumerate(batch):
                    out[n][0].append(bins[cuts[m]:cuts[m + 1]])
                    out[n][1].append(cover[cuts[m]:cuts[m + 1]])
                batch, size = [], 0
            if part is not None:
                batch.append(part)
                size += part[4] - part[3]
        return out

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
        width = math.ldexp(1.0, k)
        if k not in self._levels and t0 <= self._span[0] and t1 >= self._span[1]:
            for finer in range(k - _PREBIN, k):   # the whole span in view: see _PREBIN
                w = math.ldexp(1.0, finer)
                self.window(finer, row0, row1, math.floor(t0 / w) - 1, math.ceil(t1 / w) + 1)
        rows, bins, cover = self.window(k, row0, row1, math.floor(t0 / width) - 1,
                                        math.ceil(t1 / width) + 1)
        col = np.floor(((bins + 0.5) * width - t0) / px).astype(np.int64)
        keep = (col >= 0) & (col < ncol)
        return rows[keep], col[keep], cover[keep]


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
        score = cover / px
        score += 1e-6 * (z[:, None] + 1)
        score[~(cover > 0)] = 0.0
        winner = score.argmax(axis=0).reshape(nrow, ncol)
        # each row's runs of one winner, found for all colours at once: a run starts at
        # each change of winner and ends at the next (-1: none drawn, also in the margins)
        won = np.full((nrow, ncol + 2), -1, np.int64)
        won[:, 1:-1] = np.where((score.max(axis=0) > 0).reshape(nrow, ncol), winner, -1)
        rs, cs = np.nonzero(won[:, 1:] != won[:, :-1])       # row-major
        ce = np.r_[cs[1:], 0]
        of = won[rs, cs + 1]
        run = of >= 0
        rs, cs, ce, of = rs[run], cs[run], ce[run], of[run]
        order = np.argsort(of, kind="stable")                 # by colour, row-major in each
        cuts = np.searchsorted(of[order], np.arange(len(keys) + 1))
        out = {}
        for k, key in enumerate(keys):
            if cuts[k] == cuts[k + 1]:
                continue
            mine = order[cuts[k]:cuts[k + 1]]
            rows, start = rs[mine] + r0, cs[mine]
            out[key] = (t0 + start * px, (ce[mine] - start) * px, self.row_top[rows],
                        self.row_bottom[rows] - self.row_top[rows])
        return out
