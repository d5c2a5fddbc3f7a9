"""``python -m predictors``: the headless command line (no Qt is imported)."""
from __future__ import annotations

import argparse
import importlib
import json
import sys

from ..utils.formatting import format_bytes
from ..utils.metrics import format_summary, summarize

# Modules that contribute sub-commands through ``register(subparsers)``.
_COMMAND_MODULES: list[str] = ["predictors.cli.traces", "predictors.cli.kernels",
                              "predictors.cli.collective"]

__all__ = ["main"]


def _int_at_least(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
    return value


def _positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (argparse turns the error into exit 2)."""
    return _int_at_least(text, 1)


def _count(text: str) -> int:
    """An argparse type: a whole number >= 0."""
    return _int_at_least(text, 0)


def _cmd_predict(args) -> int:
    from ..engine.predict import predict
    from ..scenario.format import load_scenario

    doc = load_scenario(args.scenario)
    if args.platform:
        doc["platform"] = {"preset": args.platform}
    overheads = None
    if args.overheads_from:
        overheads = _trace_overheads(args.overheads_from, doc)
        if isinstance(overheads, int):
            return overheads
    result = predict(doc, profile=None if args.profile in (None, "default") else args.profile,
                     overheads=overheads)
    if args.chrome_trace:
        result.timeline.save_chrome_trace(args.chrome_trace)
    if args.json:
        print(json.dumps(result.to_json()))
        return 0
    print(f"{result.scenario_name} on {result.platform} ({result.device})")
    print(f"  iteration      {result.iteration_ms:10.3f} ms")
    for r in result.per_rank:
        comm = (f", exposed comm {r['exposed_comm_ms']:.3f} ms" if r.get("exposed_comm_ms")
                else "")
        print(f"  rank {r['rank']:<3} device active {r['device_active_ms']:10.3f} ms "
              f"({100 * r['device_active_ms'] / max(r['iteration_ms'], 1e-12):.0f}%){comm}"
              f"{_memory_text(r)}")
    print(f"  ops captured   {result.num_ops:10d}")
    print("  top ops by device time:")
    for op in result.top_ops:
        print(f"    {op['name']:<40} {op['category']:<12} {op['total_ms']:9.3f} ms "
              f"x{op['count']}")
    for note in result.notes:
        print(f"  note: {note}")
    return 0


def _memory_text(rank: dict) -> str:
    """``, peak memory 1.2 GB (3 %)`` for a rank's figures; empty without them."""

    if "peak_memory_bytes" not in rank:
        return ""
    text = f", peak memory {format_bytes(rank['peak_memory_bytes'])}"
    device = rank["memory"].get("device_bytes")
    if device:
        text += f" ({100 * rank['peak_memory_bytes'] / device:.0f} % of "
        text += f"{format_bytes(device)})"
    return text


def _cmd_rank_sharding(args) -> int:
    from ..plan.rank_sharding import rank_shardings
    from ..scenario.format import load_scenario

    doc = load_scenario(args.scenario)
    if args.platform:
        doc["platform"] = {"preset": args.platform}
    ranking = rank_shardings(doc, top=args.top,
                             profile=None if args.profile in (None, "default")
                             else args.profile)
    if args.json:
        print(json.dumps(ranking.to_json()))
        return 0
    print(f"{ranking.scenario_name}: {len(ranking.plans)} plan(s) on {ranking.ranks} ranks "
          f"of {ranking.platform}, best first")
    best = ranking.plans[0].iteration_ms
    for i, p in enumerate(ranking.plans, 1):
        print(f"  {i}. {p.plan.name:<26} {p.iteration_ms:9.3f} ms  "
              f"{100 * (p.iteration_ms / best - 1):+5.1f} %   tables per rank "
              f"{format_bytes(min(p.rank_bytes))} - {format_bytes(max(p.rank_bytes))}, "
              f"peak memory {format_bytes(p.peak_memory_bytes)}"
              f"{'' if p.fits else ' (does not fit)'}")
    for name, why in ranking.refused:
        print(f"  refused: {name}: {why}")
    for note in ranking.notes:
        print(f"  note: {note}")
    return 0


def _cmd_fit(args) -> int:
    from ..plan.capacity import largest_batch
    from ..scenario.format import load_scenario

    doc = load_scenario(args.scenario)
    if args.platform:
        doc["platform"] = {"preset": args.platform}
    if args.optimizer:
        doc["training"]["optimizer"] = args.optimizer
    cap = largest_batch(doc, multiple=args.multiple,
                        profile=None if args.profile in (None, "default") else args.profile)
    if args.json:
        print(json.dumps(cap.to_json()))
        return 0
    gb = lambda n: format_bytes(n, 2)   # near the limit one decimal is too coarse
    where = f" (rank {cap.rank})" if cap.rank else ""
    print(f"{cap.scenario_name} on {cap.platform} ({cap.device}, "
          f"{format_bytes(cap.device_bytes)} each)")
    if cap.batch_size is None:
        print(f"  not even batch {cap.over_batch:,} fits: its step needs "
              f"{gb(cap.peak_bytes)}{where} at {cap.peak_op}")
        return 0
    print(f"  largest batch that fits: {cap.batch_size:,} "
          f"(peak {gb(cap.peak_bytes)}{where} at {cap.peak_op})")
    if cap.capped:
        print("  (the search stops there: larger batches may fit too)")
    else:
        print(f"  batch {cap.over_batch:,} needs {gb(cap.over_peak_bytes)}")
    print(f"  {cap.probes} captures; not counted: the CUDA context, workspaces, NCCL buffers")
    return 0


def _cmd_sweep(args) -> int:
    from ..plan.sweep import parse_values, sweep
    from ..scenario.format import load_scenario

    doc = load_scenario(args.scenario)
    try:
        values = parse_values(args.param, args.values)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = sweep(doc, args.param, values,
                   profile=None if args.profile in (None, "default") else args.profile)
    if args.json:
        print(json.dumps(result.to_json()))
        return 0
    best = result.best()
    print(f"{result.scenario_name}: {args.param} swept over {len(values)} value(s)")
    for row in result.rows:
        mark = " <- fastest" if row is best else ""
        if row.error:
            print(f"  {str(row.value):>16}   cannot run: {row.error}")
        else:
            memory = ("" if row.peak_memory_bytes is None
                      else f"  peak {format_bytes(row.peak_memory_bytes)}"
                      + (" (does not fit)" if row.fits is False else ""))
            print(f"  {str(row.value):>16} {row.iteration_ms:10.3f} ms  "
                  f"{row.records_per_s:14,.0f} samples/s  {row.ranks} rank(s){memory}{mark}")
    return 0


def _trace_overheads(files: list[str], doc: dict):
    """T1-T5 measured from the user's recorded GPU trace(s), or an exit code."""
    import os

    from ..hardware.platforms import resolve_platform
    from ..scenario.format import validate_scenario
    from ..traces.kineto import TraceError
    from ..traces.overhead_tables import overheads_from_recording
    from ..traces.recording import load_recording

    if resolve_platform(validate_scenario(doc)["platform"]).device == "cpu":
        print("error: --overheads-from: trace overheads apply to GPU platforms; on the CPU "
              "run `python -m predictors calibrate`", file=sys.stderr)
        return 2
    try:
        rec = load_recording(files)
        table, _ = overheads_from_recording(
            rec, ", ".join(os.path.basename(f) for f in files))
    except TraceError as exc:
        print(f"error: --overheads-from: {exc}", file=sys.stderr)
        return 2
    return table


def _cmd_measure(args) -> int:
    from ..calibrate.measure import measure
    from ..scenario.format import load_scenario

    doc = load_scenario(args.scenario)
    if args.device == "cuda" and not _cuda_available():
        print("error: --device cuda: no GPU here (torch.cuda.is_available() is False)",
              file=sys.stderr)
        return 2
    if args.et and not args.trace:
        print("error: --et: the execution trace is recorded with the Kineto trace; give "
              "--trace OUT.json[.gz] too", file=sys.stderr)
        return 2
    for flag, target in (("--trace", args.trace), ("--et", args.et)):
        problem = _unwritable(target) if target else None
        if problem:  # say so now, not after the measured steps
            print(f"error: {flag} {target}: {problem}", file=sys.stderr)
            return 2
    if args.threads:
        doc["platform"] = {"preset": "local-cpu", "threads": args.threads}
    result = measure(doc, device=args.device, iters=args.iters, warmup=args.warmup,
                     trace=args.trace, memory=args.memory, et=args.et)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['scenario']} on {args.device} ({result['threads']} threads): "
              f"median {result['iteration_ms']:.3f} ms, p10-p90 {result['p10_ms']:.3f}-"
              f"{result['p90_ms']:.3f} ms (spread {result['spread_pct']:.1f}%) over "
              f"{result['iterations']} iterations")
        if args.memory:
            print(f"peak allocated memory: {format_bytes(result['peak_memory_bytes'])}")
    return 0


def _progress_printer(quiet: bool):
    def show(fraction: float, stage: str) -> None:
        if not quiet:
            print(f"[{100 * fraction:5.1f}%] {stage}", file=sys.stderr, flush=True)
    return show


def _cmd_calibrate(args) -> int:
    from ..calibrate.calibrate import calibrate_cpu
    from ..calibrate.validate import format_classes
    from ..profiles import save_profile

    if args.device == "cuda" or args.from_measurements:
        return _calibrate_cuda(args)
    for flag, target in (("--out", args.out), ("--keep-samples", args.keep_samples)):
        problem = _unwritable(target) if target else None
        if problem:  # say so now, not after minutes of measuring
            print(f"error: {flag} {target}: {problem}", file=sys.stderr)
            return 2
    kept = {} if args.keep_samples else None
    prof = calibrate_cpu(threads=args.threads, budget_s=args.budget_s, seed=args.seed,
                         progress=_progress_printer(args.quiet), keep_samples=kept)
    path = save_profile(prof, args.out)
    if kept is not None:
        from ..calibrate.kept_samples import save_samples
        print(f"wrote {save_samples(kept, prof.provenance, args.keep_samples)} "
              f"(training samples)")
    classes = prof.validation.get("classes", {})
    print(f"wrote {path} ({prof.provenance['elapsed_s']} s, "
          f"{prof.provenance['profiled_steps']} profiled steps, "
          f"{prof.provenance['microbenchmarks']} microbenchmarks)")
    print("\n".join(format_classes(classes)))
    return 0


def _calibrate_cuda(args) -> int:
    """``calibrate --device cuda``: measure this GPU into a folder, then build its profile
    (``--from-measurements DIR`` builds from a folder measured before, anywhere)."""
    from pathlib import Path

    from ..calibrate.cuda_profile import (
        calibrate_cuda,
        profile_from_measurements,
        with_validation,
    )
    from ..profiles import ProfileError, save_profile

    problem = _unwritable(args.out)
    if problem:
        print(f"error: --out {args.out}: {problem}", file=sys.stderr)
        return 2
    if args.from_measurements:
        folder = args.from_measurements
        from ..traces.kineto import TraceError

        try:
            prof = profile_from_measurements(folder, gemms_from=args.gemms_from or [])
            prof, rows = with_validation(prof, folder, gemms_from=args.gemms_from or [])
        except (ProfileError, TraceError) as exc:  # a trace of the folder missing or broken
            print(f"error: {exc}", file=sys.stderr)
            return 2
    else:
        if not _cuda_available():
            print("error: --device cuda: no GPU here (torch.cuda.is_available() is False); "
                  "measure on the GPU machine, or build from its folder with "
                  "--from-measurements DIR", file=sys.stderr)
            return 2
        folder = args.measurements or str(Path(args.out).with_suffix("")) + "-measurements"
        prof, rows = calibrate_cuda(
            args.budget_s, args.seed, folder,
            log=(lambda s: None) if args.quiet else
            (lambda s: print(s, file=sys.stderr, flush=True)))
    path = save_profile(prof, args.out)
    print(f"wrote {path} from {folder} ({prof.provenance['profiled_steps']} profiled steps)")
    _print_gpu_rows(rows, "leave one out")
    return 0


def _print_gpu_rows(rows: list[dict], how: str) -> None:
    for r in rows:
        print(f"  {r['scenario'][:58]:58s} measured {r['measured_ms']:9.3f} ms  predicted "
              f"{r['predicted_ms']:9.3f} ms  {r['error_pct']:+6.1f}%  (spread "
              f"{r['spread_pct'] or 0:.0f}%)")
    for kind in ("DLRM", "LM"):
        errs = [r["error_pct"] for r in rows if f" {kind} " in f" {r['scenario']}"]
        if errs:
            print(f"  {kind} ({how}): {format_summary(summarize(e / 100 for e in errs))}")
    if rows:
        print(f"  all ({how}): "
              f"{format_summary(summarize(r['error_pct'] / 100 for r in rows))}")


def _validate_cuda(args) -> int:
    """``validate --device cuda``: measure random scenarios on this GPU (and six GPU-sized
    ones) and predict them with a profile (default: the GPU's bundled one)."""
    import datetime
    import socket
    import tempfile

    from ..calibrate.cuda_profile import gpu_end_to_end, scenario_errors
    from ..profiles import (
        ProfileError,
        default_profile,
        profile_file,
        record_validation,
        resolve_profile,
    )

    if not _cuda_available():
        print("error: --device cuda: no GPU here (torch.cuda.is_available() is False)",
              file=sys.stderr)
        return 2
    import torch

    from ..calibrate.cuda_collect import collect, gpu_scenarios
    from ..calibrate.gpu_profiles import profile_for_device

    name = torch.cuda.get_device_name()
    prof = (resolve_profile(args.profile) if args.profile
            else default_profile(name, "gpu") or profile_for_device(name))
    folder = args.measurements or tempfile.mkdtemp(prefix="ml-dse-validate-")
    collect(folder, device="cuda", scenarios=gpu_scenarios(name, args.seed, 2 * args.n),
            kernels=False, budget_s=600.0,
            log=(lambda s: None) if args.quiet else
            (lambda s: print(s, file=sys.stderr, flush=True)))
    rows = scenario_errors(folder, profile=prof)
    print(json.dumps(rows) if args.json else f"Validation of profile {prof.name!r} "
          f"({prof.kind}) on {name}; measurements in {folder}")
    if not args.json:
        _print_gpu_rows(rows, "profile as it is")
    if args.record:
        target = profile_file(prof)
        if target is None:
            print(f"error: --record: no profile file for {prof.name!r}", file=sys.stderr)
            return 1
        try:
            when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            record_validation(target, "end_to_end", gpu_end_to_end(
                rows, {"date": when, "host": socket.gethostname()},
                " ".join(["python -m predictors validate"] + sys.argv[2:])))
        except (ProfileError, OSError) as e:
            print(f"error: --record: {e}", file=sys.stderr)
            return 1
    return 0


def _unwritable(path: str) -> str | None:
    """Why a profile cannot be written at ``path`` (its folder is created), or None."""
    import tempfile
    from pathlib import Path

    from ..utils.fileio import writable_target

    if Path(path).expanduser().is_dir():
        return "is a folder; give a file name such as PROFILE.json"
    try:
        writable_target(Path(path).expanduser())
    except OSError as exc:
        return str(exc)
    folder = Path(path).expanduser().resolve().parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return f"cannot write in {folder}: {exc.strerror or exc}"
    return None


def _cuda_available() -> bool:
    import torch
    return torch.cuda.is_available()


def _cmd_validate(args) -> int:
    from pathlib import Path

    from ..calibrate.validate import end_to_end_record, format_report, validate_cpu
    from ..profiles import (
        ProfileError,
        default_profile,
        profile_file,
        record_validation,
        resolve_profile,
    )

    if args.device == "cuda":
        return _validate_cuda(args)
    prof = (resolve_profile(args.profile) if args.profile
            else default_profile("cpu", "cpu", args.threads))
    if prof is not None and prof.device.kind != "cpu":
        raise SystemExit(f"error: --profile: {prof.name!r} describes a GPU "
                         f"({prof.device.name}); validate --device cpu needs a CPU profile")
    if prof is None:
        raise SystemExit(f"error: no calibrated CPU profile for {args.threads} thread(s); "
                         f"run `python -m predictors calibrate --device cpu --out P.json`")
    kinds = ("dlrm", "transformer") if args.kind == "all" else (args.kind,)
    target = None
    if args.record:  # know where it goes before minutes of measuring
        target = (Path(args.profile) if args.profile and Path(args.profile).is_file()
                  else profile_file(prof))
        if target is None:
            raise SystemExit(f"error: --record: no profile file for {args.profile!r}")
    result = validate_cpu(prof, n=args.n, seed=args.seed, iters=args.iters, kinds=kinds,
                          rounds=args.rounds, progress=_progress_printer(args.quiet))
    print(json.dumps(result) if args.json else format_report(result))
    if target is not None:
        try:
            record_validation(target, "end_to_end", end_to_end_record(result, " ".join(
                ["python -m predictors validate"] + sys.argv[2:])))
        except (ProfileError, OSError) as e:
            print(f"error: --record: {e}", file=sys.stderr)
            return 1
        print(f"recorded in {target} (validation.end_to_end)", file=sys.stderr)
    return 0


def _cmd_validate_scenario(args) -> int:
    from ..model.workload import build_workload
    from ..scenario.format import ScenarioError, load_scenario

    bad = 0
    for path in args.scenario:
        try:
            build_workload(load_scenario(path))
            print(f"{path}: ok")
        except ScenarioError as exc:
            bad += 1
            print(f"error: {exc if exc.source else f'{path}: {exc}'}", file=sys.stderr)
    return 2 if bad else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m predictors",
                                     description="Predict one training iteration of a "
                                                 "scenario without running it.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("predict", help="predict one training iteration")
    p.add_argument("scenario", help="scenario JSON file")
    p.add_argument("--profile", help="device profile name or path; 'roofline' for datasheet "
                                      "figures only (default: the device's bundled profile)")
    p.add_argument("--platform", help="override the scenario's platform preset")
    p.add_argument("--overheads-from", nargs="+", metavar="TRACE",
                   help="CPU overheads (T1-T5) measured from your own recorded GPU trace(s) "
                        "instead of the profile's pooled ones")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--chrome-trace", metavar="OUT.json",
                   help="also write the predicted timeline as a Chrome trace (Perfetto)")
    p.set_defaults(func=_cmd_predict)
    rs = sub.add_parser("rank-sharding", help="predict the candidate embedding sharding "
                                              "plans of a multi-GPU scenario, best first")
    rs.add_argument("scenario", help="scenario JSON file")
    rs.add_argument("--top", type=_positive_int, help="print only the K best plans")
    rs.add_argument("--profile", help="device profile name or path (as for predict)")
    rs.add_argument("--platform", help="override the scenario's platform preset")
    rs.add_argument("--json", action="store_true", help="print one JSON object")
    rs.set_defaults(func=_cmd_rank_sharding)
    from ..scenario.format import OPTIMIZERS

    ft = sub.add_parser("fit", help="the largest batch whose step fits every rank's "
                                    "device memory")
    ft.add_argument("scenario", help="scenario JSON file")
    ft.add_argument("--platform", help="override the scenario's platform preset")
    ft.add_argument("--optimizer", choices=list(OPTIMIZERS),
                    help="override the scenario's optimizer")
    ft.add_argument("--multiple", type=_positive_int, default=1,
                    help="only batches that are multiples of this (default 1)")
    ft.add_argument("--profile", help="device profile name or path (as for predict)")
    ft.add_argument("--json", action="store_true", help="print one JSON object")
    ft.set_defaults(func=_cmd_fit)
    from ..plan.sweep import SWEEPABLE  # light: no torch

    sw = sub.add_parser("sweep", help="predict the scenario for each value of one setting")
    sw.add_argument("scenario", help="scenario JSON file")
    sw.add_argument("--param", required=True, choices=list(SWEEPABLE),
                    help="the setting to sweep")
    sw.add_argument("--values", required=True,
                    help="comma-separated values, e.g. 256,512,1024 or a100-1,dgx-a100")
    sw.add_argument("--profile", help="device profile name or path (not with --param "
                                      "platform: each platform takes its own)")
    sw.add_argument("--json", action="store_true", help="print one JSON object")
    sw.set_defaults(func=_cmd_sweep)
    m = sub.add_parser("measure", help="run the scenario for real and time it")
    m.add_argument("scenario")
    m.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="cpu or cuda (default: cpu)")
    m.add_argument("--iters", type=_positive_int, default=20,
                   help="timed iterations (default 20)")
    m.add_argument("--warmup", type=_count, default=5, help="untimed iterations first")
    m.add_argument("--threads", type=_positive_int,
                   help="CPU threads (default: the scenario's)")
    m.add_argument("--trace", metavar="OUT.json[.gz]",
                   help="also record one step with torch.profiler (Kineto JSON)")
    m.add_argument("--et", metavar="ET.json[.gz]",
                   help="with --trace: also record the traced step's PyTorch execution "
                        "trace (linked to the Kineto events by record-function id)")
    m.add_argument("--memory", action="store_true",
                   help="also measure one step's peak of allocated tensor memory (and "
                        "record memory events in --trace)")
    m.add_argument("--json", action="store_true")
    m.set_defaults(func=_cmd_measure)
    c = sub.add_parser("calibrate", help="measure this device and write a profile")
    c.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    c.add_argument("--out", required=True, metavar="PROFILE.json")
    c.add_argument("--budget-s", type=float, default=600.0, help="time budget (default 600)")
    c.add_argument("--threads", type=_positive_int, default=1, help="CPU threads (default 1)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--keep-samples", metavar="SAMPLES.json.gz",
                   help="also write the training samples (benchmarks/feature_ab.py refits "
                        "from them)")
    c.add_argument("--measurements", metavar="DIR",
                   help="cuda: where the measurements go (default: beside --out)")
    c.add_argument("--from-measurements", metavar="DIR",
                   help="build a GPU profile from a folder measured before (no GPU needed)")
    c.add_argument("--gemms-from", metavar="DIR", action="append",
                   help="with --from-measurements: also fit the GEMMs measured in DIR (the "
                        "same GPU, another run; repeatable)")
    c.add_argument("--quiet", action="store_true", help="no progress on stderr")
    c.set_defaults(func=_cmd_calibrate)
    va = sub.add_parser("validate", help="measure and predict random scenarios")
    va.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    va.add_argument("--profile", help="profile path or name (default: the bundled one)")
    va.add_argument("--n", type=_positive_int, default=10,
                    help="scenarios per kind (default 10)")
    va.add_argument("--kind", default="all", choices=["all", "dlrm", "transformer"])
    va.add_argument("--threads", type=_positive_int, default=1)
    va.add_argument("--iters", type=_positive_int, default=10, help="timed iterations per run")
    va.add_argument("--seed", type=int, default=1000, help="scenario seed (not calibration's)")
    va.add_argument("--rounds", type=_positive_int, default=2,
                    help="measurements per scenario, each round through all scenarios "
                         "(default 2; the fastest is kept)")
    va.add_argument("--json", action="store_true")
    va.add_argument("--record", action="store_true",
                    help="store the end-to-end figures in the profile (validation.end_to_end; "
                         "the Profiles tab shows them)")
    va.add_argument("--measurements", metavar="DIR",
                    help="cuda: keep the measurements and traces here (default: a temp folder)")
    va.add_argument("--quiet", action="store_true")
    va.set_defaults(func=_cmd_validate)
    v = sub.add_parser("check", help="validate scenario files and compile their models")
    v.add_argument("scenario", nargs="+")
    v.set_defaults(func=_cmd_validate_scenario)
    for module in _COMMAND_MODULES:  # each adds its own sub-commands
        importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from ..profiles import ProfileError
    from ..scenario.format import ScenarioError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ScenarioError as exc:
        # Wiring errors found while building the model carry no file name: add it.
        source = getattr(args, "scenario", None)
        prefix = f"{source}: " if not exc.source and isinstance(source, str) else ""
        print(f"error: {prefix}{exc}", file=sys.stderr)
        return 2
    except (OSError, ProfileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
