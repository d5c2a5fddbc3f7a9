"""Rank embedding sharding plans by their predicted iteration time.

The planners' plans (:func:`predictors.model.sharding.candidate_plans`) and the scenario's
own seed a search within a time budget (:mod:`.search`), each plan simulated with every
rank and its collectives (:class:`~predictors.engine.plan_evaluator.PlanEvaluator`,
thousands a second; scenarios it cannot compose go through captured rank graphs,
:class:`~predictors.engine.parallel.RankGraphs`).  The best plans are then predicted
once more from captured rank graphs, for their timelines and memory.
"""
from __future__ import annotations

import csv
import io
import json
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
from ..model.sharding import Plan, PlanError, check_memory, check_nodes, plan_from_scenario
from ..scenario.format import Issue, ScenarioError
from .plan_memory import PlanMemory
from .search import EXHAUSTIVE_LIMIT, SLOW_EXHAUSTIVE_LIMIT, search_plans
from .workers import PlanWorkers, WorkerError
from .torchrec_plans import from_torchrec, torchrec_planner_plan

__all__ = ["PlanResult", "ShardingRanking", "rank_shardings", "ranking_csv", "rank_breakdown",
           "DEFAULT_BUDGET_S", "TIE_REL"]

DEFAULT_BUDGET_S = 10.0
TOP = 5          # plans predicted in full when the caller asks for no number
# the embeddings' exchange: the all-to-all of table-wise tables, the reduce-scatter
# (forward) and all-gather (backward) of row-wise ones, and the node exchanges of
# table-row-wise ones
EXCHANGE = ("nccl:all_to_all", "nccl:reduce_scatter", "nccl:all_gather",
            "nccl:reduce_scatter + all_to_all", "nccl:all_to_all + all_gather")
TIE_REL = 0.01   # plans this close to the best (relative) are ties: within a real run's noise


@dataclass
class PlanResult:
    """One plan's predicted step."""

    plan: Plan
    iteration_ms: float
    per_rank: list[dict]
    rank_bytes: list[float]
    timeline: Timeline
    tie: bool = False     # within TIE_REL of the best plan

    @property
    def fits(self) -> bool:
        """Every rank's peak memory fits its device (or the memory is unknown)."""
        return all(r.get("memory", {}).get("fits", True) for r in self.per_rank)

    @property
    def peak_memory_bytes(self) -> int:
        return max((r.get("peak_memory_bytes", 0) for r in self.per_rank), default=0)

    @property
    def exposed_all_to_all_ms(self) -> float:
        """The most any rank spends in the embeddings' exchange with no computation
        hiding it (the all-to-all, and a row-wise table's reduce-scatter and
        all-gather)."""
        return max((r.get("exposed_all_to_all_ms", 0.0) for r in self.per_rank), default=0.0)

    @property
    def imbalance(self) -> float:
        """How much the busiest rank's lookups exceed the ranks' mean (0: balanced)."""
        work = [r.get("lookup_ms", 0.0) for r in self.per_rank]
        mean = sum(work) / len(work) if work else 0.0
        return max(work) / mean - 1.0 if mean > 0 else 0.0

    def to_json(self) -> dict:
        return {"plan": self.plan.name, "how": self.plan.how,
                "iteration_ms": self.iteration_ms, "tie": self.tie, "fits": self.fits,
                "peak_memory_bytes": self.peak_memory_bytes,
                "exposed_all_to_all_ms": self.exposed_all_to_all_ms,
                "imbalance": round(self.imbalance, 4), "per_rank": self.per_rank,
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
    tables: list[dict] = field(default_factory=list)  # key, bytes, lookup_ms per table
    evaluated: int = 0        # plans simulated by the search
    exhaustive: bool = False  # the search enumerated every table-wise placement
    cancelled: bool = False   # the search was cancelled: the plans are the best found

    def to_json(self) -> dict:
        return {"scenario": self.scenario_name, "platform": self.platform,
                "ranks": self.ranks, "tables": self.tables, "evaluated": self.evaluated,
                "exhaustive": self.exhaustive, "cancelled": self.cancelled,
                "elapsed_s": round(self.elapsed_s, 4),
                "plans": [p.to_json() for p in self.plans],
                "refused": [{"plan": n, "why": w} for n, w in self.refused],
                "notes": self.notes}


def rank_breakdown(timeline: Timeline, figures: dict, costed) -> dict:
    """Where one rank's iteration goes (ms): its lookups' kernels, its other (dense)
    computation, the embeddings' exchange and other communication that nothing hides,
    and the rest, when its device waits (for its host, or for its peers)."""
    rank = figures["rank"]
    compute = [i for i in timeline.lanes_of(rank, "stream")
               if "communication" not in timeline.lanes[i].name]
    busy = timeline.busy_ms(compute) if compute else 0.0
    lookups = min(busy, 1e3 * sum(op.kernel_s for op in costed.ops if op.table))
    exchange = timeline.exposed_comm_ms(rank, names=EXCHANGE)
    comm = figures.get("exposed_comm_ms", 0.0)
    return {"lookup_ms": lookups, "exposed_all_to_all_ms": exchange,
            "breakdown_ms": {"lookups": lookups, "dense": busy - lookups,
                             "exchange": exchange, "other communication": comm - exchange,
                             "waiting": max(0.0, figures["iteration_ms"] - busy - comm)}}


def ranking_csv(ranking: ShardingRanking) -> str:
    """The ranking as CSV: one row per plan, best first, its assignment as JSON."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["position", "plan", "iteration_ms", "vs_best_pct", "tie", "fits",
                "peak_memory_bytes", "exposed_all_to_all_ms", "imbalance",
                *[f"rank{r}_ms" for r in range(ranking.ranks)], "assignment"])
    best = ranking.plans[0].iteration_ms if ranking.plans else 0.0
    for i, p in enumerate(ranking.plans, 1):
        w.writerow([i, p.plan.name, f"{p.iteration_ms:.4f}",
                    f"{100 * (p.iteration_ms / best - 1):.2f}" if best else "",
                    int(p.tie), int(p.fits), p.peak_memory_bytes,
                    f"{p.exposed_all_to_all_ms:.4f}", f"{p.imbalance:.4f}",
                    *[f"{r['iteration_ms']:.4f}" for r in p.per_rank],
                    json.dumps(p.plan.to_json()["assignment"], separators=(",", ":"))])
    return out.getvalue()


def rank_shardings(scenario: dict, *, profile=None, overheads=None, top: int | None = None,
                   budget_s: float = DEFAULT_BUDGET_S, seed: int = 0,
                   torchrec_plans: list[tuple[str, dict]] = (),
                   torchrec_planner: bool = False,
                   workers: int = 0, dask: str | None = None,
                   progress: Callable[[float, str], None] | None = None,
                   cancelled: Callable[[], bool] | None = None) -> ShardingRanking:
    """Search the sharding plans of ``scenario`` for ``budget_s`` seconds (arguments as
    :func:`predictors.engine.predict.predict`) and return the best five and the
    planners' own (only the ``top`` best when given), each predicted in full: plans whose
    every rank fits its device's memory at its peak, fastest first, then those that do
    not.  Cancelling stops the search and
    keeps the plans found so far.  ``torchrec_plans``: ``(name, document)`` of plans in
    TorchRec's terms (:mod:`.torchrec_plans`), ranked with the others;
    ``torchrec_planner``: also TorchRec's own planner's plan (TorchRec installed).  ``workers``
    local processes, or the workers of the Dask scheduler at ``dask``, evaluate the
    search's plans (:mod:`.workers`); the plans found are the same.
    A scenario without embedding tables, or on one rank, is a
    :class:`~predictors.scenario.format.ScenarioError`: there is nothing to shard."""
    from ..engine.parallel import RankGraphs  # deferred: imports torch
    from ..engine.plan_evaluator import plan_spans

    t0 = time.perf_counter()
    step = progress_stepper(progress, cancelled)
    step(0.0, "validating")
    if not budget_s > 0:
        raise ScenarioError([Issue("budget_s", f"the search budget must be more than 0 s, "
                                               f"got {budget_s:g}")])
    doc, platform, profile = prepare(scenario, profile)
    graphs = RankGraphs(doc, platform, profile, overheads, cancelled)
    if platform.ranks < 2:
        raise ScenarioError([Issue("platform", f"{platform.name} has one rank: there is "
                                               f"nothing to shard (pick a multi-GPU platform)")])
    if not graphs.tables:
        raise ScenarioError([Issue("model", "the model has no embedding tables to shard")])
    step(0.02, "costing each table")
    with torch_errors_as_scenario_errors():
        seeds, refused = graphs.candidates()
        budget = PlanMemory(graphs)
    memory = graphs.memory_bytes()
    if isinstance(doc["parallelism"].get("embedding_sharding"), dict):
        try:
            own = plan_from_scenario(doc, graphs.tables, graphs.ranks, lambda: None)
            own.name = "the scenario's plan"
            check_nodes(own, platform.ranks_per_node)
            check_memory(own, graphs.tables, memory)
            seeds.insert(0, own)
        except PlanError as exc:
            refused.insert(0, ("the scenario's plan", str(exc)))
    torchrec_plans = list(torchrec_plans)
    if torchrec_planner:
        step(0.03, "running TorchRec's planner")
        try:
            torchrec_plans.append(("TorchRec planner", torchrec_planner_plan(
                graphs.tables, graphs.ranks, graphs.local_batch, memory,
                "cpu" if platform.device == "cpu" else "cuda",
                ranks_per_node=platform.ranks_per_node)))
        except PlanError as exc:
            raise ScenarioError([Issue("torchrec_planner", str(exc))]) from None
    for name, document in torchrec_plans:
        try:
            plan = from_torchrec(document, graphs.tables, graphs.ranks, name)
            check_nodes(plan, platform.ranks_per_node)
            check_memory(plan, graphs.tables, memory)
        except PlanError as exc:
            raise ScenarioError([Issue(name, str(exc))]) from None
        seeds.insert(0, plan)
    if not seeds:
        largest = max(graphs.tables, key=lambda t: t.bytes)
        total = sum(t.bytes for t in graphs.tables)
        raise ScenarioError([Issue(
            "parallelism.embedding_sharding",
            f"no plan fits: the largest table {largest.key} holds "
            f"{largest.bytes / 1e9:,.1f} GB and the tables {total / 1e9:,.1f} GB in all, "
            f"against {graphs.ranks} x {memory / 1e9:,.0f} GB; "
            + "; ".join(w for _, w in refused))])
    kept = []
    for plan in seeds:   # the planners place tables by bytes: check the whole step
        try:
            budget.check(plan, graphs.tables)
            kept.append(plan)
        except PlanError as exc:
            refused.append((plan.name, str(exc)))
    seeds = kept
    if not seeds:
        raise ScenarioError([Issue("parallelism.embedding_sharding",
                                   "no plan fits: " + "; ".join(w for _, w in refused))])
    notes = [f"{graphs.batch_note()} on {platform.name}; {len(graphs.tables)} tables "
             "sharded table-wise, row-wise, column-wise or data-parallel"]
    evaluate, slow = plan_spans(graphs)
    batch, limit = (4, SLOW_EXHAUSTIVE_LIMIT) if slow else (64, EXHAUSTIVE_LIMIT)
    if slow:
        notes.append(f"{slow}: the search evaluates fewer plans")
    pool = None
    if workers or dask:
        try:
            pool = PlanWorkers(doc, profile, overheads, workers=workers, dask=dask)
        except ValueError as exc:
            raise ScenarioError([Issue("dask" if dask else "workers", str(exc))]) from None
        evaluate, batch = pool, batch * pool.count   # a chunk of a batch per worker
        notes.append(f"plans evaluated on {pool.count} worker process(es)"
                     + (f" of the Dask cluster at {dask}" if dask else ""))

    def fits(plan: Plan) -> bool:
        return budget.fits(plan, graphs.tables)

    def searching(fraction: float, what: str) -> None:
        if progress is not None:
            progress(0.05 + 0.75 * fraction, what)

    try:
        if pool is not None:
            step(0.04, f"starting {pool.count} workers")
            pool(seeds)   # outside the budget: every worker captures its templates
        step(0.05, "searching")
        with torch_errors_as_scenario_errors():
            found = search_plans(graphs.tables, graphs.ranks, evaluate, seeds,
                                 budget_s=budget_s, fits=fits, batch=batch, seed=seed,
                                 exhaustive_limit=limit, cancelled=cancelled,
                                 node_size=graphs.platform.ranks_per_node,
                                 progress=searching)
    except WorkerError as exc:
        raise ScenarioError([Issue("dask" if dask else "workers", str(exc))]) from None
    finally:
        if pool is not None:
            pool.close()
    # the best plans (one of each iteration: moves that change nothing that matters give
    # many), then the planners' own for comparison
    ranked, times = [], set()
    for plan, spans in found.best_first():
        if len(ranked) == min(top or TOP, TOP):
            break
        if round(float(spans.max()), 6) not in times:
            times.add(round(float(spans.max()), 6))
            ranked.append(plan)
    shown = {p.signature(graphs.tables) for p in ranked}
    ranked += [p for p in seeds if p.signature(graphs.tables) not in shown and fits(p)]
    results = []
    title = doc["name"] or "prediction"
    for i, plan in enumerate(ranked):
        if progress is not None:
            progress(0.8 + 0.2 * i / len(ranked), f"predicting plan {i + 1} of {len(ranked)}")
        if plan.name in ("searched", "enumerated"):   # number the search's plans
            plan = Plan(f"{plan.name} {i + 1}", plan.ranks, plan.assignment, plan.how)
        with torch_errors_as_scenario_errors():
            # the best plans are predicted in full even when the search was cancelled
            timeline = graphs.simulate(plan, f"{title} — {plan.name}")
        costed = [graphs.rank_graph(plan, r) for r in range(graphs.ranks)]
        per_rank = rank_figures(timeline, [c.memory for c in costed], memory)
        for r, c in zip(per_rank, costed):
            r.update(rank_breakdown(timeline, r, c))
        results.append(PlanResult(plan, max(r["iteration_ms"] for r in per_rank), per_rank,
                                  plan.rank_bytes(graphs.tables), timeline))
    results.sort(key=lambda r: (not r.fits, r.iteration_ms))
    if top is not None:
        results = results[:top]
    if results:
        best = results[0].iteration_ms
        for r in results:
            r.tie = r.fits and r.iteration_ms <= best * (1 + TIE_REL)
    how = ("every table-wise placement enumerated" if found.exhaustive else
           f"searched from {len(seeds)} planners' plans")
    notes.append(f"{found.evaluated:,} plans simulated in {found.elapsed_s:.1f} s ({how}); "
                 f"{found.rejected:,} did not fit")
    ties = sum(r.tie for r in results)
    if ties > 1:
        notes.append(f"{ties} plans are within {100 * TIE_REL:.0f} % of the best: a real "
                     "run's noise cannot tell them apart")
    notes.extend(graphs.notes)
    over = [r.plan.name for r in results if not r.fits]
    if over:
        from ..model.memory import memory_note  # deferred: imports torch
        notes.insert(0, f"{len(over)} plan(s) exceed a device's memory at the peak and are "
                        f"ranked last; {over[0]}: "
                        + memory_note(next(r for r in results if not r.fits).per_rank,
                                      platform.device))
    seconds = graphs.table_seconds()
    tables = [{"key": t.key, "rows": t.rows, "dim": t.dim, "bytes": t.bytes,
               "lookup_ms": 1e3 * seconds.get(t.key, 0.0)} for t in graphs.tables]
    ranking = ShardingRanking(doc["name"], platform.name, graphs.ranks, results, refused,
                              notes, tables=tables, evaluated=found.evaluated,
                              exhaustive=found.exhaustive, cancelled=found.cancelled)
    ranking.elapsed_s = time.perf_counter() - t0
    if progress is not None:
        progress(1.0, "done")
    return ranking
