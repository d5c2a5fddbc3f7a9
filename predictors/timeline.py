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

from .fileio import atomic_write_bytes

__all__ = ["CATEGORIES", "Lane", "Timeline", "TimelineBuilder"]

# Stable colour classes for the Gantt and the exports (ui.md).
CATEGORIES = ("gemm", "embedding", "elementwise", "reduction", "communication", "memcpy",
              "view", "cpu_op", "cpu_overhead", "idle", "other")


@dataclass(frozen=True)
class Lane:
    """A row of the Gantt: a CPU thread, a device stream or a link of one rank."""

    rank: int
    kind: str  # "cpu" | "stream" | "link"
    name: str

    @property
    def label(self) -> str:
        return f"rank {self.rank} · {self.name}"


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

    def __len__(self) -> int:
        return int(self.start_us.shape[0])

    @property
    def rank(self) -> np.ndarray:
        ranks = np.array([l.rank for l in self.lanes], dtype=np.int32)
        return ranks[self.lane] if len(self.lanes) else np.zeros(0, np.int32)

    @property
    def ranks(self) -> list[int]:
        return sorted({l.rank for l in self.lanes})

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

    def busy_ms(self, lanes: list[int]) -> float:
        """Time during which at least one event runs on any of ``lanes`` (union)."""
        sel = np.isin(self.lane, lanes) & (self.category != CATEGORIES.index("idle"))
        if not sel.any():
            return 0.0
        order = np.argsort(self.start_us[sel], kind="stable")
        s = self.start_us[sel][order]
        e = (self.start_us[sel] + self.dur_us[sel])[order]
        run_end = np.maximum.accumulate(e)
        # A new busy interval begins where an event starts after everything before it ended.
        new = np.empty(len(s), bool)
        new[0] = True
        new[1:] = s[1:] > run_end[:-1]
        starts = s[new]
        ends = np.append(run_end[np.flatnonzero(new)[1:] - 1], run_end[-1])
        return float((ends - starts).sum()) / 1e3

    def lanes_of(self, rank: int, kind: str) -> list[int]:
        return [i for i, l in enumerate(self.lanes) if l.rank == rank and l.kind == kind]

    def device_active_ms(self, rank: int) -> float:
        """Busy time of the rank's device streams (CPU lanes where there are no streams)."""
        lanes = self.lanes_of(rank, "stream") or self.lanes_of(rank, "cpu")
        return self.busy_ms(lanes)

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
        """A Chrome trace-event document: pid = rank, tid = lane."""
        events = [{"ph": "M", "name": "process_name", "pid": r, "tid": 0,
                   "args": {"name": f"rank {r}"}} for r in self.ranks]
        for i, lane in enumerate(self.lanes):
            events.append({"ph": "M", "name": "thread_name", "pid": lane.rank, "tid": i,
                           "args": {"name": lane.name}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": lane.rank,
                           "tid": i, "args": {"sort_index": i}})
        ranks = self.rank
        for j in range(len(self)):
            events.append({
                "ph": "X", "name": self.names[self.name_id[j]],
                "cat": CATEGORIES[self.category[j]], "pid": int(ranks[j]),
                "tid": int(self.lane[j]), "ts": round(float(self.start_us[j]), 3),
                "dur": round(float(self.dur_us[j]), 3),
                "args": {"shapes": self.details[self.detail_id[j]]}})
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

    def build(self, **meta) -> Timeline:
        c = self._cols
        return Timeline(np.asarray(c[0], np.float64), np.asarray(c[1], np.float64),
                        np.asarray(c[2], np.int32), np.asarray(c[3], np.int16),
                        np.asarray(c[4], np.int32), np.asarray(c[5], np.int32),
                        list(self.lanes), list(self.names), list(self.details),
                        self.title, dict(meta))
