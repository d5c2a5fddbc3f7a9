"""The largest batch that fits: how far the batch can grow before a rank runs out of memory.

The probes need captures only, no costing or simulation: a capture on the meta device takes
the same time at any batch size, and its :class:`~predictors.model.memory.StepMemory` gives
every rank's peak.  Memory grows about linearly with the batch, so the search aims where
the line through two probes meets the device's memory and closes in from both sides
(on multiples of ``multiple``): a handful of captures.  On several GPUs the embedding plan
is fixed first, as a prediction at the scenario's own batch places the tables ("auto"
costs each table once for that), and the batch is the global one (each rank's dense share
is ``ceil(batch / ranks)``).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable

from ..engine.predict import (
    device_memory,
    prepare,
    progress_stepper,
    torch_errors_as_scenario_errors,
)
from ..model.sharding import PlanError, plan_from_scenario
from ..scenario.format import Issue, ScenarioError
from ..utils.progress import check_cancelled

__all__ = ["Capacity", "largest_batch"]

MAX_BATCH = 1 << 26   # beyond this the search stops and says so


@dataclass
class Capacity:
    """The largest batch that fits, and what the next step up would need."""

    scenario_name: str
    platform: str
    device: str
    device_bytes: float
    batch_size: int | None          # None: not even ``multiple`` fits
    peak_bytes: int                 # at ``batch_size`` (or at ``multiple`` when None)
    rank: int                       # the rank with the highest peak there
    peak_op: str
    over_batch: int | None          # the smallest batch tried that does not fit
    over_peak_bytes: int | None
    probes: int                     # captures made
    capped: bool = False            # fits at MAX_BATCH: the search stopped

    def to_json(self) -> dict:
        return {"scenario": self.scenario_name, "platform": self.platform,
                "device": self.device, "device_bytes": int(self.device_bytes),
                "batch_size": self.batch_size, "peak_memory_bytes": int(self.peak_bytes),
                "rank": self.rank, "peak_op": self.peak_op, "over_batch": self.over_batch,
                "over_peak_memory_bytes": self.over_peak_bytes, "probes": self.probes,
                "capped": self.capped}


def _rank_memories(doc: dict, platform, plan, gpu: bool, cancelled=None) -> list:
    """Every rank's :class:`StepMemory` at the batch of ``doc`` (captures only; not kept
    in the capture cache, which predictions of the scenario itself are using)."""
    from ..model.capture import capture_training_step  # deferred: imports torch
    from ..model.workload import RankShard, build_workload  # deferred: imports torch

    def memory_of(shard=None):

        check_cancelled(cancelled, "capturing")
        return capture_training_step(build_workload(doc, shard=shard), gpu=gpu).graph["memory"]

    if platform.ranks < 2:
        return [memory_of()]
    ranks = platform.ranks
    batch = int(doc["training"]["batch_size"])
    local_batch = max(1, -(-batch // ranks))
    by_tables: dict[tuple, object] = {}
    out = []
    for r in range(ranks):
        local = plan.local(r) if plan is not None else frozenset()
        rowwise = plan.rowwise if plan is not None else frozenset()
        key = (local, r if rowwise else None)   # row blocks differ by rank
        if key not in by_tables:
            kinds = ({} if plan is None else
                     {"replicated": plan.replicated, "columns": dict(plan.columns),
                      "row_groups": dict(plan.row_groups)})
            shard = RankShard(r, ranks, local, local_batch, local_batch * ranks,
                              rowwise=rowwise, **kinds)
            by_tables[key] = memory_of(shard)
        out.append(by_tables[key])
    return out


def largest_batch(scenario: dict, *, multiple: int = 1, profile=None,
                  progress: Callable[[float, str], None] | None = None,
                  cancelled: Callable[[], bool] | None = None) -> Capacity:
    """The largest global batch (a multiple of ``multiple``) whose step fits every rank's
    device memory at its peak (on the CPU: this host's physical memory).  A platform whose
    device memory is unknown is a :class:`~predictors.scenario.format.ScenarioError`."""

    step = progress_stepper(progress, cancelled)
    step(0.0, "validating")
    if not 1 <= multiple <= MAX_BATCH:
        raise ValueError(f"multiple must be between 1 and {MAX_BATCH:,}")
    cap = MAX_BATCH // multiple * multiple   # the largest batch the search tries
    doc, platform, profile = prepare(scenario, profile)
    memory = device_memory(platform)
    if memory <= 0:
        raise ScenarioError([Issue("platform", f"{platform.name}: the device's memory is "
                                               "unknown, so no batch can be judged to fit")])
    gpu = platform.device != "cpu"
    plan = None
    with torch_errors_as_scenario_errors():
        if platform.ranks > 1:
            from ..engine.parallel import (  # deferred: imports torch
                RankGraphs,
                auto_plan,
            )

            graphs = RankGraphs(doc, platform, profile, None, cancelled)
            if graphs.tables:
                step(0.05, "planning the embedding sharding")
                try:
                    plan = plan_from_scenario(doc, graphs.tables, graphs.ranks,
                                              lambda: auto_plan(graphs))
                except PlanError as exc:
                    raise ScenarioError([Issue("parallelism.embedding_sharding",
                                               str(exc))]) from None
    probes: dict[int, tuple[int, int, str]] = {}   # batch -> (peak, rank, op)

    def peak_at(batch: int) -> tuple[int, int, str]:
        if batch not in probes:
            step(min(0.95, 0.1 + 0.04 * len(probes)), f"capturing at batch {batch:,}")
            trial = copy.deepcopy(doc)
            trial["training"]["batch_size"] = batch
            try:
                with torch_errors_as_scenario_errors():
                    mems = _rank_memories(trial, platform, plan, gpu, cancelled)
            except ScenarioError as exc:
                if batch == multiple:   # the model itself cannot be built
                    raise
                # a size torch cannot hold (an index overflow) fits no device either
                probes[batch] = (2 ** 63 - 1, 0, f"none: {exc}")
                return probes[batch]
            rank = max(range(len(mems)), key=lambda r: mems[r].peak)
            probes[batch] = (int(mems[rank].peak), rank, mems[rank].peak_op)
        return probes[batch]

    fits = lambda b: peak_at(b)[0] <= memory

    def crossing(b0: int, b1: int) -> float:
        """Where the line through the peaks at ``b0`` and ``b1`` reaches the memory."""
        p0, p1 = peak_at(b0)[0], peak_at(b1)[0]
        slope = (p1 - p0) / (b1 - b0) if b1 != b0 else 0.0
        return b1 * 2.0 if slope <= 0 else b0 + (memory - p0) / slope

    low = multiple
    if not fits(low):
        peak, rank, op = peak_at(low)
        return Capacity(doc["name"], platform.name, platform.device, memory, None, peak,
                        rank, op, low, peak, len(probes))
    # A step's memory grows about linearly with the batch: aim at where the line through
    # two probes reaches the memory, then close in on the boundary (regula falsi, on
    # multiples), a handful of captures instead of a bisection's dozens.
    high = min(cap, 1024 * multiple)
    while high > low and fits(high):
        low = high
        aim = crossing(multiple, low) * 1.02
        high = min(cap, max(2 * low, int(aim) // multiple * multiple))
    if high <= low:   # fits at the largest batch tried
        peak, rank, op = peak_at(low)
        return Capacity(doc["name"], platform.name, platform.device, memory, low, peak,
                        rank, op, None, None, len(probes), capped=True)
    while high - low > multiple:   # fits(low), not fits(high)
        guess = int(crossing(low, high)) // multiple * multiple
        guess = min(max(guess, low + multiple), high - multiple)
        if fits(guess):
            low = guess
            if not fits(low + multiple):   # the boundary is usually right there
                high = low + multiple
        else:
            high = guess
            if fits(high - multiple):
                low = high - multiple
    peak, rank, op = peak_at(low)
    step(1.0, "done")
    return Capacity(doc["name"], platform.name, platform.device, memory, low, peak, rank,
                    op, high, peak_at(high)[0], len(probes))
