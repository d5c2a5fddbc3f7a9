"""``python -m predictors``: the headless command line (no Qt is imported)."""
from __future__ import annotations

import argparse
import importlib
import json
import sys

# Modules that contribute sub-commands through ``register(subparsers)``.
_COMMAND_MODULES: list[str] = []

__all__ = ["main"]


def _cmd_predict(args) -> int:
    from .predict import predict
    from .scenario import load_scenario

    doc = load_scenario(args.scenario)
    if args.platform:
        doc["platform"] = {"preset": args.platform}
    if args.profile not in (None, "default"):
        raise SystemExit("error: --profile: only the built-in 'default' profile exists so far "
                         "(calibrated profiles arrive with `calibrate`)")
    result = predict(doc)
    if args.chrome_trace:
        result.timeline.save_chrome_trace(args.chrome_trace)
    if args.json:
        print(json.dumps(result.to_json()))
        return 0
    print(f"{result.scenario_name} on {result.platform} ({result.device})")
    print(f"  iteration      {result.iteration_ms:10.3f} ms")
    for r in result.per_rank:
        print(f"  rank {r['rank']:<3} device active {r['device_active_ms']:10.3f} ms "
              f"({100 * r['device_active_ms'] / max(r['iteration_ms'], 1e-12):.0f}%)")
    print(f"  ops captured   {result.num_ops:10d}")
    print("  top ops by device time:")
    for op in result.top_ops:
        print(f"    {op['name']:<40} {op['category']:<12} {op['total_ms']:9.3f} ms "
              f"x{op['count']}")
    for note in result.notes:
        print(f"  note: {note}")
    return 0


def _cmd_measure(args) -> int:
    from .measure import measure
    from .scenario import load_scenario

    doc = load_scenario(args.scenario)
    if args.threads:
        doc["platform"] = {"preset": "local-cpu", "threads": args.threads}
    result = measure(doc, device=args.device, iters=args.iters, warmup=args.warmup,
                     trace=args.trace)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['scenario']} on {args.device} ({result['threads']} threads): "
              f"median {result['iteration_ms']:.3f} ms, p10-p90 {result['p10_ms']:.3f}-"
              f"{result['p90_ms']:.3f} ms (spread {result['spread_pct']:.1f}%) over "
              f"{result['iterations']} iterations")
    return 0


def _cmd_validate_scenario(args) -> int:
    from .scenario import load_scenario
    from .workload import build_workload

    for path in args.scenario:
        build_workload(load_scenario(path))
        print(f"{path}: ok")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m predictors",
                                     description="Predict one training iteration of a "
                                                 "scenario without running it.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("predict", help="predict one training iteration")
    p.add_argument("scenario", help="scenario JSON file")
    p.add_argument("--profile", help="device profile name or path (default: built-in)")
    p.add_argument("--platform", help="override the scenario's platform preset")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--chrome-trace", metavar="OUT.json",
                   help="also write the predicted timeline as a Chrome trace (Perfetto)")
    p.set_defaults(func=_cmd_predict)
    m = sub.add_parser("measure", help="run the scenario for real and time it")
    m.add_argument("scenario")
    m.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    m.add_argument("--iters", type=int, default=20, help="timed iterations (default 20)")
    m.add_argument("--warmup", type=int, default=3, help="untimed iterations first")
    m.add_argument("--threads", type=int, help="CPU threads (default: the scenario's)")
    m.add_argument("--trace", metavar="OUT.json[.gz]",
                   help="also record one step with torch.profiler (Kineto JSON)")
    m.add_argument("--json", action="store_true")
    m.set_defaults(func=_cmd_measure)
    v = sub.add_parser("check", help="validate scenario files and compile their models")
    v.add_argument("scenario", nargs="+")
    v.set_defaults(func=_cmd_validate_scenario)
    for module in _COMMAND_MODULES:  # each adds its own sub-commands
        importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from .scenario import ScenarioError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
