"""How many sharding plans per second the full multi-rank simulation evaluates.

Random table-wise plans of a scenario's embedding tables (the 64-table DLRM on 8 A100 by
default), each predicted with every rank's captured graph, its costs, and the simulator
walking all ranks through their collectives (each rank's iteration, as a search needs it:
no Timeline is drawn); the rate, the number of distinct feasible plans seen, and where the
time goes (capturing and costing rank graphs of new table sets, simulating).

    python benchmarks/sharding_speed.py [SCENARIO.json] [--budget-s 30] [--seed 0]
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from predictors.engine.parallel import RankGraphs  # noqa: E402
from predictors.engine.predict import prepare  # noqa: E402
from predictors.model.sharding import Plan, PlanError, check_memory  # noqa: E402
from predictors.scenario import load_scenario  # noqa: E402


def random_plan(rng: random.Random, keys: list[str], ranks: int, n: int) -> Plan:
    return Plan(f"random {n}", ranks, {k: rng.randrange(ranks) for k in keys})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", nargs="?",
                   default=str(ROOT / "resources" / "scenarios" / "dlrm_64tables_8gpu.json"))
    p.add_argument("--budget-s", type=float, default=30.0)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    import torch
    torch.set_num_threads(1)  # one core, as the rate is quoted
    doc, platform, profile = prepare(load_scenario(args.scenario))
    graphs = RankGraphs(doc, platform, profile)
    keys = [t.key for t in graphs.tables]
    memory = graphs.memory_bytes()
    rng = random.Random(args.seed)
    t_capture = t_simulate = 0.0
    seen, evaluated, infeasible = set(), 0, 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < args.budget_s:
        plan = random_plan(rng, keys, graphs.ranks, evaluated + infeasible)
        try:
            check_memory(plan, graphs.tables, memory)
        except PlanError:
            infeasible += 1
            continue
        a = time.perf_counter()
        for r in range(graphs.ranks):
            graphs.costed(plan.local(r), r, plan.rowwise)
        b = time.perf_counter()
        graphs.rank_spans_ms(plan)
        t_capture += b - a
        t_simulate += time.perf_counter() - b
        seen.add(plan.signature(graphs.tables))
        evaluated += 1
    elapsed = time.perf_counter() - t0
    print(f"{Path(args.scenario).name}: {len(keys)} tables on {graphs.ranks} ranks "
          f"({platform.name}), one thread")
    print(f"  evaluated {evaluated} plans in {elapsed:.1f} s: {evaluated / elapsed:.2f} plans/s "
          f"({len(seen)} distinct feasible plans; {infeasible} drawn plans did not fit)")
    if evaluated:
        print(f"  per plan: capture and cost {1e3 * t_capture / evaluated:.0f} ms, "
              f"simulate {1e3 * t_simulate / evaluated:.1f} ms "
              f"({graphs.captured} rank graphs captured)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
