"""The Timeline: one type for predicted and recorded executions.

Events are parallel numpy arrays (start, duration, lane, category, name id, detail id, rank),
so a million of them cost tens of MB and every view, comparison and export is vectorized.
"""
from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass, field

import numpy as np

from ..utils.fileio import atomic_write_bytes

__all__ = ["CATEGORIES", "LINKS_RANK", "Lane", "group_name", "Span", "Timeline", "TimelineBuilder"]

# Stable colour classes for the Gantt and the exports (ui.md).
CATEGORIES = ("gemm", "embedding", "elementwise", "reduction", "communication", "memcpy",
              "view", "cpu_op", "cpu_overhead", "idle", "other")
# The rank of the physical links' lanes (NVLink ports, PCIe links, NICs): they belong to the
# platform, not to one rank, and are grouped after the ranks as "links".
LINKS_RANK = -1


@dataclass(frozen=True)
class Lane:
    """A row of the Gantt: a CPU thread or a device stream of one rank, a counter
    (allocated memory) drawn as a curve, or a physical link (rank :data:`LINKS_RANK`)."""

    rank: int
    kind: str  # "cpu" | "stream" | "link" | "counter"
    name: str

    @property
    def label(self) -> str:
        return f"{group_name(self.rank)} · {self.name}"


def group_name(rank: int) -> str:
    """``rank 3``, or ``links`` for the links' group."""
    return "links" if rank == LINKS_RANK else f"rank {rank}"


@dataclass(frozen=True)
class Span:
    """A named time span of one rank that is not an event of a lane (a recorded
    ``ProfilerStep#N``).  Times are microseconds on the Timeline's clock."""

    rank: int
    name: str
    start_us: float
    dur_us: float

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


@dataclass
class Timeline:
    """Events in columnar arrays plus lane metadata.  Times are microseconds."""

    start_us: np.ndarray
    dur_us: np.ndarray
    lane: np.ndarray
    category: np.ndarray
    name_id: np.ndarray
    detail_id: np.ndarray
    lanes: list[Lane]
    names: list[str]
    details: list[str]
    title: str = ""
    meta: dict = field(default_factory=dict)
    steps: list[Span] = field(default_factory=list)
    # counter lane -> (times us, values): a step function, each value held until the next
    counters: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    @classmethod
    def from_arrays(cls, start_us, dur_us, lane, category, name_id, detail_id,
                    lanes: list[Lane], names: list[str], details: list[str] | None = None,
                    title: str = "", meta: dict | None = None,
                    steps: list[Span] | None = None,
                    counters: dict | None = None) -> "Timeline":
        """A Timeline from whole columns at once (importers fill them vectorized)."""
        n = len(start_us)
        return cls(np.asarray(start_us, np.float64), np.asarray(dur_us, np.float64),
                   np.asarray(lane, np.int32), np.asarray(category, np.int16),
                   np.asarray(name_id, np.int32),
                   np.zeros(n, np.int32) if detail_id is None else np.asarray(detail_id,
                                                                              np.int32),
                   list(lanes), list(names), list(details) if details else [""], title,
                   dict(meta or {}), list(steps or []), dict(counters or {}))

    def __len__(self) -> int:
        return int(self.start_us.shape[0])

    @property
    def rank(self) -> np.ndarray:
        ranks = np.array([l.rank for l in self.lanes], dtype=np.int32)
        return ranks[self.lane] if len(self.lanes) else np.zeros(0, np.int32)

    @property
    def ranks(self) -> list[int]:
        """The job's ranks (not the links' group)."""
        return sorted({l.rank for l in self.lanes if l.rank != LINKS_RANK})

    @property
    def end_us(self) -> float:
        return float((self.start_us + self.dur_us).max()) if len(self) else 0.0

    @property
    def begin_us(self) -> float:
        return float(self.start_us.min()) if len(self) else 0.0

    def span_ms(self, rank: int | None = None) -> float:
        """Wall time from the first event to the end of the last (of one rank)."""
        sel = np.ones(len(self), bool) if rank is None else self.rank == rank
        if not sel.any():
            return 0.0
        s, e = self.start_us[sel], self.start_us[sel] + self.dur_us[sel]
        return float(e.max() - s.min()) / 1e3

    def busy_intervals(self, lanes: list[int], t0: float | None = None,
                       t1: float | None = None,
                       mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Disjoint sorted ``(starts, ends)`` (us) where some event of ``lanes`` runs,
        clipped to ``[t0, t1]``; ``mask`` further selects events."""
        sel = np.isin(self.lane, lanes) & (self.category != CATEGORIES.index("idle"))
        if mask is not None:
            sel &= mask
        s = self.start_us[sel]
        e = s + self.dur_us[sel]
        if t0 is not None:
            s = np.maximum(s, t0)
        if t1 is not None:
            e = np.minimum(e, t1)
        keep = e > s
        s, e = s[keep], e[keep]
        if not len(s):
            return np.zeros(0), np.zeros(0)
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
        run_end = np.maximum.accumulate(e)
        # A new busy interval begins where an event starts after everything before it ended.
        new = np.empty(len(s), bool)
        new[0] = True
        new[1:] = s[1:] > run_end[:-1]
        starts = s[new]
        ends = np.append(run_end[np.flatnonzero(new)[1:] - 1], run_end[-1])
        return starts, ends

    def busy_ms(self, lanes: list[int], t0: float | None = None,
                t1: float | None = None) -> float:
        """Time during which at least one event runs on any of ``lanes`` (union),
        optionally only inside ``[t0, t1]`` (us)."""
        starts, ends = self.busy_intervals(lanes, t0, t1)
        return float((ends - starts).sum()) / 1e3

    def lanes_of(self, rank: int, kind: str) -> list[int]:
        return [i for i, l in enumerate(self.lanes) if l.rank == rank and l.kind == kind]

    def counter_at(self, lane: int, t_us: float) -> float | None:
        """A counter's value at ``t_us`` (None before its first point)."""
        times, values = self.counters[lane]
        k = int(np.searchsorted(times, t_us, side="right")) - 1
        return float(values[k]) if k >= 0 else None

    def device_active_ms(self, rank: int) -> float:
        """Busy time of the rank's device streams; on a CPU rank (no compute stream), of
        its CPU lanes and its communication."""
        lanes = self.lanes_of(rank, "stream")
        if all("communication" in self.lanes[i].name for i in lanes):
            lanes = lanes + self.lanes_of(rank, "cpu")
        return self.busy_ms(lanes)

    def step_window(self, rank: int | None = None) -> tuple[float, float] | None:
        """``(first step start, last step end)`` in us (of one rank), None without steps."""
        steps = [s for s in self.steps if rank is None or s.rank == rank]
        if not steps:
            return None
        return min(s.start_us for s in steps), max(s.end_us for s in steps)

    def category_ms(self, lanes: list[int], t0: float | None = None,
                    t1: float | None = None) -> dict[str, float]:
        """Summed event time per category over ``lanes`` (inside ``[t0, t1]``), ms."""
        sel = np.isin(self.lane, lanes)
        s = self.start_us[sel]
        e = s + self.dur_us[sel]
        if t0 is not None:
            s = np.maximum(s, t0)
        if t1 is not None:
            e = np.minimum(e, t1)
        d = np.clip(e - s, 0.0, None)
        tot = np.bincount(self.category[sel].astype(np.int64), weights=d,
                          minlength=len(CATEGORIES))
        return {CATEGORIES[i]: float(tot[i]) / 1e3 for i in range(len(CATEGORIES)) if tot[i]}

    def exposed_comm_ms(self, rank: int, t0: float | None = None,
                        t1: float | None = None, names: tuple[str, ...] = ()) -> float:
        """Communication time of ``rank``'s streams that no computing kernel overlaps,
        ms (``names``: only the collectives of these names, e.g. ``nccl:all_to_all``)."""
        lanes = self.lanes_of(rank, "stream")
        if not lanes:
            return 0.0
        comm = self.category == CATEGORIES.index("communication")
        compute = ~comm
        if names:
            comm = comm & np.isin(self.name_id, [i for i, n in enumerate(self.names)
                                                 if n in names])
        cs, ce = self.busy_intervals(lanes, t0, t1, mask=comm)
        if not len(cs):
            return 0.0
        ks, ke = self.busy_intervals(lanes, t0, t1, mask=compute)
        both = np.concatenate([cs, ks]), np.concatenate([ce, ke])
        order = np.argsort(both[0], kind="stable")
        s, e = both[0][order], both[1][order]
        run_end = np.maximum.accumulate(e)
        new = np.ones(len(s), bool)
        new[1:] = s[1:] > run_end[:-1]
        union = float((np.append(run_end[np.flatnonzero(new)[1:] - 1], run_end[-1])
                       - s[new]).sum())
        return (union - float((ke - ks).sum())) / 1e3

    def shifted(self, dt_us: float) -> "Timeline":
        """The same Timeline with every time moved by ``dt_us``."""
        return Timeline(self.start_us + dt_us, self.dur_us, self.lane, self.category,
                        self.name_id, self.detail_id, self.lanes, self.names, self.details,
                        self.title, dict(self.meta),
                        [Span(s.rank, s.name, s.start_us + dt_us, s.dur_us)
                         for s in self.steps],
                        {k: (t + dt_us, v) for k, (t, v) in self.counters.items()})

    def with_lanes(self, keep: list[int]) -> "Timeline":
        """Only the events of lanes ``keep`` (in that order); lanes are renumbered."""
        remap = np.full(len(self.lanes), -1, np.int32)
        remap[np.asarray(keep, np.int64)] = np.arange(len(keep), dtype=np.int32)
        sel = remap[self.lane] >= 0 if len(self) else np.zeros(0, bool)
        meta = dict(self.meta)
        if "critical_path" in meta:  # event indices: renumbered with the events kept
            new_index = np.cumsum(sel) - 1
            meta["critical_path"] = [int(new_index[i]) for i in meta["critical_path"]
                                     if i < len(sel) and sel[i]]
        return Timeline(self.start_us[sel], self.dur_us[sel], remap[self.lane[sel]],
                        self.category[sel], self.name_id[sel], self.detail_id[sel],
                        [self.lanes[i] for i in keep], self.names, self.details, self.title,
                        meta, list(self.steps),
                        {int(remap[k]): c for k, c in self.counters.items() if remap[k] >= 0})

    def lane_order(self, lane: int) -> np.ndarray:
        """Indices of the events of ``lane`` sorted by start (for hover lookups)."""
        idx = np.flatnonzero(self.lane == lane)
        return idx[np.argsort(self.start_us[idx], kind="stable")]

    def top_ops(self, k: int = 10, lanes: list[int] | None = None) -> list[dict]:
        """Names with the largest total duration, over ``lanes`` (default: all)."""
        sel = np.ones(len(self), bool) if lanes is None else np.isin(self.lane, lanes)
        if not sel.any():
            return []
        totals = np.bincount(self.name_id[sel], weights=self.dur_us[sel],
                             minlength=len(self.names))
        counts = np.bincount(self.name_id[sel], minlength=len(self.names))
        cats = np.zeros(len(self.names), np.int64)
        cats[self.name_id[sel]] = self.category[sel]
        order = np.argsort(-totals)[:k]
        return [{"name": self.names[i], "category": CATEGORIES[cats[i]],
                 "total_ms": float(totals[i]) / 1e3, "count": int(counts[i])}
                for i in order if counts[i]]

    # --- Chrome trace (Perfetto) --------------------------------------------------------

    def to_chrome_trace(self) -> dict:
        """A Chrome trace-event document: pid = rank (the links: one process after the
        ranks), tid = lane."""
        events = [{"ph": "M", "name": "process_name", "pid": r, "tid": 0,
                   "args": {"name": f"rank {r}"}} for r in self.ranks]
        links_pid = max(self.ranks, default=-1) + 1
        pids = np.array([links_pid if l.rank == LINKS_RANK else l.rank for l in self.lanes]
                        or [0], dtype=np.int64)
        if any(l.rank == LINKS_RANK for l in self.lanes):
            events.append({"ph": "M", "name": "process_name", "pid": links_pid, "tid": 0,
                           "args": {"name": "links"}})
        for i, lane in enumerate(self.lanes):
            if lane.kind == "counter":   # a counter track of its own, not a thread
                continue
            events.append({"ph": "M", "name": "thread_name", "pid": int(pids[i]), "tid": i,
                           "args": {"name": lane.name}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": int(pids[i]),
                           "tid": i, "args": {"sort_index": i}})
        ranks = pids[self.lane] if len(self) else np.zeros(0, np.int64)
        on_path = set(int(j) for j in self.meta.get("critical_path") or ())
        for j in range(len(self)):
            events.append({
                "ph": "X", "name": self.names[self.name_id[j]],
                "cat": CATEGORIES[self.category[j]], "pid": int(ranks[j]),
                "tid": int(self.lane[j]), "ts": round(float(self.start_us[j]), 3),
                "dur": round(float(self.dur_us[j]), 3),
                "args": {"shapes": self.details[self.detail_id[j]],
                         **({"critical_path": True} if j in on_path else {})}})
        for k, (times, values) in self.counters.items():
            lane = self.lanes[k]   # Perfetto draws "C" events as a counter track
            events.extend({"ph": "C", "name": lane.name, "pid": lane.rank,
                           "ts": round(float(t), 3), "args": {"bytes": int(v)}}
                          for t, v in zip(times, values))
        return {"traceEvents": events, "displayTimeUnit": "ms",
                "otherData": {"title": self.title, **{k: v for k, v in self.meta.items()
                                                       if isinstance(v, (str, int, float))}}}

    def save_chrome_trace(self, path: str | os.PathLike) -> None:
        """Write the Chrome trace atomically (gzipped when the name ends in ``.gz``)."""
        data = json.dumps(self.to_chrome_trace()).encode()
        if os.fspath(path).endswith(".gz"):
            data = gzip.compress(data)
        atomic_write_bytes(path, data)


class TimelineBuilder:
    """Accumulates events one by one (a simulator's output) and freezes them."""

    def __init__(self, title: str = ""):
        self.title = title
        self.lanes: list[Lane] = []
        self._lane_index: dict[tuple, int] = {}
        self.names: list[str] = []
        self._name_index: dict[str, int] = {}
        self.details: list[str] = [""]
        self._detail_index: dict[str, int] = {"": 0}
        self._cols: list[list] = [[], [], [], [], [], []]
        self.counters: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def __len__(self) -> int:
        """The events added so far (the next one's index)."""
        return len(self._cols[0])

    def lane(self, rank: int, kind: str, name: str) -> int:
        key = (rank, kind, name)
        if key not in self._lane_index:
            self._lane_index[key] = len(self.lanes)
            self.lanes.append(Lane(rank, kind, name))
        return self._lane_index[key]

    def _intern(self, table: list, index: dict, text: str) -> int:
        if text not in index:
            index[text] = len(table)
            table.append(text)
        return index[text]

    def add(self, lane: int, start_us: float, dur_us: float, category: str, name: str,
            detail: str = "") -> None:
        c = self._cols
        c[0].append(start_us)
        c[1].append(dur_us)
        c[2].append(lane)
        c[3].append(CATEGORIES.index(category))
        c[4].append(self._intern(self.names, self._name_index, name))
        c[5].append(self._intern(self.details, self._detail_index, detail))

    def counter(self, rank: int, name: str, t_us, values) -> int:
        """A counter lane of ``rank``: ``values`` from each time in ``t_us`` on (sorted);
        runs of equal values keep their first point."""
        t = np.asarray(t_us, np.float64)
        v = np.asarray(values, np.float64)
        keep = np.ones(len(v), bool)
        keep[1:] = v[1:] != v[:-1]
        lane = self.lane(rank, "counter", name)
        self.counters[lane] = (t[keep], v[keep])
        return lane

    def build(self, **meta) -> Timeline:
        c = self._cols
        return Timeline(np.asarray(c[0], np.float64), np.asarray(c[1], np.float64),
                        np.asarray(c[2], np.int32), np.asarray(c[3], np.int16),
                        np.asarray(c[4], np.int32), np.asarray(c[5], np.int32),
                        list(self.lanes), list(self.names), list(self.details),
                        self.title, dict(meta), [], dict(self.counters))
