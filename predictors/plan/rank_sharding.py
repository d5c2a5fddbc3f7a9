"""Rank embedding sharding plans by their predicted iteration time.

Every candidate plan (:func:`predictors.model.sharding.candidate_plans`, and the scenario's own
when it gives one) is predicted with all ranks and their collectives; rank graphs are
captured once per distinct table set (:class:`predictors.engine.parallel.RankGraphs`), so ten
plans on eight ranks cost far less than ten predictions.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from ..engine.predict import (
    prepare,
    progress_stepper,
    rank_figures,
    torch_errors_as_scenario_errors,
)
from ..engine.timeline import Timeline
from ..model.sharding import Plan, PlanError, check_memory, plan_from_scenario
from ..scenario.format import Issue, ScenarioError

__all__ = ["PlanResult", "ShardingRanking", "rank_shardings"]


@dataclass
class PlanResult:
    """One plan's predicted step."""

    plan: Plan
    iteration_ms: float
    per_rank: list[dict]
    rank_bytes: list[float]
    timeline: Timeline

    @property
    def fits(self) -> bool:
        """Every rank's peak memory fits its device (or the memory is unknown)."""
        return all(r.get("memory", {}).get("fits", True) for r in self.per_rank)

    @property
    def peak_memory_bytes(self) -> int:
        return max((r.get("peak_memory_bytes", 0) for r in self.per_rank), default=0)

    def to_json(self) -> dict:
        return {"plan": self.plan.name, "how": self.plan.how,
                "iteration_ms": self.iteration_ms, "fits": self.fits,
                "peak_memory_bytes": self.peak_memory_bytes, "per_rank": self.per_rank,
                "rank_bytes": self.rank_bytes,
                "assignment": self.plan.to_json()["assignment"]}


@dataclass
class ShardingRanking:
    """Plans best first, the ones that cannot run and why, and what was assumed."""

    scenario_name: str
    platform: str
    ranks: int
    plans: list[PlanResult]
    refused: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0

    def to_json(self) -> dict:
        return {"scenario": self.scenario_name, "platform": self.platform,
                "ranks": self.ranks, "plans": [p.to_json() for p in self.plans],
                "refused": [{"plan": n, "why": w} for n, w in self.refused],
                "notes": self.notes, "elapsed_s": round(self.elapsed_s, 4)}


def rank_shardings(scenario: dict, *, profile=None, overheads=None, top: int | None = None,
                   progress: Callable[[float, str], None] | None = None,
                   cancelled: Callable[[], bool] | None = None) -> ShardingRanking:
    """Predict every candidate plan of ``scenario`` (arguments as
    :func:`predictors.engine.predict.predict`) and return them best first (``top`` of them):
    plans whose every rank fits its device's memory at its peak, fastest first, then
    those that do not.
    A scenario without embedding tables, or on one rank, is a
    :class:`~predictors.scenario.format.ScenarioError`: there is nothing to shard."""
    from ..engine.parallel import RankGraphs  # deferred: imports torch

    t0 = time.perf_counter()
    step = progress_stepper(progress, cancelled)
    step(0.0, "validating")
    doc, platform, profile = prepare(scenario, profile)
    graphs = RankGraphs(doc, platform, profile, overheads, cancelled)
    if platform.ranks < 2:
        raise ScenarioError([Issue("platform", f"{platform.name} has one rank: there is "
                                               f"nothing to shard (pick a multi-GPU platform)")])
    if not graphs.tables:
        raise ScenarioError([Issue("model", "the model has no embedding tables to shard")])
    step(0.05, "costing each table")
    with torch_errors_as_scenario_errors():
        plans, refused = graphs.candidates()
    if isinstance(doc["parallelism"].get("embedding_sharding"), dict):
        try:
            own = plan_from_scenario(doc, graphs.tables, graphs.ranks, lambda: None)
            own.name = "the scenario's plan"
            check_memory(own, graphs.tables, graphs.memory_bytes())
            plans.insert(0, own)
        except PlanError as exc:
            refused.insert(0, ("the scenario's plan", str(exc)))
    if not plans:
        raise ScenarioError([Issue("parallelism.embedding_sharding",
                                   "no plan fits: " + "; ".join(w for _, w in refused))])
    results = []
    title = doc["name"] or "prediction"
    for i, plan in enumerate(plans):
        def captured(rank, i=i):
            step(0.1 + 0.85 * (i + (rank + 1) / graphs.ranks) / len(plans),
                 f"plan {i + 1} of {len(plans)}: rank {rank + 1} of {graphs.ranks}")
        with torch_errors_as_scenario_errors():
            timeline = graphs.simulate(plan, f"{title} — {plan.name}", cancelled, captured)
        per_rank = rank_figures(timeline, [graphs.costed(plan.local(r), r,
                                                         plan.rowwise).memory
                                           for r in range(graphs.ranks)],
                                graphs.memory_bytes())
        results.append(PlanResult(plan, max(r["iteration_ms"] for r in per_rank), per_rank,
                                  plan.rank_bytes(graphs.tables), timeline))
    results.sort(key=lambda r: (not r.fits, r.iteration_ms))
    if top is not None:
        results = results[:top]
    notes = [f"{graphs.batch_note()} on {platform.name}; {len(graphs.tables)} tables "
             "sharded table-wise or row-wise", f"{graphs.captured} distinct rank graphs "
             "captured"]
    notes.extend(graphs.notes)
    over = [r.plan.name for r in results if not r.fits]
    if over:
        from ..model.memory import memory_note  # deferred: imports torch
        notes.insert(0, f"{len(over)} plan(s) exceed a device's memory at the peak and are "
                        f"ranked last; {over[0]}: "
                        + memory_note(next(r for r in results if not r.fits).per_rank,
                                      platform.device))
    ranking = ShardingRanking(doc["name"], platform.name, graphs.ranks, results, refused,
                              notes)
    ranking.elapsed_s = time.perf_counter() - t0
    step(1.0, "done")
    return ranking
