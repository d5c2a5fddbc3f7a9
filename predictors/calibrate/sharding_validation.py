"""``validate-sharding``: does the predicted ranking of sharding plans hold on real runs?

Random DLRM tasks (4-12 tables whose sizes, pooling and skew differ) are ranked on this
host's ``local-cpu`` ranks, as a user would rank them; then the predicted top five and
three random plans that fit are trained for real (:func:`~.ranks.measure_plans`: gloo,
one process per rank, the plans' rounds interleaved), and the two orders compared:

- **top-1**: the predicted best plan is the measured best, or within ``max(3 %, the
  task's noise)`` of it;
- **Kendall's tau** between the predicted and the measured times of the eight plans;
- **noise**: the median over a task's plans of the spread of its rounds (the standard
  deviation over the mean);
- **the measurement's own tau**: Kendall's tau between the medians of the odd and of the
  even rounds, the order the measurement agrees with itself on, which bounds what a
  prediction's tau can reach on this host (each half has half the rounds, so it is a
  little below the bound of the whole).

A task whose eight plans the prediction puts within 10 % of each other cannot be told
apart on a noisy host: it is left out, and counted.  With ``spacing`` the plans are a
ladder instead (:func:`choose_plans`): each predicted at least that much slower than the
one before, so that their order is one the host can resolve.
"""
from __future__ import annotations

import math
import random
import statistics
import time
from typing import Callable

import numpy as np

__all__ = ["random_sharding_task", "validate_sharding", "rescore", "plan_kind",
           "choose_plans", "MIN_SPREAD"]

MIN_SPREAD = 1.10   # a task's slowest plan over its fastest, predicted, to be measured
TOP = 5
RANDOM = 3


def random_sharding_task(rng: np.random.Generator, ranks: int, threads: int = 1) -> dict:
    """A DLRM whose tables differ in rows, pooling and skew, on ``ranks`` CPU ranks."""
    dim = int(rng.choice([16, 32, 64]))
    tables = []
    for _ in range(int(rng.integers(4, 13))):
        dist = ({"kind": "uniform"} if rng.random() < 0.4
                else {"kind": "zipf", "alpha": float(np.round(rng.uniform(0.8, 1.3), 2))})
        tables.append({"rows": int(10 ** rng.uniform(3, 6)), "dim": dim,
                       "pooling": int(round(10 ** rng.uniform(0, 2))), "distribution": dist})
    batch = int(rng.choice([256, 512, 1024, 2048]))
    bottom = [int(rng.choice([64, 128, 256])), dim]
    top = [int(rng.choice([64, 128, 256])), 1]
    nodes = [
        {"id": "dense", "kind": "dense_input", "params": {"features": 13}},
        {"id": "bottom", "kind": "mlp", "params": {"layers": bottom, "final": "relu"}},
        {"id": "tables", "kind": "embedding_tables", "params": {"tables": tables}},
        {"id": "interaction", "kind": "interaction", "params": {"op": "dot"}},
        {"id": "top", "kind": "mlp", "params": {"layers": top, "final": None}},
        {"id": "loss", "kind": "loss", "params": {"kind": "bce"}},
    ]
    edges = [("dense", "bottom"), ("bottom", "interaction"), ("tables", "interaction"),
             ("interaction", "top"), ("top", "loss")]
    return {"format": "ml-dse/scenario", "version": 1,
            "name": f"sharding task ({len(tables)} tables, dim {dim}, batch {batch})",
            "model": {"nodes": nodes, "edges": [{"source": a, "target": b}
                                                for a, b in edges]},
            "platform": {"preset": "local-cpu", "threads": threads, "ranks": ranks},
            "training": {"batch_size": batch, "optimizer": "sgd", "dtype": "float32"},
            "parallelism": {"embedding_sharding": "auto"}}


def _kendall_tau(a, b) -> float:
    from scipy.stats import kendalltau
    tau = kendalltau(a, b).statistic
    return float(tau) if tau == tau else 0.0


def validate_sharding(ranks: int = 2, tasks: int = 20, seed: int = 0, profile=None,
                      budget_s: float = 8.0, iters: int = 20, warmup: int = 3,
                      rounds: int = 8, threads: int = 1, spacing: float = 0.0,
                      progress: Callable[[float, str], None] | None = None) -> dict:
    """Rank and measure ``tasks`` tasks that the prediction separates (see the module);
    tasks it does not are drawn in their place and counted as ties.  Returns the
    per-task figures and their summary.  ``spacing``: see :func:`choose_plans`."""
    from ..engine.parallel import RankGraphs
    from ..engine.plan_evaluator import plan_spans
    from ..engine.predict import prepare
    from ..plan.plan_memory import PlanMemory
    from ..plan.search import SLOW_EXHAUSTIVE_LIMIT, search_plans
    from .ranks import measure_plans

    rng = np.random.default_rng(seed)
    pick = random.Random(seed)
    rows, ties, drawn = [], 0, 0
    t0 = time.perf_counter()
    while len(rows) < tasks and drawn < 10 * tasks:
        drawn += 1
        doc, platform, prof = prepare(random_sharding_task(rng, ranks, threads), profile)
        graphs = RankGraphs(doc, platform, prof)
        budget = PlanMemory(graphs)   # the memory check rank-sharding applies
        evaluate, _ = plan_spans(graphs)

        if progress is not None:
            progress(len(rows) / tasks, f"task {len(rows) + 1} of {tasks}: ranking "
                                        f"{doc['name']}")
        seeds, _ = graphs.candidates()
        found = search_plans(graphs.tables, graphs.ranks, evaluate, seeds, budget_s=budget_s,
                             fits=lambda p: budget.fits(p, graphs.tables), batch=4,
                             seed=seed + drawn,
                             exhaustive_limit=SLOW_EXHAUSTIVE_LIMIT)
        ranked = [(plan, float(spans.max())) for plan, spans in found.best_first()]
        chosen = choose_plans(ranked, pick, spacing)
        predicted = np.array([t for _, t in chosen])
        if len(chosen) < 3 or predicted.max() < MIN_SPREAD * predicted.min():
            ties += 1
            continue
        if progress is not None:
            progress((len(rows) + 0.5) / tasks, f"task {len(rows) + 1} of {tasks}: "
                                                f"measuring {len(chosen)} plans")
        measured = measure_plans(doc, [p.assignment for p, _ in chosen], iters=iters,
                                 warmup=warmup, rounds=rounds, seed=seed)
        ms = np.array([m["iteration_ms"] for m in measured])
        rounds_ms = [m["rounds_ms"] for m in measured]
        noise = statistics.median(
            statistics.stdev(m["rounds_ms"]) / statistics.mean(m["rounds_ms"])
            if len(m["rounds_ms"]) > 1 else 0.0 for m in measured)
        rows.append({"task": doc["name"], "tables": len(graphs.tables),
                     "plans": len(chosen), "evaluated": found.evaluated,
                     "assignments": [p.to_json()["assignment"] for p, _ in chosen],
                     "scenario": doc, "measured_ms": ms.round(4).tolist(),
                     "exchange_ms": [m["exchange_ms"] for m in measured],
                     "rounds_ms": rounds_ms, "measured_self_tau": _self_tau(rounds_ms),
                     **_scores(predicted, ms, noise)})
    summary = {**_summary(rows), "ranks": ranks, "left_out_as_ties": ties, "seed": seed,
               "spacing": spacing,
               "elapsed_s": round(time.perf_counter() - t0, 1)}
    return {"summary": summary, "tasks": rows}


def choose_plans(ranked: list, pick: random.Random, spacing: float = 0.0) -> list:
    """The plans of a ranking (``(plan, predicted ms)``, best first) to measure.

    Without ``spacing``: the top five of distinct predicted times and three random others.
    With it (0.05: 5 %): a ladder of at most eight, the best and then each next plan
    predicted at least ``spacing`` slower than the one before (every plan left out lies
    within ``spacing`` of a rung).  Plans a few percent apart swap places between
    repeated runs on a noisy host; the ladder measures an order the host can resolve."""
    if not spacing:
        chosen, times = [], set()
        for plan, t in ranked:
            if round(t, 4) not in times:
                times.add(round(t, 4))
                chosen.append((plan, t))
            if len(chosen) == TOP:
                break
        others = [(p, t) for p, t in ranked if round(t, 4) not in times]
        return chosen + pick.sample(others, min(RANDOM, len(others)))

    chosen = []
    for plan, t in ranked:
        if len(chosen) == TOP + RANDOM:
            break
        if not chosen or t >= chosen[-1][1] * (1 + spacing):
            chosen.append((plan, t))
    return chosen


def _scores(predicted: np.ndarray, measured: np.ndarray, noise: float) -> dict:
    """One task's figures: top-1, Kendall's tau and the noise."""
    best = int(np.argmin(predicted))
    tolerance = max(0.03, noise)
    return {"predicted_ms": np.round(predicted, 4).tolist(),
            "top1": bool(measured[best] <= measured.min() * (1 + tolerance)),
            "predicted_best_vs_measured_best_pct":
                round(100 * (measured[best] / measured.min() - 1), 2),
            "kendall_tau": round(_kendall_tau(predicted, measured), 4),
            "noise": round(noise, 4)}


def _self_tau(rounds: list[list[float]]) -> float | None:
    """Kendall's tau between the plans' medians over their odd and over their even
    rounds (None with fewer than two rounds a plan)."""
    if min(len(r) for r in rounds) < 2:
        return None
    odd = [statistics.median(r[0::2]) for r in rounds]
    even = [statistics.median(r[1::2]) for r in rounds]
    return round(_kendall_tau(odd, even), 4)


def plan_kind(assignment: dict) -> str:
    """What a plan mixes into table-wise: ``"tw"``, or its other kinds (``"rw+dp"``)."""
    kinds = {v if isinstance(v, str) else v.get("kind") if isinstance(v, dict) else "tw"
             for v in assignment.values()} - {"tw"}
    return "+".join(sorted(kinds)) or "tw"


def _by_kind(rows: list[dict]) -> dict:
    """Per kind of plan (:func:`plan_kind`), its measured / predicted time over its
    task's median of that ratio: how much slower than predicted each kind runs against
    the others of the same task (1.0: as predicted, relative to them)."""
    out: dict[str, list[float]] = {}
    for r in rows:
        ratio = np.array(r["measured_ms"]) / np.array(r["predicted_ms"])
        ratio = ratio / np.median(ratio)
        for a, x in zip(r["assignments"], ratio):
            out.setdefault(plan_kind(a), []).append(float(x))
    return {k: {"plans": len(v), "median": round(float(np.median(v)), 3),
                "p10": round(float(np.percentile(v, 10)), 3),
                "p90": round(float(np.percentile(v, 90)), 3)} for k, v in sorted(out.items())}


def _summary(rows: list[dict]) -> dict:
    def over(key, how):
        return how(r[key] for r in rows) if rows else math.nan
    self_tau = [r["measured_self_tau"] for r in rows if r.get("measured_self_tau") is not None]
    return {"tasks": len(rows),
            "top1": over("top1", statistics.mean),
            "kendall_tau_mean": over("kendall_tau", statistics.mean),
            "kendall_tau_median": over("kendall_tau", statistics.median),
            "measured_self_tau_mean": (round(statistics.mean(self_tau), 4) if self_tau
                                       else None),
            "noise_median": over("noise", statistics.median),
            "by_kind": _by_kind(rows)}


def rescore(result: dict, profile=None,
            progress: Callable[[float, str], None] | None = None) -> dict:
    """A :func:`validate_sharding` result predicted again, with ``profile``: the same
    measured plans, new predictions, their figures.  Measuring takes minutes a task;
    this takes seconds, so a new calibration or model is checked against runs that were
    measured before."""
    from ..engine.parallel import RankGraphs
    from ..engine.predict import prepare
    from ..model.sharding import Plan, placement, tables_of

    rows = []
    for i, old in enumerate(result["tasks"]):
        if progress is not None:
            progress(i / len(result["tasks"]), f"predicting {old['task']}")
        doc, platform, prof = prepare(old["scenario"], profile)
        graphs = RankGraphs(doc, platform, prof)
        dims = {t.key: t.dim for t in tables_of(doc)}
        predicted = np.array([
            max(graphs.rank_spans_ms(Plan("measured", platform.ranks, {
                k: placement(v, dims[k], platform.ranks) for k, v in a.items()})))
            for a in old["assignments"]])
        rows.append({**old, **_scores(predicted, np.array(old["measured_ms"]),
                                      old["noise"])})
    summary = {**result["summary"], **_summary(rows), "rescored": True}
    return {"summary": summary, "tasks": rows}
