"""``python -m predictors``: the headless command line (no Qt is imported)."""
from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import shlex
import socket
import sys
import tempfile
from pathlib import Path

from ..calibrate.cuda_profile import (
    calibrate_cuda,
    gpu_end_to_end,
    profile_from_measurements,
    scenario_errors,
    with_validation,
)
from ..calibrate.gpu_profiles import profile_for_device
from ..calibrate.kept_samples import save_samples
from ..engine.predict import predict
from ..hardware.platforms import resolve_platform
from ..plan.capacity import MAX_BATCH, largest_batch
from ..plan.sweep import (
    SWEEPABLE,  # light: no torch
    parse_values,
    sweep,
)
from ..profiles import (
    ProfileError,
    default_profile,
    on_this_host,
    profile_file,
    record_validation,
    resolve_profile,
    save_profile,
    unsteady_note,
)
from ..scenario.format import (
    OPTIMIZERS,
    ScenarioError,
    load_scenario,
    validate_scenario,
)
from ..traces.kineto import TraceError
from ..traces.overhead_tables import overheads_from_recording
from ..traces.recording import load_recording
from ..utils.formatting import format_bytes
from ..utils.metrics import format_summary, summarize
from .args import (
    PLATFORM_HELP,
    count,
    examples,
    positive_float,
    positive_int,
    profile_arg,
    program_name,
    scenario_arg,
    unwritable,
    unwritable_outputs,
    usage_error,
)

# Modules that contribute sub-commands through ``register(subparsers)``.
_COMMAND_MODULES: list[str] = ["predictors.cli.traces", "predictors.cli.kernels",
                              "predictors.cli.collective", "predictors.cli.sharding",
                              "predictors.cli.host"]

__all__ = ["main"]


def _cmd_predict(args) -> int:

    if args.chrome_trace:
        problem = unwritable(args.chrome_trace)
        if problem:  # say so now, not after the prediction
            return usage_error(f"--chrome-trace {args.chrome_trace}: {problem}")
    doc = scenario_arg(args)
    overheads = None
    if args.overheads_from:
        overheads = _trace_overheads(args.overheads_from, doc, args.prog)
        if isinstance(overheads, int):
            return overheads
    starts = None
    if args.rank_starts_ms:
        try:
            starts = [float(x) for x in args.rank_starts_ms.split(",")]
        except ValueError:
            return usage_error(f"--rank-starts-ms {args.rank_starts_ms}: expected numbers "
                               "separated by commas, one per rank")
    if profile_arg(args) is None:
        _check_host(doc)
    try:
        result = predict(doc, profile=profile_arg(args), overheads=overheads, host=args.host,
                         rank_starts_ms=starts)
    except ValueError as exc:
        if starts is None or "rank_starts_ms" not in str(exc):
            raise
        return usage_error(f"--rank-starts-ms: {str(exc).split(': ', 1)[1]}")
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


def _check_host(doc: dict) -> None:
    """Before a CPU scenario is predicted with the bundled profile: this host's check,
    taken once (the bundled profile is scaled by it)."""
    from .host import check_before_predicting

    try:
        platform = resolve_platform(validate_scenario(doc)["platform"])
    except (ScenarioError, ValueError, KeyError):
        return  # predict says what is wrong
    if platform.device == "cpu":
        check_before_predicting(platform.threads)


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


def _cmd_fit(args) -> int:

    if args.multiple > MAX_BATCH:
        return usage_error(f"--multiple: must be at most {MAX_BATCH:,}, got {args.multiple:,}")
    doc = scenario_arg(args)
    if args.optimizer:
        doc["training"]["optimizer"] = args.optimizer
    cap = largest_batch(doc, multiple=args.multiple, profile=profile_arg(args))
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

    if args.param == "platform":
        for flag, given in (("--platform", args.platform), ("--profile", args.profile)):
            if given:
                return usage_error(f"{flag} with --param platform: the platforms are the "
                                   "swept values, each predicted with its own device's "
                                   "profile")
    try:
        values = parse_values(args.param, args.values)
    except ValueError as exc:
        return usage_error(f"--values: {exc}")
    doc = scenario_arg(args)
    result = sweep(doc, args.param, values, profile=profile_arg(args))
    if args.json:
        print(json.dumps(result.to_json()))
        return 0
    best = result.best()
    print(f"{result.scenario_name}: {args.param} swept over {len(values)} value(s)")
    for row in result.rows:
        mark = " <- fastest" if row is best else ""
        if row.error:
            print(f"  {row.value!s:>16}   cannot run: {row.error}")
        else:
            memory = ("" if row.peak_memory_bytes is None
                      else f"  peak {format_bytes(row.peak_memory_bytes)}"
                      + (" (does not fit)" if row.fits is False else ""))
            print(f"  {row.value!s:>16} {row.iteration_ms:10.3f} ms  "
                  f"{row.records_per_s:14,.0f} samples/s  {row.ranks} rank(s){memory}{mark}")
    return 0


def _trace_overheads(files: list[str], doc: dict, prog: str):
    """T1-T5 measured from the user's recorded GPU trace(s), or an exit code."""

    if resolve_platform(validate_scenario(doc)["platform"]).device == "cpu":
        return usage_error("--overheads-from: trace overheads apply to GPU platforms; on the "
                           f"CPU run `{prog} calibrate`")
    try:
        rec = load_recording(files)
        table, _ = overheads_from_recording(
            rec, ", ".join(os.path.basename(f) for f in files))
    except TraceError as exc:
        return usage_error(f"--overheads-from: {exc}")
    return table


def _cmd_measure(args) -> int:
    from ..calibrate.measure import measure  # deferred: imports torch

    doc = load_scenario(args.scenario)
    if args.device == "cuda" and not _cuda_available():
        return usage_error("--device cuda: no GPU here (torch.cuda.is_available() is False)")
    if args.et and not args.trace:
        return usage_error("--et: the execution trace is recorded with the Kineto trace; "
                           "give --trace OUT.json[.gz] too")
    problem = unwritable_outputs(("--trace", args.trace), ("--et", args.et))
    if problem:  # say so now, not after the measured steps
        return usage_error(problem)
    if args.threads:
        ranks = {k: v for k, v in doc.get("platform", {}).items() if k == "ranks"}
        doc["platform"] = {"preset": "local-cpu", "threads": args.threads, **ranks}
    if doc.get("platform", {}).get("ranks", 1) > 1:
        from .sharding import measure_ranks  # deferred: imports torch
        return measure_ranks(args, doc)
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
    from ..calibrate.calibrate import calibrate_cpu  # deferred: imports torch
    from ..calibrate.validate import format_classes  # deferred: imports torch

    gpu = args.device == "cuda" or args.from_measurements
    if args.gemms_from and not args.from_measurements:
        return usage_error("--gemms-from: adds GEMMs to a profile built with "
                           "--from-measurements DIR; give that too")
    if gpu and args.keep_samples:
        return usage_error("--keep-samples: CPU calibrations only (the samples of a GPU "
                           "calibration are its --measurements folder)")
    if not gpu and args.measurements:
        return usage_error("--measurements: GPU calibrations only (--device cuda)")
    if args.from_measurements and not Path(args.from_measurements).is_dir():
        return usage_error(f"--from-measurements {args.from_measurements}: not a folder")
    problem = unwritable_outputs(("--out", args.out), ("--keep-samples", args.keep_samples))
    if problem:  # say so now, not after minutes of measuring
        return usage_error(problem)
    if gpu:
        return _calibrate_cuda(args)
    kept = {} if args.keep_samples else None
    prof = calibrate_cpu(threads=args.threads, budget_s=args.budget_s, seed=args.seed,
                         progress=_progress_printer(args.quiet), keep_samples=kept)
    path = save_profile(prof, args.out)
    if kept is not None:
        print(f"wrote {save_samples(kept, prof.provenance, args.keep_samples)} "
              f"(training samples)")
    classes = prof.validation.get("classes", {})
    print(f"wrote {path} ({prof.provenance['elapsed_s']} s, "
          f"{prof.provenance['profiled_steps']} profiled steps, "
          f"{prof.provenance['microbenchmarks']} microbenchmarks)")
    print("\n".join(format_classes(classes)))
    unsteady = unsteady_note(prof)
    if unsteady:
        print(f"warning: {unsteady}", file=sys.stderr)
    return 0


def _calibrate_cuda(args) -> int:
    """``calibrate --device cuda``: measure this GPU into a folder, then build its profile
    (``--from-measurements DIR`` builds from a folder measured before, anywhere)."""

    if args.from_measurements:
        folder = args.from_measurements

        try:
            prof = profile_from_measurements(folder, gemms_from=args.gemms_from or [])
            prof, rows = with_validation(prof, folder, gemms_from=args.gemms_from or [])
        except (ProfileError, TraceError) as exc:  # a trace of the folder missing or broken
            return usage_error(str(exc))
    else:
        if not _cuda_available():
            return usage_error("--device cuda: no GPU here (torch.cuda.is_available() is "
                               "False); measure on the GPU machine, or build from its folder "
                               "with --from-measurements DIR")
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


def _record_target(args, prof):
    """Where ``validate --record`` stores the figures: the ``--profile`` file, or the
    bundled file of the profile used; ``(path, None)`` or ``(None, why not)``."""

    if args.profile and Path(args.profile).is_file():
        target = Path(args.profile)
    else:
        target = profile_file(prof)
    if target is None:
        return None, (f"--record: the profile {prof.name!r} has no file to record in; give "
                      "--profile PROFILE.json")
    problem = unwritable(str(target))
    if problem:
        return None, f"--record: {target}: {problem}"
    return target, None


def _record(target: Path, figures: dict) -> int:
    """Store ``figures`` as the profile file's ``validation.end_to_end``; an exit status."""

    try:
        record_validation(target, "end_to_end", figures)
    except (ProfileError, OSError) as exc:
        return usage_error(f"--record: {exc}")
    print(f"recorded in {target} (validation.end_to_end)", file=sys.stderr)
    return 0


def _validate_cuda(args) -> int:
    """``validate --device cuda``: measure random scenarios on this GPU (and six GPU-sized
    ones) and predict them with a profile (default: the GPU's bundled one)."""


    if not _cuda_available():
        return usage_error("--device cuda: no GPU here (torch.cuda.is_available() is False)")
    import torch  # deferred: torch

    from ..calibrate.cuda_collect import (  # deferred: imports torch
        collect,
        gpu_scenarios,
    )

    name = torch.cuda.get_device_name()
    prof = (resolve_profile(args.profile) if args.profile
            else default_profile(name, "gpu") or profile_for_device(name))
    if prof.device.kind != "gpu":
        return usage_error(f"--profile: {prof.name!r} describes a CPU ({prof.device.name}); "
                           "validate --device cuda needs a GPU profile")
    target = None
    if args.record:  # know where it goes before the measurements
        target, problem = _record_target(args, prof)
        if problem:
            return usage_error(problem)
    problem = unwritable_outputs(("--measurements", args.measurements and
                                   str(Path(args.measurements) / "measurements.json.gz")))
    if problem:
        return usage_error(problem)
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
    if target is not None:
        when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        return _record(target, gpu_end_to_end(rows, {"date": when,
                                                     "host": socket.gethostname()},
                                              args.command_line))
    return 0


def _cuda_available() -> bool:
    import torch  # deferred: torch
    return torch.cuda.is_available()


def _cmd_validate(args) -> int:
    from ..calibrate.validate import (  # deferred: imports torch
        end_to_end_record,
        format_report,
        validate_cpu,
    )

    if args.device == "cuda":
        return _validate_cuda(args)
    if args.measurements:
        return usage_error("--measurements: GPU validations only (--device cuda)")
    if not args.profile:
        from .host import check_before_predicting

        check_before_predicting(args.threads, args.quiet)
    prof = (resolve_profile(args.profile) if args.profile
            else on_this_host(default_profile("cpu", "cpu", args.threads), args.threads))
    if prof is not None and prof.device.kind != "cpu":
        return usage_error(f"--profile: {prof.name!r} describes a GPU ({prof.device.name}); "
                           "validate --device cpu needs a CPU profile")
    if prof is None:
        return usage_error(f"no calibrated CPU profile for {args.threads} thread(s); run "
                           f"`{args.prog} calibrate --device cpu --out P.json`")
    kinds = ("dlrm", "transformer") if args.kind == "all" else (args.kind,)
    target = None
    if args.record:  # know where it goes before minutes of measuring
        target, problem = _record_target(args, prof)
        if problem:
            return usage_error(problem)
    for name in args.compare or ():  # a misspelt name fails before minutes of measuring
        if name != "default":
            resolve_profile(name)
    result = validate_cpu(prof, n=args.n, seed=args.seed, iters=args.iters, kinds=kinds,
                          rounds=args.rounds, progress=_progress_printer(args.quiet))
    text = None if args.json else format_report(result)
    if args.compare:
        from .host import compare_profiles, format_comparison

        result["compare"] = compare_profiles(result, args.compare, args.n, args.seed, kinds)
        text = None if args.json else text + "\n" + format_comparison(result["compare"])
    print(json.dumps(result) if args.json else text)
    if target is not None:
        return _record(target, end_to_end_record(result, args.command_line))
    return 0


def _cmd_validate_scenario(args) -> int:
    from ..model.workload import build_workload  # deferred: imports torch

    bad = 0
    for path in args.scenario:
        try:
            build_workload(load_scenario(path))
            print(f"{path}: ok")
        except ScenarioError as exc:
            bad += 1
            print(f"error: {exc if exc.source else f'{path}: {exc}'}", file=sys.stderr)
    return 2 if bad else 0


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The parser of every sub-command; ``prog`` as :func:`~.args.program_name` says."""
    parser = argparse.ArgumentParser(
        prog=prog or program_name(),
        description="Predict how fast a model trains on a machine, and why, without "
                    "running it.",
        **examples("%(prog)s predict resources/scenarios/small_dlrm.json",
                   "%(prog)s sweep resources/scenarios/bert_base.json --param platform "
                   "--values a100-1,h100-1,h200-1",
                   "%(prog)s COMMAND --help"))
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser(
        "predict", help="predict one training iteration",
        **examples("%(prog)s resources/scenarios/small_dlrm.json",
                   "%(prog)s resources/scenarios/bert_base.json --platform h100-1 --json",
                   "%(prog)s resources/scenarios/small_dlrm.json --platform "
                   "resources/scenarios/mlperf_dlrm_dcnv2.json --chrome-trace small.json.gz"))
    p.add_argument("scenario", metavar="SCENARIO.json", help="scenario JSON file")
    p.add_argument("--profile", help="device profile name or path; 'roofline' for datasheet "
                                      "figures only (default: the device's bundled profile)")
    p.add_argument("--platform", metavar="PRESET_OR_FILE",
                   help=f"predict on this platform instead of the scenario's: {PLATFORM_HELP}")
    p.add_argument("--overheads-from", nargs="+", metavar="TRACE",
                   help="CPU overheads (T1-T5) measured from your own recorded GPU trace(s) "
                        "instead of the host's")
    p.add_argument("--host", metavar="NAME_OR_FILE",
                   help="the host whose CPU dispatches a GPU step: a name of the host "
                        "catalogue (resources/hosts) or a host file (default: the "
                        "scenario's platform.host, else public-pool)")
    p.add_argument("--rank-starts-ms", metavar="T0,T1,...",
                   help="when each rank of a multi-rank platform starts its step, ms, comma "
                        "separated (a straggler: 0,0,0,2.5); the early ranks wait for it "
                        "(default: together)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--chrome-trace", metavar="OUT.json",
                   help="also write the predicted timeline as a Chrome trace (Perfetto)")
    p.set_defaults(func=_cmd_predict)
    ft = sub.add_parser(
        "fit", help="the largest batch whose step fits every rank's device memory",
        **examples("%(prog)s resources/scenarios/bert_base.json --optimizer adamw",
                   "%(prog)s resources/scenarios/bert_base.json --platform h200-1 "
                   "--multiple 8 --json"))
    ft.add_argument("scenario", metavar="SCENARIO.json", help="scenario JSON file")
    ft.add_argument("--platform", metavar="PRESET_OR_FILE",
                    help=f"fit on this platform instead: {PLATFORM_HELP}")
    ft.add_argument("--optimizer", choices=list(OPTIMIZERS),
                    help="override the scenario's optimizer")
    ft.add_argument("--multiple", type=positive_int, default=1, metavar="N",
                    help="only batches that are multiples of this (default 1)")
    ft.add_argument("--profile", help="device profile name or path (as for predict)")
    ft.add_argument("--json", action="store_true", help="print one JSON object")
    ft.set_defaults(func=_cmd_fit)

    sw = sub.add_parser(
        "sweep", help="predict the scenario for each value of one setting",
        **examples("%(prog)s resources/scenarios/bert_base.json --param batch_size "
                   "--values 8,64,512",
                   "%(prog)s resources/scenarios/bert_base.json --param platform "
                   "--values a100-1,h100-1,h200-1 --json",
                   "%(prog)s resources/scenarios/small_dlrm.json --platform dgx-a100 "
                   "--param dtype --values float32,bfloat16"))
    sw.add_argument("scenario", metavar="SCENARIO.json", help="scenario JSON file")
    sw.add_argument("--param", required=True, choices=list(SWEEPABLE),
                    help="the setting to sweep")
    sw.add_argument("--values", required=True, metavar="V1,V2,...",
                    help="comma-separated values, e.g. 256,512,1024 or a100-1,dgx-a100")
    sw.add_argument("--platform", metavar="PRESET_OR_FILE",
                    help=f"sweep on this platform instead of the scenario's (not with "
                         f"--param platform): {PLATFORM_HELP}")
    sw.add_argument("--profile", help="device profile name or path (not with --param "
                                      "platform: each platform takes its own)")
    sw.add_argument("--json", action="store_true", help="print one JSON object")
    sw.set_defaults(func=_cmd_sweep)
    m = sub.add_parser(
        "measure", help="run the scenario for real and time it",
        **examples("%(prog)s resources/scenarios/small_dlrm.json --threads 1 --iters 10",
                   "%(prog)s resources/scenarios/small_dlrm.json --trace small.pt.trace.json.gz "
                   "--memory --json",
                   "%(prog)s resources/scenarios/bert_base.json --device cuda --iters 30"))
    m.add_argument("scenario", metavar="SCENARIO.json", help="scenario JSON file")
    m.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="cpu or cuda (default: cpu)")
    m.add_argument("--iters", type=positive_int, default=20, metavar="N",
                   help="timed iterations (default 20)")
    m.add_argument("--warmup", type=count, default=5, metavar="N",
                   help="untimed iterations first (default 5)")
    m.add_argument("--threads", type=positive_int, metavar="N",
                   help="CPU threads (default: the scenario's)")
    m.add_argument("--trace", metavar="OUT.json[.gz]",
                   help="also record one step with torch.profiler (Kineto JSON)")
    m.add_argument("--et", metavar="ET.json[.gz]",
                   help="with --trace: also record the traced step's PyTorch execution "
                        "trace (linked to the Kineto events by record-function id)")
    m.add_argument("--memory", action="store_true",
                   help="also measure one step's peak of allocated tensor memory (and "
                        "record memory events in --trace)")
    m.add_argument("--json", action="store_true", help="print one JSON object")
    m.set_defaults(func=_cmd_measure)
    c = sub.add_parser(
        "calibrate", help="measure this device and write a profile",
        **examples("%(prog)s --out my-cpu.json --budget-s 600",
                   "%(prog)s --device cuda --out my-gpu.json",
                   "%(prog)s --from-measurements resources/measurements/nvidia-h200-2026-11-29 "
                   "--out h200.json"))
    c.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="cpu or cuda (default: cpu)")
    c.add_argument("--out", required=True, metavar="PROFILE.json",
                   help="the profile to write (and a .npz beside it)")
    c.add_argument("--budget-s", type=positive_float, default=600.0, metavar="S",
                   help="time budget in seconds (default 600)")
    c.add_argument("--threads", type=positive_int, default=1, metavar="N",
                   help="CPU threads (default 1)")
    c.add_argument("--seed", type=int, default=0, help="seed of the random scenarios")
    c.add_argument("--keep-samples", metavar="SAMPLES.json.gz",
                   help="cpu: also write the training samples (benchmarks/feature_ab.py "
                        "refits from them)")
    c.add_argument("--measurements", metavar="DIR",
                   help="cuda: where the measurements go (default: beside --out)")
    c.add_argument("--from-measurements", metavar="DIR",
                   help="build a GPU profile from a folder measured before (no GPU needed)")
    c.add_argument("--gemms-from", metavar="DIR", action="append",
                   help="with --from-measurements: also fit the GEMMs measured in DIR (the "
                        "same GPU, another run; repeatable)")
    c.add_argument("--quiet", action="store_true", help="no progress on stderr")
    c.set_defaults(func=_cmd_calibrate)
    va = sub.add_parser(
        "validate", help="measure and predict random scenarios",
        **examples("%(prog)s --n 4 --kind dlrm",
                   "%(prog)s --profile local-cpu-1t-zen4 --rounds 3 --json",
                   "%(prog)s --device cuda --n 5 --measurements validation/"))
    va.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="cpu or cuda (default: cpu)")
    va.add_argument("--profile", help="profile path or name (default: the bundled one)")
    va.add_argument("--n", type=positive_int, default=10, metavar="N",
                    help="scenarios per kind (default 10)")
    va.add_argument("--kind", default="all", choices=["all", "dlrm", "transformer"])
    va.add_argument("--threads", type=positive_int, default=1, metavar="N",
                    help="CPU threads (default 1)")
    va.add_argument("--iters", type=positive_int, default=10, metavar="N",
                    help="timed iterations per run (default 10)")
    va.add_argument("--seed", type=int, default=1000, help="scenario seed (not calibration's)")
    va.add_argument("--rounds", type=positive_int, default=2, metavar="R",
                    help="cpu: measurements per scenario, each round through all scenarios "
                         "(default 2; the fastest is kept)")
    va.add_argument("--json", action="store_true", help="print one JSON object (cuda: a list)")
    va.add_argument("--record", action="store_true",
                    help="store the end-to-end figures in the profile (validation.end_to_end; "
                         "the Profiles tab shows them)")
    va.add_argument("--compare", nargs="+", metavar="PROFILE",
                    help="cpu: also predict the same measurements with these profiles "
                         "('default': the bundled one, scaled to this host)")
    va.add_argument("--measurements", metavar="DIR",
                    help="cuda: keep the measurements and traces here (default: a temp folder)")
    va.add_argument("--quiet", action="store_true", help="no progress on stderr")
    va.set_defaults(func=_cmd_validate)
    v = sub.add_parser(
        "check", help="validate scenario files and compile their models",
        **examples("%(prog)s resources/scenarios/small_dlrm.json",
                   "%(prog)s resources/scenarios/*.json"))
    v.add_argument("scenario", nargs="+", metavar="SCENARIO.json")
    v.set_defaults(func=_cmd_validate_scenario)
    for module in _COMMAND_MODULES:  # each adds its own sub-commands
        importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Run one command line (default: ``sys.argv[1:]``); the exit status: 0, 2 for a user
    error (bad input, file or flags), 1 for a run that failed otherwise."""


    argv = sys.argv[1:] if argv is None else list(argv)
    prog = prog or program_name()
    args = build_parser(prog).parse_args(argv)
    args.prog = prog
    args.command_line = f"{prog} {shlex.join(argv)}"
    try:
        return args.func(args)
    except ScenarioError as exc:
        # Wiring errors found while building the model carry no file name: add it.
        source = getattr(args, "scenario", None)
        prefix = f"{source}: " if not exc.source and isinstance(source, str) else ""
        print(f"error: {prefix}{exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader of stdout went away (`| head`): stop quietly
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):  # stdout is no file (captured)
            pass
        return 1
    except (OSError, ProfileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
