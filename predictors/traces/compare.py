"""A prediction beside a recording of the same scenario: iteration time, device active
time, and the error per op class and per lane (headless; the GUI draws it)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..engine.timeline import Timeline

__all__ = ["Comparison", "compare_timelines", "recorded_iteration"]


@dataclass
class Comparison:
    """The figures of a comparison; ``rows`` are sorted by the size of the difference."""

    predicted_ms: float
    recorded_ms: float
    predicted_active_ms: float
    recorded_active_ms: float
    recorded_step: str
    offset_us: float  # add to recorded times to align the chosen step with the prediction
    rows: list[dict] = field(default_factory=list)
    # device memory over the step, where both sides have a counter: each side's swing
    # (highest minus lowest allocated bytes), and peaks where the recording's are absolute
    memory: dict | None = None
    # the same scenario's median step without the profiler, where the trace carries it
    # (``measure --trace``): the profiler slows the step it records
    unprofiled_ms: float | None = None
    # what the reader must know to judge the error, e.g. another CPU than the profile's
    notes: list[str] = field(default_factory=list)

    @property
    def reference_ms(self) -> float:
        """The measured step the prediction is judged against: the unprofiled median
        where the trace carries one, else the recorded step."""
        return self.unprofiled_ms if self.unprofiled_ms else self.recorded_ms

    @property
    def error_pct(self) -> float | None:
        return _pct(self.predicted_ms, self.reference_ms)

    @property
    def profiler_cost_pct(self) -> float | None:
        """How much longer the recorded step ran than the unprofiled median."""
        return _pct(self.recorded_ms, self.unprofiled_ms) if self.unprofiled_ms else None

    def to_json(self) -> dict:
        return {"predicted_ms": self.predicted_ms, "recorded_ms": self.recorded_ms,
                **({"unprofiled_ms": self.unprofiled_ms,
                    "profiler_cost_pct": self.profiler_cost_pct}
                   if self.unprofiled_ms else {}),
                "error_pct": self.error_pct, "predicted_active_ms": self.predicted_active_ms,
                "recorded_active_ms": self.recorded_active_ms,
                "recorded_step": self.recorded_step, "rows": self.rows,
                **({"memory": self.memory} if self.memory is not None else {})}


def _pct(p: float, r: float) -> float | None:
    """Relative error in percent; None where nothing was recorded (no finite error)."""
    return 100.0 * (p - r) / r if r > 0 else (0.0 if p == 0 else None)


def recorded_iteration(rec: Timeline, rank: int | None = None) -> tuple[str, float, float]:
    """``(name, start_us, end_us)`` of the recorded iteration to compare with: the step of
    median duration (the whole trace where there are no steps)."""
    rank = rec.ranks[0] if rank is None and rec.ranks else rank
    steps = sorted((s for s in rec.steps if s.rank == rank), key=lambda s: s.dur_us)
    if steps:
        s = steps[(len(steps) - 1) // 2]
        return s.name, s.start_us, s.end_us
    return "whole trace", rec.begin_us, rec.end_us


def _memory_counter(tl: Timeline, rank: int) -> int | None:
    """The rank's device-memory counter lane (not the host's of a GPU recording)."""
    return next((k for k in tl.counters if tl.lanes[k].rank == rank
                 and tl.lanes[k].name.startswith("memory allocated")), None)


def _memory_figures(pred: Timeline, rank: int, rec: Timeline, rrank: int, t0: float,
                    t1: float) -> dict | None:
    p_lane, r_lane = _memory_counter(pred, rank), _memory_counter(rec, rrank)
    if p_lane is None or r_lane is None:
        return None
    p_values = pred.counters[p_lane][1]
    times, values = rec.counters[r_lane]
    inside = values[(times >= t0) & (times <= t1)]
    at_start = rec.counter_at(r_lane, t0)
    window = list(inside) + ([at_start] if at_start is not None else [])
    if not window or not len(p_values):
        return None
    out = {"predicted_peak_bytes": float(p_values.max()),
           "predicted_swing_bytes": float(p_values.max() - p_values.min()),
           "recorded_swing_bytes": float(max(window) - min(window))}
    if "(relative)" not in rec.lanes[r_lane].name:
        out["recorded_peak_bytes"] = float(max(window))
    return out


def _device_lanes(tl: Timeline, rank: int) -> list[int]:
    return tl.lanes_of(rank, "stream") or tl.lanes_of(rank, "cpu")


def _split_comm(tl: Timeline, lanes: list[int], t0: float | None = None,
                t1: float | None = None) -> tuple[list[int], list[int]]:
    """``(communication lanes, the others)``: a lane is communication when collectives
    take most of its busy time."""
    comm, other = [], []
    for lane in lanes:
        cats = tl.category_ms([lane], t0, t1)
        total = sum(cats.values())
        (comm if total and cats.get("communication", 0.0) > total / 2 else other).append(lane)
    return comm, other


def compare_timelines(pred: Timeline, rec: Timeline, rank: int = 0) -> Comparison:
    """Compare rank ``rank`` of a predicted and a recorded Timeline over one iteration."""
    rrank = rank if rank in rec.ranks else (rec.ranks[0] if rec.ranks else rank)
    name, t0, t1 = recorded_iteration(rec, rrank)
    p_ms = pred.span_ms(rank) if rank in pred.ranks else pred.span_ms()
    r_ms = (t1 - t0) / 1e3
    p_lanes, r_lanes = _device_lanes(pred, rank), _device_lanes(rec, rrank)
    p_act = pred.busy_ms(p_lanes)
    r_act = rec.busy_ms(r_lanes, t0, t1)
    rows = [{"group": "iteration", "key": "iteration time", "predicted_ms": p_ms,
             "recorded_ms": r_ms},
            {"group": "iteration", "key": "device active", "predicted_ms": p_act,
             "recorded_ms": r_act}]
    pc, rc = pred.category_ms(p_lanes), rec.category_ms(r_lanes, t0, t1)
    for cat in sorted(set(pc) | set(rc)):
        if cat == "idle":
            continue
        rows.append({"group": "op class", "key": cat, "predicted_ms": pc.get(cat, 0.0),
                     "recorded_ms": rc.get(cat, 0.0)})
    # Lanes are matched by kind and position: main thread with main thread, first stream
    # with first stream; streams that mostly carry collectives (NCCL's) pair with each
    # other, after the compute streams.
    groups = []
    for kind in ("cpu", "stream"):
        pl, rl = pred.lanes_of(rank, kind), rec.lanes_of(rrank, kind)
        if kind == "stream":
            pc_, pn = _split_comm(pred, pl)
            rc_, rn = _split_comm(rec, rl, t0, t1)
            groups += [(pn, rn), (pc_, rc_)]
        else:
            groups.append((pl, rl))
    for pl, rl in groups:
        for j in range(max(len(pl), len(rl))):
            p = pred.busy_ms([pl[j]]) if j < len(pl) else 0.0
            r = rec.busy_ms([rl[j]], t0, t1) if j < len(rl) else 0.0
            label = " ↔ ".join(x for x in (pred.lanes[pl[j]].name if j < len(pl) else "",
                                            rec.lanes[rl[j]].name if j < len(rl) else "")
                               if x)
            rows.append({"group": "lane", "key": label, "predicted_ms": p, "recorded_ms": r})
    for row in rows:
        row["diff_ms"] = row["predicted_ms"] - row["recorded_ms"]
        row["error_pct"] = _pct(row["predicted_ms"], row["recorded_ms"])
    head, rest = rows[:2], rows[2:]
    rest.sort(key=lambda r: -abs(r["diff_ms"]))
    p0 = pred.begin_us if len(pred) else 0.0
    unprofiled = (rec.meta.get("unprofiled") or {}).get("iteration_ms")
    return Comparison(p_ms, r_ms, p_act, r_act, name, p0 - t0, head + rest,
                      _memory_figures(pred, rank, rec, rrank, t0, t1),
                      float(unprofiled) if unprofiled else None, _cpu_notes(pred, rec))


def _cpu_notes(pred: Timeline, rec: Timeline) -> list[str]:
    """Whether the recording ran on the CPU the prediction's profile was calibrated on:
    a CPU step's kernels and gaps follow the CPU (``measure --trace`` records it)."""
    profile_cpu = pred.meta.get("profile_cpu")
    if not profile_cpu:
        return []
    recorded = (rec.meta.get("unprofiled") or {}).get("cpu")
    if not recorded:
        return [f"the trace does not say which CPU recorded it; the profile was "
                f"calibrated on {profile_cpu}"]
    if recorded != profile_cpu:
        return [f"recorded on another CPU ({recorded}) than the profile's ({profile_cpu}): "
                "the error includes the difference between the two CPUs"]
    return []
