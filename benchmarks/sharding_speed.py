"""How many sharding plans per second the full multi-rank simulation evaluates.

Random table-wise plans of a scenario's embedding tables (the 64-table DLRM on 8 A100 by
default) are simulated in batches, every rank with its CPU threads, streams and
collectives (:class:`~predictors.engine.plan_evaluator.PlanEvaluator`), as the search
evaluates its moves; then the search itself runs for the same budget.  It prints the
rates, the number of distinct feasible plans seen, the one-time cost of capturing the
template rank, and how far a few plans land from the same plans simulated from captured
rank graphs (which must be 0).

    python benchmarks/sharding_speed.py [SCENARIO.json] [--budget-s 20] [--batch 64]
"""
from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from predictors.engine.parallel import RankGraphs  # noqa: E402
from predictors.engine.plan_evaluator import PlanEvaluator  # noqa: E402
from predictors.engine.predict import prepare  # noqa: E402
from predictors.model.sharding import ColumnWise, Plan  # noqa: E402
from predictors.plan.plan_memory import PlanMemory  # noqa: E402
from predictors.plan.search import search_plans  # noqa: E402
from predictors.scenario import load_scenario  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", nargs="?",
                   default=str(ROOT / "resources" / "scenarios" / "dlrm_64tables_8gpu.json"))
    p.add_argument("--budget-s", type=float, default=20.0)
    p.add_argument("--batch", type=int, default=64, help="plans simulated together")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    import torch
    torch.set_num_threads(1)  # one core, as the rate is quoted
    doc, platform, profile = prepare(load_scenario(args.scenario))
    graphs = RankGraphs(doc, platform, profile)
    keys = [t.key for t in graphs.tables]
    budget = PlanMemory(graphs)   # the search's memory check
    evaluator = PlanEvaluator(graphs)
    t = time.perf_counter()
    evaluator.template(frozenset())
    template_s = time.perf_counter() - t
    rng = random.Random(args.seed)

    seen, evaluated, infeasible, worst_share = set(), 0, 0, 0.0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < args.budget_s:
        plans = []
        while len(plans) < args.batch:
            plan = Plan("random", graphs.ranks, {k: rng.randrange(graphs.ranks) for k in keys})
            if not budget.fits(plan, graphs.tables):
                infeasible += 1
                continue
            plans.append(plan)
        evaluator.spans_ms(plans)
        seen.update(p.signature(graphs.tables) for p in plans)
        evaluated += len(plans)
    elapsed = time.perf_counter() - t0

    check = [Plan("check", graphs.ranks, {k: rng.randrange(graphs.ranks) for k in keys})
             for _ in range(3)]
    composed = evaluator.spans_ms(check)
    captured = np.array([graphs.rank_spans_ms(p) for p in check])
    worst_share = float(np.max(np.abs(composed - captured) / captured))

    seeds, _ = graphs.candidates()
    found = search_plans(graphs.tables, graphs.ranks, evaluator.spans_ms, seeds,
                         budget_s=args.budget_s, batch=args.batch, patience=10 ** 9,
                         fits=lambda p: budget.fits(p, graphs.tables))
    best_seed = evaluator.spans_ms(seeds).max(axis=1).min()
    best = found.best_first()[0][1].max()

    print(f"{Path(args.scenario).name}: {len(keys)} tables on {graphs.ranks} ranks "
          f"({platform.name}), one thread")
    print(f"  random plans: {evaluated:,} in {elapsed:.1f} s = {evaluated / elapsed:,.0f} "
          f"plans/s, batches of {args.batch} ({len(seen):,} distinct feasible plans; "
          f"{infeasible:,} drawn plans did not fit)")
    print(f"  template rank captured once: {template_s:.2f} s")
    print(f"  composed vs captured rank graphs, 3 plans: largest difference "
          f"{100 * worst_share:.2g} %")
    print(f"  search: {found.evaluated:,} plans in {found.elapsed_s:.1f} s = "
          f"{found.evaluated / found.elapsed_s:,.0f} plans/s; best {best:.3f} ms against the "
          f"planners' best {best_seed:.3f} ms ({100 * (best / best_seed - 1):+.1f} %)")
    kinds = Counter(_kind(w) for w in found.best_first()[0][0].assignment.values())
    print(f"  search: {evaluator.templates} template ranks (one per set of kinds tried); "
          f"best plan: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())))
    return 0


def _kind(where) -> str:
    if isinstance(where, ColumnWise):
        return "column-wise"
    return {"rw": "row-wise", "dp": "data-parallel"}.get(where, "table-wise")


if __name__ == "__main__":
    sys.exit(main())
