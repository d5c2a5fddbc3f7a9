"""Profile real training steps and pair each recorded op with its captured twin.

The profiler nests ops (``aten::linear`` > ``aten::addmm`` > ``aten::copy_``); the capture
sees dispatch-level ops.  A recorded op is *comparable* when it computes, no ancestor of it
is an op the capture knows, and it is not a composite wrapper of captured ops.  Those
recorded ops align one to one, in order, with the captured compute ops (tests check this
on DLRM and transformer models), which gives measured durations for captured shapes.

A scenario is warmed up until its step time stops falling, then several profiled steps
are taken, each right after an unprofiled one (both see the same machine state), and
every op's duration and gap is the median over them: one profiled step on a shared VM
is as noisy as the effects the models should learn.
"""
from __future__ import annotations

import bisect
import difflib
import functools
import statistics
import time
from dataclasses import dataclass, field

import torch
from torch.autograd.profiler import record_function
from torch.profiler import ProfilerActivity, profile

from ..hardware.platforms import resolve_platform
from ..model.capture import capture_training_step
from ..model.op_classes import classify
from ..model.workload import build_workload, training_step

__all__ = ["StepProfile", "profile_step", "comparable_events", "recorded_events", "warm_up",
           "STEP_SPAN", "RECOVERY_STEPS"]

STEP_SPAN = "ml-dse::training_step"
# Untimed steps after a profiled step, before the next timed one: the profiler's event
# buffers evict the caches, and the next steps run slow, the first by 18-30 % on 2-5 ms
# DLRM steps and the third by 2-7 % (2.5 % and none on an 18 ms one; Zen 4 VM).  Timing
# the step right after a profiled one would make the unprofiled reference slow, the
# profiler's pooled cost per event small, and small steps over-predicted.
RECOVERY_STEPS = 3


@dataclass
class StepProfile:
    """Profiled training steps of one scenario, aligned with its capture.

    ``records``: one dict per aligned compute op: the captured ``node`` attributes,
    ``dur_us`` (inclusive, profiler overhead removed) and ``gap_us`` (CPU time since the
    previous compute op ended: Python, views, composite wrappers, frees), each the median
    over the profiled steps (``dur_raw``/``gap_raw``: before the profiler's cost is
    removed, with the number of events inside; ``dur_steps``/``dur_steps_us``: every
    profiled step's duration, raw and net, whose spread is the measurement noise).
    ``tail_us``: the step's time outside the aligned ops (before the first one: zero_grad,
    the module call; after the last one: the optimizer's Python), measured inside the
    profiled steps.  ``step_us``: the median unprofiled step, interleaved with them.
    """

    scenario: str
    threads: int
    step_us: float  # median unprofiled step time (steady state)
    profiled_step_us: float
    per_event_overhead_us: float
    records: list[dict] = field(default_factory=list)
    unaligned: int = 0
    tail_us: float = 0.0
    warmup_steps: int = 0
    profiled_steps: int = 1
    step_samples_us: list[float] = field(default_factory=list)
    events: int = 0  # events one profiled step records
    tail_raw: tuple[float, int] | None = None
    device_busy_us: float | None = None  # GPU steps: the traced step's kernel time
    graph: object = field(default=None, repr=False, compare=False)  # the step's capture

    def remove_profiler_cost(self, per_event_us: float) -> None:
        """Set ``dur_us``, ``gap_us`` and ``tail_us`` from the raw figures (``dur_raw``,
        ``gap_raw``, ``tail_raw``: profiled microseconds and the events recorded inside
        them), less ``per_event_us`` per event."""
        self.per_event_overhead_us = per_event_us
        for r in self.records:
            us, n = r["dur_raw"]
            r["dur_us"] = max(0.05, us - per_event_us * n)
            # each profiled step's own duration: their spread is the noise floor
            r["dur_steps_us"] = [max(0.05, u - per_event_us * k)
                                 for u, k in r.get("dur_steps", ())]
            us, n = r["gap_raw"]
            r["gap_us"] = max(0.0, us - per_event_us * n)
        if self.tail_raw is not None:
            us, n = self.tail_raw
            self.tail_us = max(0.0, us - per_event_us * n)
        else:  # no step span: what the unprofiled step leaves over
            covered = sum(r["dur_us"] + r["gap_us"] for r in self.records)
            self.tail_us = max(0.0, self.step_us - covered)

    def raw_us(self) -> tuple[float, int]:
        """The profiled step as its aligned ops, gaps and tail account for it, and the
        events recorded in them (profiler cost included)."""
        parts = [r["dur_raw"] for r in self.records] + [r["gap_raw"] for r in self.records]
        if self.tail_raw is not None:
            parts.append(self.tail_raw)
        return sum(p[0] for p in parts), sum(p[1] for p in parts)

    @property
    def covered_us(self) -> float:
        """Sum of the aligned ops' durations and gaps plus the tail: the step time as the
        profiled steps account for it (compare with ``step_us``)."""
        return sum(r["dur_us"] + r["gap_us"] for r in self.records) + self.tail_us


def comparable_events(events, captured: set[str]) -> list:
    """The recorded ops that a dispatch-level capture also sees (see module doc)."""
    def covered(e) -> bool:
        p = e.cpu_parent
        while p is not None:
            if p.name in captured:
                return True
            p = p.cpu_parent
        return False

    def wraps_captured(e) -> bool:
        return any(c.name in captured or wraps_captured(c) for c in e.cpu_children)

    return [e for e in events if classify(e.name) != "view" and not covered(e)
            and (e.name in captured or not wraps_captured(e))]


def _descendants(e) -> int:
    return sum(1 + _descendants(c) for c in e.cpu_children)


class _Range:
    __slots__ = ("start", "end")

    def __init__(self, start: float, end: float):
        self.start, self.end = start, end


class _Event:
    """A recorded CPU event with the attributes :func:`comparable_events` reads (the same
    names as torch's ``FunctionEvent``), times in microseconds."""

    __slots__ = ("name", "time_range", "cpu_parent", "cpu_children")

    def __init__(self, name: str, start: float, end: float):
        self.name, self.time_range = name, _Range(start, end)
        self.cpu_parent, self.cpu_children = None, []


def recorded_events(prof) -> list:
    """Every CPU event of a finished profiler session, nested per thread, sorted by
    (start, -end).  Reads Kineto's raw events: building torch's ``FunctionEvent`` list
    costs ~0.1 ms per event, which for three profiled steps of a large model is seconds."""
    try:
        raw = prof.profiler.kineto_results.events()
    except AttributeError:  # another torch: its own (slower) event list
        return sorted(prof.events(), key=lambda e: (e.time_range.start, -e.time_range.end))
    rows = sorted(((e.start_thread_id(), e.start_ns(), -e.duration_ns(), e.name())
                   for e in raw if e.device_type() == torch.autograd.DeviceType.CPU),
                  key=lambda r: r[:3])
    out, stack, thread = [], [], None
    for tid, start, neg_dur, name in rows:
        if tid != thread:
            stack, thread = [], tid
        ev = _Event(name, start / 1e3, (start - neg_dur) / 1e3)
        while stack and stack[-1].time_range.end <= ev.time_range.start:
            stack.pop()
        if stack:
            ev.cpu_parent = stack[-1]
            stack[-1].cpu_children.append(ev)
        stack.append(ev)
        out.append(ev)
    out.sort(key=lambda e: (e.time_range.start, -e.time_range.end))
    return out


def _timed_step(workload, batch, optimizer) -> float:
    t0 = time.perf_counter()
    training_step(workload.module, batch, optimizer)
    return (time.perf_counter() - t0) * 1e6


def warm_up(run, warmup: int = 5, window: int = 3, max_windows: int = 4,
            tolerance: float = 0.05, max_s: float | None = None,
            min_steps: int = 3) -> list[float]:
    """Run ``warmup`` steps, then windows of ``window`` steps while the step time still
    falls (a window's median more than ``tolerance`` below the one before), at most
    ``max_windows`` windows; past ``max_s`` seconds it stops as soon as ``min_steps``
    steps ran.  Returns every step time (us).

    glibc raises its mmap threshold only after large blocks are freed and trims its heap
    on its own schedule, so early steps pay page faults that a long run does not; how
    many steps that takes depends on the model.
    """
    t0 = time.perf_counter()

    def over() -> bool:
        return max_s is not None and time.perf_counter() - t0 > max_s

    times: list[float] = []
    while len(times) < warmup:
        times.append(run())
        if len(times) >= min_steps and over():
            return times
    prev = statistics.median(times[-window:]) if len(times) >= window else float("inf")
    for _ in range(max_windows):
        if over():
            break
        cur = [run() for _ in range(window)]
        times += cur
        med = statistics.median(cur)
        if med > (1.0 - tolerance) * prev:
            break
        prev = med
    return times


def _align_step(prof, compute):
    """(pairs, durations, gaps, tail, events) of one profiled step, raw: every duration is
    ``(us, recorded events inside it)`` with the profiler's cost still in.  ``pairs`` maps
    captured compute-op index -> recorded op."""
    every = recorded_events(prof)
    span = next((e for e in every if e.name == STEP_SPAN), None)
    events = [e for e in every if e.name.startswith("aten::")]
    # Every recorded event costs the profiler's time, aten or not (the autograd engine's
    # ``evaluate_function`` and node events, ``Optimizer.step``): count them all.
    starts = [e.time_range.start for e in every if e is not span]
    captured_names = {n["name"] for n in compute}
    recorded = comparable_events(events, captured_names)
    matcher = difflib.SequenceMatcher(a=[n["name"] for n in compute],
                                      b=[e.name for e in recorded], autojunk=False)
    pairs = [(block.a + k, block.b + k) for block in matcher.get_matching_blocks()
             for k in range(block.size)]

    def inside(lo, hi) -> int:  # events starting in [lo, hi)
        return max(0, bisect.bisect_left(starts, hi) - bisect.bisect_left(starts, lo))

    durs, gaps, prev_end = {}, {}, None
    for a, b in pairs:
        e = recorded[b]
        start, end = e.time_range.start, e.time_range.end
        durs[a] = (end - start, 1 + _descendants(e))
        if prev_end is not None:
            # the events between the previous op's end and this op's start
            gaps[a] = (start - prev_end, inside(prev_end, start))
        prev_end = end
    tail = None
    if span is not None and pairs:
        first, last = recorded[pairs[0][1]], recorded[pairs[-1][1]]
        s0, s1 = span.time_range.start, span.time_range.end
        tail = ((first.time_range.start - s0) + (s1 - last.time_range.end),
                inside(s0, first.time_range.start) + inside(last.time_range.end, s1))
    return pairs, durs, gaps, tail, len(starts)


def _median_raw(samples: list[tuple[float, int]]) -> tuple[float, int]:
    """Median duration of several steps' ``(us, events)`` and the events' median count."""
    return (statistics.median(s[0] for s in samples),
            int(statistics.median(s[1] for s in samples)))


def profile_step(doc: dict, warmup: int = 5, timed: int = 3, seed: int = 0,
                 per_event_us: float | None = None, profiled: int = 3,
                 max_warmup_s: float | None = None) -> StepProfile:
    """Measure ``doc`` on the CPU: warm up to a steady state (:func:`warm_up`, ``timed``
    is its window), then ``profiled`` pairs of one unprofiled and one profiled step.
    Durations, gaps and the tail are medians over the profiled steps.

    ``per_event_us`` is the profiler's cost per recorded event (see
    :func:`~predictors.calibrate.microbench.profiler_overhead_us`); without it, it is
    estimated from these steps alone, which is noisier.  The raw figures stay in the
    records, so :meth:`StepProfile.remove_profiler_cost` can apply a better estimate.
    """
    platform = resolve_platform(doc["platform"])
    old = torch.get_num_threads()
    torch.set_num_threads(platform.threads)
    profs, plain, profiled_us = [], [], []
    try:
        workload = build_workload(doc, device="cpu", fast_init=True)
        batch = workload.make_batch(seed)
        optimizer = workload.optimizer()
        run = functools.partial(_timed_step, workload, batch, optimizer)
        warm = warm_up(run, warmup=warmup, window=max(1, timed), max_s=max_warmup_s)
        for k in range(max(1, profiled)):
            for _ in range(RECOVERY_STEPS if k else 0):
                run()
            plain.append(run())
            with profile(activities=[ProfilerActivity.CPU], record_shapes=False) as prof:
                t0 = time.perf_counter()
                with record_function(STEP_SPAN):
                    training_step(workload.module, batch, optimizer)
                profiled_us.append((time.perf_counter() - t0) * 1e6)
            profs.append(prof)
        del run, workload, batch, optimizer  # free a large model before the capture
    finally:
        torch.set_num_threads(old)

    graph = capture_training_step(build_workload(doc))
    nodes = [graph.nodes[i] for i in sorted(graph.nodes)]
    compute = [n for n in nodes if classify(n["name"]) != "view"]
    step_us = statistics.median(plain)
    result = StepProfile(doc["name"], platform.threads, step_us,
                         statistics.median(profiled_us), 0.0,
                         warmup_steps=len(warm), profiled_steps=len(profs),
                         step_samples_us=plain, graph=graph)
    dur_s: dict[int, list] = {}
    gap_s: dict[int, list] = {}
    tails, n_events, aligned = [], [], None
    for prof in profs:
        pairs, durs, gaps, tail, count = _align_step(prof, compute)
        aligned = {a for a, _ in pairs} if aligned is None else aligned & {a for a, _ in pairs}
        for a, d in durs.items():
            dur_s.setdefault(a, []).append(d)
        for a, g in gaps.items():
            gap_s.setdefault(a, []).append(g)
        if tail is not None:
            tails.append(tail)
        n_events.append(count)
    result.events = int(statistics.median(n_events))
    result.unaligned = len(compute) - len(aligned or ())
    first = True
    for a in sorted(aligned or ()):
        gaps = gap_s.get(a, [])
        result.records.append({
            "node": compute[a], "dur_raw": _median_raw(dur_s[a]), "dur_steps": dur_s[a],
            "gap_raw": (0.0, 0) if first or not gaps else _median_raw(gaps),
            "threads": platform.threads})
        first = False
    result.tail_raw = _median_raw(tails) if tails else None
    if per_event_us is None:
        per_event_us = max(0.0, (result.profiled_step_us - step_us) / max(1, result.events))
    result.remove_profiler_cost(per_event_us)
    return result
