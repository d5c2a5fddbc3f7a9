"""``python -m predictors host-check``: this host's speed against the bundled CPU profiles,
and the check that ``predict`` and ``validate`` take once before they scale a bundled
CPU profile to this host."""
from __future__ import annotations

import json
import sys

from ..profiles import (
    bundled_profiles,
    default_profile,
    host_check_path,
    host_ratios,
    host_scaling_note,
    resolve_profile,
)
from .args import examples, positive_int

__all__ = ["register", "check_before_predicting"]


def check_before_predicting(threads: int, quiet: bool = False) -> None:
    """Take and cache this host's check when a bundled CPU profile for ``threads``
    threads will be used and none is cached (a few seconds, once)."""
    from ..calibrate.host_check import host_check, needs_host_check  # torch

    if not needs_host_check(threads):
        return
    if not quiet:
        print(f"checking this host's speed once to scale the bundled CPU profile (a few "
              f"seconds; cached in {host_check_path(threads)})", file=sys.stderr)
    host_check(threads)


def _cmd_host_check(args) -> int:
    from ..calibrate.host_check import host_check  # deferred: imports torch

    doc = host_check(args.threads, refresh=args.refresh)
    rows = []
    for path in bundled_profiles():
        prof = resolve_profile(str(path))
        if prof.device.kind != "cpu" or int(prof.provenance.get("threads", 1)) != args.threads:
            continue
        ratios = host_ratios(prof, doc["figures"])
        rows.append({"profile": prof.name, "file": path.stem,
                     "cpu_signature": prof.provenance.get("cpu_signature"), **ratios,
                     "note": host_scaling_note(prof.name, ratios, doc.get("date", ""))})
    chosen = default_profile("cpu", "cpu", args.threads)
    out = {**doc, "cache": str(host_check_path(args.threads)), "profiles": rows,
           "default_profile": chosen.name if chosen is not None else None}
    if args.json:
        print(json.dumps(out))
        return 0
    f = doc["figures"]
    print(f"host check of {doc['host']['cpu_signature']} ({args.threads} thread(s), "
          f"torch {doc['host']['torch']}, {doc.get('date', '')})")
    print(f"  GEMM       {f['gemm_gflops']:8.1f} GFLOP/s  (p10-p90 "
          f"{f.get('gemm_gflops_p10', 0):.1f}-{f.get('gemm_gflops_p90', 0):.1f})")
    print(f"  stream     {f['stream_gbps']:8.1f} GB/s")
    print(f"  dispatch   {f.get('dispatch_us', 0):8.2f} us a tiny op")
    print(f"  cached in  {out['cache']}")
    for r in rows:
        mark = "  (predict's default here)" if r["profile"] == out["default_profile"] else ""
        print(f"  {r['file']}: {r['note']}{mark}")
    return 0


def register(sub) -> None:
    h = sub.add_parser(
        "host-check", help="this host's GEMM, memory and dispatch speed against the bundled "
                           "CPU profiles (cached; predict scales the bundled one by it)",
        **examples("%(prog)s", "%(prog)s --refresh --json"))
    h.add_argument("--threads", type=positive_int, default=1, metavar="N",
                   help="CPU threads (default 1)")
    h.add_argument("--refresh", action="store_true",
                   help="measure again even when a check of this host is cached")
    h.add_argument("--json", action="store_true", help="print one JSON object")
    h.set_defaults(func=_cmd_host_check)


def compare_profiles(result: dict, names: list[str], n: int, seed: int, kinds) -> dict:
    """The scenarios of a CPU ``validate`` ``result``, measured once, predicted again by
    each profile of ``names`` (``default``: the bundled one as ``predict`` picks it,
    scaled to this host): per profile, every scenario's prediction and error, and per kind
    the geomean, mean and worst |error|."""
    from ..calibrate.samples import random_scenarios  # deferred: imports torch
    from ..engine.predict import predict
    from ..profiles import on_this_host
    from ..utils.metrics import geomean_abs

    threads = result["threads"]
    docs = [doc for kind in kinds for doc in random_scenarios(
        n, seed, kinds=(kind,), threads=threads, ranges=result["ranges"])]
    out = {}
    for name in names:
        prof = (on_this_host(default_profile("cpu", "cpu", threads), threads)
                if name == "default" else resolve_profile(name))
        rows = []
        for row, doc in zip(result["rows"], docs):
            ms = predict(doc, profile=prof).iteration_ms
            rows.append({"kind": row["kind"], "scenario": row["scenario"],
                         "predicted_ms": ms, "error": ms / row["measured_ms"] - 1})
        summary = {}
        for kind in kinds:
            errs = [abs(r["error"]) for r in rows if r["kind"] == kind]
            summary[kind] = {"n": len(errs), "geomean_abs_error": geomean_abs(errs),
                             "mean_abs_error": sum(errs) / len(errs),
                             "worst_abs_error": max(errs)}
        scaling = (prof.provenance.get("host_scaling") or {}).get("note")
        out[name] = {"profile": prof.name, "rows": rows, "summary": summary,
                     "host_scaling": scaling}
    return out


def format_comparison(compare: dict) -> str:
    """The summary lines of :func:`compare_profiles`."""
    lines = ["", "The same measurements, predicted by other profiles:"]
    for name, c in compare.items():
        lines.append(f"  {name} ({c['profile']})" + (f": {c['host_scaling']}"
                                                     if c["host_scaling"] else ""))
        for kind, s in c["summary"].items():
            lines.append(f"    {kind:<12} n={s['n']:<3} geomean |error| "
                         f"{100 * s['geomean_abs_error']:.1f}%  mean "
                         f"{100 * s['mean_abs_error']:.1f}%  worst "
                         f"{100 * s['worst_abs_error']:.1f}%")
    return "\n".join(lines)
