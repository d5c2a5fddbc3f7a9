"""Sharding commands: ``rank-sharding``, ``validate-sharding``, and ``measure`` of CPU
ranks (``local-cpu`` with ``ranks``)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from ..engine.predict import prepare
from ..model.sharding import PlanError
from ..plan.rank_sharding import DEFAULT_BUDGET_S, rank_shardings, ranking_csv
from ..plan.torchrec_plans import to_torchrec
from ..scenario.format import Issue, ScenarioError
from ..utils.fileio import atomic_write_bytes
from ..utils.formatting import format_bytes
from .args import (
    PLATFORM_HELP,
    examples,
    positive_float,
    positive_int,
    profile_arg,
    scenario_arg,
    unwritable_outputs,
    usage_error,
)

__all__ = ["register", "measure_ranks"]


def _cmd_rank_sharding(args) -> int:

    problem = unwritable_outputs(("--csv", args.csv), ("--torchrec-out", args.torchrec_out))
    if problem:  # say so now, not after the search
        return usage_error(problem)
    plans = []
    for path in args.plan or ():
        try:
            with open(path, encoding="utf-8") as f:
                plans.append((f"{Path(path).name}", json.load(f)))
        except (OSError, ValueError) as exc:
            return usage_error(f"--plan {path}: cannot read a JSON plan ({exc})")
    ranking = rank_shardings(scenario_arg(args), top=args.top, profile=profile_arg(args),
                             budget_s=args.budget_s, seed=args.seed, torchrec_plans=plans,
                             torchrec_planner=args.torchrec_planner,
                             workers=args.workers or 0, dask=args.dask)
    if args.csv:
        atomic_write_bytes(args.csv, ranking_csv(ranking).encode())
    if args.torchrec_out and ranking.plans:
        atomic_write_bytes(args.torchrec_out, (json.dumps(
            to_torchrec(ranking.plans[0].plan), indent=1) + "\n").encode())
    if args.json:
        print(json.dumps(ranking.to_json()))
        return 0
    print(f"{ranking.scenario_name}: {len(ranking.plans)} plan(s) on {ranking.ranks} ranks "
          f"of {ranking.platform}, best first ({ranking.evaluated:,} simulated)")
    best = ranking.plans[0].iteration_ms
    for i, p in enumerate(ranking.plans, 1):
        print(f"  {i}. {p.plan.name:<24} {p.iteration_ms:9.3f} ms "
              f"{100 * (p.iteration_ms / best - 1):+5.1f} %{' tie' if p.tie else '    '}  "
              f"imbalance {100 * p.imbalance:4.0f} %, exposed all-to-all "
              f"{p.exposed_all_to_all_ms:.3f} ms, tables per rank "
              f"{format_bytes(min(p.rank_bytes))} - {format_bytes(max(p.rank_bytes))}, "
              f"peak memory {format_bytes(p.peak_memory_bytes)}"
              f"{'' if p.fits else ' (does not fit)'}")
    for name, why in ranking.refused:
        print(f"  refused: {name}: {why}")
    for note in ranking.notes:
        print(f"  note: {note}")
    return 0


def measure_ranks(args, doc: dict) -> int:
    """``measure`` of a ``local-cpu`` platform with ranks: the processes train the
    scenario's plan together; the slowest rank's median step."""
    from ..calibrate.ranks import measure_plans, trace_path  # deferred: imports torch
    from ..engine.parallel import RankGraphs, scenario_plan

    if args.device != "cpu" or args.et or args.memory:
        return usage_error("ranks of local-cpu are measured on the CPU, without --et or "
                           "--memory")
    doc, platform, profile = prepare(doc)
    try:
        plan = scenario_plan(RankGraphs(doc, platform, profile))
    except PlanError as exc:
        raise ScenarioError([Issue("parallelism.embedding_sharding", str(exc))]) from None
    (result,) = measure_plans(doc, [plan.assignment], iters=args.iters, warmup=args.warmup,
                              rounds=1, trace=args.trace)
    if args.trace:
        result["traces"] = [trace_path(args.trace, 0, r) for r in range(platform.ranks)]
    result.update(scenario=doc["name"], ranks=platform.ranks, threads=platform.threads,
                  iterations=args.iters, plan=plan.name,
                  assignment=plan.to_json()["assignment"])
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['scenario']} on {platform.ranks} CPU ranks ({platform.threads} "
              f"thread(s) each, gloo), plan {plan.name}: slowest rank's median step "
              f"{result['iteration_ms']:.3f} ms; per rank "
              + ", ".join(f"{ms:.3f}" for ms in result["per_rank_ms"])
              + f" ms over {args.iters} iterations")
    return 0


def _cmd_validate_sharding(args) -> int:
    from ..calibrate.sharding_validation import rescore, validate_sharding  # torch

    def show(fraction: float, stage: str) -> None:
        if not args.json:
            print(f"[{100 * fraction:5.1f}%] {stage}", flush=True)

    if args.rescore:
        try:
            opener = gzip.open if args.rescore.endswith(".gz") else open
            with opener(args.rescore, "rt", encoding="utf-8") as f:
                measured = json.load(f)
            tasks = measured["tasks"]
            if not isinstance(tasks, list) or not all(
                    {"scenario", "assignments", "measured_ms", "noise"} <= set(t)
                    for t in tasks):
                raise KeyError("tasks")
        except (OSError, EOFError, ValueError, KeyError, TypeError) as exc:
            return usage_error(f"--rescore {args.rescore}: not the JSON of "
                               f"`validate-sharding --json` ({exc})")
        result = rescore(measured, profile_arg(args), progress=show)
    else:
        result = validate_sharding(ranks=args.ranks, tasks=args.tasks, seed=args.seed,
                                   profile=profile_arg(args), budget_s=args.budget_s,
                                   rounds=args.rounds, iters=args.iters,
                                   spacing=args.spacing / 100, progress=show)
    if args.json:
        print(json.dumps(result))
        return 0
    for r in result["tasks"]:
        print(f"  {r['task']}: top-1 {'yes' if r['top1'] else 'no '} (predicted best "
              f"{r['predicted_best_vs_measured_best_pct']:+.1f} % from the measured best), "
              f"tau {r['kendall_tau']:+.2f}, noise {100 * r['noise']:.1f} %")
    s = result["summary"]
    apart = f", plans {100 * s['spacing']:g} % apart" if s.get("spacing") else ""
    print(f"{s['tasks']} tasks on {s['ranks']} CPU ranks ({s['left_out_as_ties']} left out "
          f"as ties{apart}): top-1 {100 * s['top1']:.0f} %, Kendall tau mean "
          f"{s['kendall_tau_mean']:.2f} (median {s['kendall_tau_median']:.2f}), noise "
          f"{100 * s['noise_median']:.1f} % (median), {s['elapsed_s']:.0f} s"
          + (" to measure; predicted again" if s.get("rescored") else ""))
    if s.get("measured_self_tau_mean") is not None:
        print(f"the measurement against itself (odd against even rounds): Kendall tau mean "
              f"{s['measured_self_tau_mean']:.2f}")
    print("measured / predicted, over the task's median (1.00: as predicted against the "
          "task's other plans):")
    for kind, k in s["by_kind"].items():
        print(f"  {kind:10s} {k['plans']:3d} plans  median {k['median']:.2f}  "
              f"(10-90 %: {k['p10']:.2f}-{k['p90']:.2f})")
    return 0


def register(sub) -> None:
    rs = sub.add_parser(
        "rank-sharding", help="predict the candidate embedding sharding plans of a "
                              "multi-GPU scenario, best first",
        **examples("%(prog)s resources/scenarios/mlperf_dlrm_dcnv2.json --top 3",
                   "%(prog)s resources/scenarios/small_dlrm.json --platform dgx-h100 --json"))
    rs.add_argument("scenario", metavar="SCENARIO.json", help="scenario JSON file")
    rs.add_argument("--top", type=positive_int, metavar="K", help="print only the K best plans")
    rs.add_argument("--profile", help="device profile name or path (as for predict)")
    rs.add_argument("--platform", metavar="PRESET_OR_FILE",
                    help=f"rank the plans on this platform instead: {PLATFORM_HELP}")
    rs.add_argument("--budget-s", type=positive_float, default=DEFAULT_BUDGET_S, metavar="N",
                    help="search for at most N seconds (default %(default)g); small cases are "
                         "enumerated instead")
    rs.add_argument("--seed", type=int, default=0, help="the search's random seed")
    where = rs.add_mutually_exclusive_group()
    where.add_argument("--workers", type=positive_int, metavar="N",
                       help="evaluate the plans on N local worker processes")
    where.add_argument("--dask", metavar="ADDRESS",
                       help="evaluate the plans on the workers of the Dask scheduler at "
                            "ADDRESS (tcp://host:8786; needs the cluster extra)")
    rs.add_argument("--csv", metavar="OUT.csv", help="also write the ranking as CSV")
    rs.add_argument("--plan", action="append", metavar="PLAN.json",
                    help="also rank this plan, in TorchRec's terms (per table a sharding_type "
                         "and ranks; see docs/cli.md); repeatable")
    rs.add_argument("--torchrec-planner", action="store_true",
                    help="also rank the plan of TorchRec's own planner (TorchRec installed)")
    rs.add_argument("--torchrec-out", metavar="OUT.json",
                    help="write the best plan in TorchRec's terms, to apply it there")
    rs.add_argument("--json", action="store_true", help="print one JSON object")
    rs.set_defaults(func=_cmd_rank_sharding)
    vs = sub.add_parser(
        "validate-sharding", help="rank random DLRM tasks on this host's CPU ranks, then "
                                  "train their plans for real and compare the orders",
        **examples("%(prog)s --ranks 2 --tasks 20 --seed 1",
                   "%(prog)s --ranks 2 --tasks 3 --profile my-cpu.json --json > runs.json",
                   "%(prog)s --rescore runs.json --profile new-cpu.json"))
    vs.add_argument("--ranks", type=positive_int, default=2, help="processes (default 2)")
    vs.add_argument("--tasks", type=positive_int, default=20,
                    help="tasks measured (default 20); ties are drawn again")
    vs.add_argument("--seed", type=int, default=0, help="draws the tasks")
    vs.add_argument("--profile", help="CPU profile name or path (as for predict)")
    vs.add_argument("--budget-s", type=positive_float, default=8.0, metavar="N",
                    help="search budget per task (default %(default)g s)")
    vs.add_argument("--rounds", type=positive_int, default=8,
                    help="interleaved rounds per plan (default 8)")
    vs.add_argument("--iters", type=positive_int, default=20,
                    help="timed steps per round (default 20)")
    vs.add_argument("--spacing", type=positive_float, default=0.0, metavar="PCT",
                    help="measure a ladder of eight plans, each predicted at least PCT %% "
                         "slower than the one before, instead of the predicted top five "
                         "and three random ones")
    vs.add_argument("--rescore", metavar="RESULT.json",
                    help="measure nothing: predict the plans of an earlier "
                         "`validate-sharding --json` result again (with --profile) and "
                         "score them against its measurements")
    vs.add_argument("--json", action="store_true", help="print one JSON object")
    vs.set_defaults(func=_cmd_validate_sharding)
