"""Profile real training steps and pair each recorded op with its captured twin.

The profiler nests ops (``aten::linear`` > ``aten::addmm`` > ``aten::copy_``); the capture
sees dispatch-level ops.  A recorded op is *comparable* when it computes, no ancestor of it
is an op the capture knows, and it is not a composite wrapper of captured ops.  Those
recorded ops align one to one, in order, with the captured compute ops (tests check this
on DLRM and transformer models), which gives measured durations for captured shapes.
"""
from __future__ import annotations

import bisect
import difflib
import statistics
import time
from dataclasses import dataclass, field

import torch
from torch.profiler import ProfilerActivity, profile

from ..capture import capture_training_step
from ..devices.roofline import classify
from ..devices.platforms import resolve_platform
from ..workload import build_workload, training_step

__all__ = ["StepProfile", "profile_step", "comparable_events"]


@dataclass
class StepProfile:
    """One profiled training step, aligned with its capture.

    ``records``: one dict per aligned compute op: the captured ``node`` attributes,
    ``dur_us`` (inclusive, profiler overhead removed) and ``gap_us`` (CPU time since the
    previous compute op ended: Python, views, composite wrappers).
    """

    scenario: str
    threads: int
    step_us: float  # median unprofiled step time
    profiled_step_us: float
    per_event_overhead_us: float
    records: list[dict] = field(default_factory=list)
    unaligned: int = 0
    tail_us: float = 0.0  # step time not covered by ops and gaps (before/after)


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


def profile_step(doc: dict, warmup: int = 5, timed: int = 3, seed: int = 0,
                 per_event_us: float | None = None) -> StepProfile:
    """Measure ``doc`` on the CPU: unprofiled step time, then one profiled step.

    Several warm-up steps first: glibc raises its mmap threshold only after large blocks
    are freed, so the first steps pay page faults for every large activation.

    ``per_event_us`` is the profiler's cost per recorded event (see
    :func:`~predictors.calibrate.microbench.profiler_overhead_us`); without it, it is
    estimated from this step alone, which is noisier.
    """
    platform = resolve_platform(doc["platform"])
    old = torch.get_num_threads()
    torch.set_num_threads(platform.threads)
    try:
        workload = build_workload(doc, device="cpu", fast_init=True)
        batch = workload.make_batch(seed)
        optimizer = workload.optimizer()
        for _ in range(warmup):
            training_step(workload.module, batch, optimizer)
        samples = []
        for _ in range(timed):
            t0 = time.perf_counter()
            training_step(workload.module, batch, optimizer)
            samples.append((time.perf_counter() - t0) * 1e6)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=False) as prof:
            t0 = time.perf_counter()
            training_step(workload.module, batch, optimizer)
            profiled = (time.perf_counter() - t0) * 1e6
    finally:
        torch.set_num_threads(old)
    events = sorted((e for e in prof.events() if e.name.startswith("aten::")),
                    key=lambda e: (e.time_range.start, -e.time_range.end))
    step_us = statistics.median(samples)
    # Spread the profiler's own cost evenly over the events it recorded.
    per_event = (per_event_us if per_event_us is not None
                 else max(0.0, (profiled - step_us) / max(1, len(events))))

    graph = capture_training_step(build_workload(doc))
    nodes = [graph.nodes[i] for i in sorted(graph.nodes)]
    captured_names = {n["name"] for n in nodes}
    compute = [n for n in nodes if classify(n["name"]) != "view"]
    recorded = comparable_events(events, captured_names)
    # Count every recorded event that starts between two comparable ones (gap content).
    starts = [e.time_range.start for e in events]
    result = StepProfile(doc["name"], platform.threads, step_us, profiled, per_event)
    matcher = difflib.SequenceMatcher(a=[n["name"] for n in compute],
                                      b=[e.name for e in recorded], autojunk=False)
    pairs = [(block.a + k, block.b + k) for block in matcher.get_matching_blocks()
             for k in range(block.size)]
    result.unaligned = len(compute) - len(pairs)
    prev_end = None
    for a, b in pairs:
        e = recorded[b]
        start, end = e.time_range.start, e.time_range.end
        dur = (end - start) - per_event * (1 + _descendants(e))
        if prev_end is None:
            gap = 0.0
        else:
            inside = bisect.bisect_left(starts, start) - bisect.bisect_right(starts, prev_end)
            gap = (start - prev_end) - per_event * max(0, inside)
        prev_end = end
        result.records.append({"node": compute[a], "dur_us": max(dur, 0.05),
                               "gap_us": max(gap, 0.0), "threads": platform.threads})
    covered = sum(r["dur_us"] + r["gap_us"] for r in result.records)
    result.tail_us = max(0.0, step_us - covered)
    return result
