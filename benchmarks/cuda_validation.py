"""Measure a real GPU, then check the GPU predictions against it.

    python benchmarks/cuda_validation.py plan PLAN.json           # here: shapes + scenarios
    python benchmarks/cuda_validation.py run PLAN.json OUT/ [--budget-s 300]   # on the GPU
    python benchmarks/cuda_validation.py report OUT/               # anywhere

``plan`` draws GEMM shapes from the NeuSight measurements (the shapes the GEMM model was
trained on other GPUs with) and scenarios: random DLRMs and transformer LMs in the
accuracy targets' ranges (issue 3) and larger ones that keep a GPU busy.  ``run``
measures them with :mod:`predictors.calibrate.cuda_collect`.  ``report`` prints, for the
measured GPU, the GEMM error of its profile fitted on public data and the iteration-time
error of every scenario.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _neusight_shapes(rng, n: int, max_flops: float) -> list[tuple[int, int, int, int]]:
    from predictors.calibrate.public_data import neusight_dir

    folder = neusight_dir()
    shapes = set()
    for path in sorted(folder.glob("*.csv")):
        with open(path, newline="") as f:
            shapes |= {tuple(int(float(r[k])) for k in "BMNK") for r in csv.DictReader(f)
                       if r.get("OPName") == "linear"}
    shapes = sorted(s for s in shapes if 2.0 * np.prod(s, dtype=float) <= max_flops)
    pick = rng.choice(len(shapes), size=min(n, len(shapes)), replace=False)
    return [shapes[i] for i in sorted(pick)]


def cmd_plan(args) -> int:
    from predictors.calibrate.cuda_collect import gpu_scenarios

    rng = np.random.default_rng(args.seed)
    shapes = []
    for b, m, n, k in _neusight_shapes(rng, args.gemms, 1e12):
        shapes.append({"op": "linear", "b": b, "m": m, "n": n, "k": k, "dtype": "float32"})
    for s in rng.choice(len(shapes), size=len(shapes) // 3, replace=False):
        shapes.append({**shapes[int(s)], "dtype": "bfloat16"})
    for _ in range(args.gemms // 4):  # attention's batched products
        b = int(rng.choice([8, 16, 32, 64, 96, 128, 256]))
        seq = int(rng.choice([64, 128, 256, 384, 512, 1024, 2048]))
        hd = int(rng.choice([64, 128]))
        m, n, k = (seq, seq, hd) if rng.random() < 0.5 else (seq, hd, seq)
        shapes.append({"op": "bmm", "b": b, "m": m, "n": n, "k": k,
                       "dtype": str(rng.choice(["float32", "bfloat16"]))})
    scenarios = gpu_scenarios(args.device_name, args.seed, args.scenarios)
    Path(args.plan).write_text(json.dumps({"seed": args.seed, "gemm_shapes": shapes,
                                           "scenarios": scenarios}))
    print(f"wrote {args.plan}: {len(shapes)} GEMMs, {len(scenarios)} scenarios")
    return 0


def cmd_run(args) -> int:
    from predictors.calibrate.cuda_collect import collect

    plan = json.loads(Path(args.plan).read_text())
    doc = collect(args.out, device=args.device, gemm_shapes=plan["gemm_shapes"],
                  scenarios=plan["scenarios"], budget_s=args.budget_s, scale=args.scale,
                  log=lambda s: print(s, flush=True))
    print(json.dumps({"device": doc["device"], "peaks": doc.get("peaks"),
                      "stages": {k: v for k, v in doc["stages"].items()
                                 if not k.endswith("_error")}}, indent=1))
    for k, v in doc["stages"].items():
        if k.endswith("_error"):
            print(k, v)
    for r in doc.get("scenarios") or []:
        m = r.get("measure")
        print(f"{r['index']:3d} {r['doc']['name'][:60]:60s} "
              + (f"{m['iteration_ms']:9.3f} ms spread {m['spread_pct']:5.1f}%" if m
                 else r.get("error", "")))
    return 0


def gemm_errors(doc: dict, profile) -> list[dict]:
    """Per op and dtype: the GMAE of ``profile``'s GEMM predictions on the measured GEMMs
    (kernel times from CUDA-graph replays), and the median predicted / measured ratio."""
    from predictors.utils.metrics import gmae
    from predictors.cli.kernels import predict_rows

    rows = [r for r in doc.get("gemm") or [] if r.get("ms")]
    out = []
    for op in ("linear", "bmm"):
        for dtype in ("float32", "bfloat16"):
            sel = [r for r in rows if r["op"] == op and r["dtype"] == dtype]
            if not sel:
                continue
            csv_rows = [{"B": r["b"], "M": r["m"], "N": r["n"], "K": r["k"], "dtype": dtype}
                        for r in sel]
            pred = predict_rows(profile, "mm" if op == "linear" else "bmm", csv_rows,
                                ["B", "M", "N", "K", "dtype"])
            meas = np.array([r["ms"] for r in sel])
            aligned = np.array([r["n"] % 8 == 0 and r["k"] % 8 == 0 for r in sel])
            out.append({"op": op, "dtype": dtype, "shapes": len(sel),
                         "gmae_pct": 100 * gmae(pred, meas),
                         "median_ratio": float(np.median(pred / meas)),
                         "aligned_gmae_pct": 100 * gmae(pred[aligned], meas[aligned])
                         if aligned.any() else None})
    return out


# FLOPs bands of the fp32 GEMMs' size breakdown
_BANDS = (0.0, 1e8, 3e8, 1e9, 3e9, 1e10, float("inf"))


def fp32_by_size(doc: dict, profile, reference) -> list[dict]:
    """The fp32 ``linear`` GEMMs by FLOPs band: ``profile``'s GMAE and median predicted /
    measured, and the median of measured over ``reference``'s prediction (a GPU of the
    training data, predicted in its own range): where it is near or over 1, this GPU
    runs those products no faster than the reference, whatever its datasheet says."""
    from predictors.cli.kernels import predict_rows
    from predictors.utils.metrics import gmae

    sel = [r for r in doc.get("gemm") or []
           if r.get("ms") and r["op"] == "linear" and r["dtype"] == "float32"]
    if not sel:
        return []
    csv_rows = [{"B": r["b"], "M": r["m"], "N": r["n"], "K": r["k"]} for r in sel]
    meas = np.array([r["ms"] for r in sel])
    flops = np.array([2.0 * r["b"] * r["m"] * r["n"] * r["k"] for r in sel])
    pred, ref = (predict_rows(p, "mm", csv_rows, ["B", "M", "N", "K"])
                 for p in (profile, reference))
    out = []
    for lo, hi in zip(_BANDS, _BANDS[1:]):
        q = (flops >= lo) & (flops < hi)
        if q.any():
            out.append({"flops": (lo, hi), "shapes": int(q.sum()),
                        "gmae_pct": 100 * gmae(pred[q], meas[q]),
                        "median_ratio": float(np.median(pred[q] / meas[q])),
                        "over_reference": float(np.median(meas[q] / ref[q]))})
    return out


def _other_profile(path: str):
    """A measured profile: a profile file as it is, or one built from a measurements
    folder."""
    from predictors.calibrate.cuda_profile import profile_from_measurements
    from predictors.profiles import load_profile

    return load_profile(path) if Path(path).is_file() else profile_from_measurements(path)


def cmd_report(args) -> int:
    from predictors.calibrate.cuda_profile import load_measurements, scenario_errors
    from predictors.calibrate.gpu_profiles import profile_for_device
    from predictors.costs.host_overheads import load_host, profile_on_host
    from predictors.utils.metrics import format_summary, summarize

    def errors(rows):
        return format_summary(summarize(r["error_pct"] / 100 for r in rows))

    doc = load_measurements(args.folder)
    dev = doc["device"]
    print(f"{dev['name']} on {dev.get('host')} ({dev.get('cpu_model')}), torch "
          f"{dev.get('torch')}, measured {dev.get('date')}")
    if doc.get("peaks"):
        p = doc["peaks"]
        print(f"peaks: copy {p['dram_copy_gbps']:.0f} GB/s (L2-resident "
              f"{p['l2_copy_gbps']:.0f}), GEMM fp32 {p['gemm_fp32_tflops']:.1f} / tf32 "
              f"{p['gemm_tf32_tflops']:.0f} / bf16 {p['gemm_bf16_tflops']:.0f} TFLOP/s, "
              f"launch {p['launch_us_per_op']:.1f} us per op from Python")
    bundled = profile_for_device(dev["name"])
    rows = gemm_errors(doc, bundled)
    if rows:
        print(f"\nGEMMs against the profile fitted on public data ({bundled.kind}: no data "
              "of this GPU in its training):")
        for r in rows:
            al = ("" if r["aligned_gmae_pct"] is None
                  else f"   N, K multiples of 8: {r['aligned_gmae_pct']:5.1f}%")
            print(f"  {r['op']:6s} {r['dtype']:8s} {r['shapes']:4d} shapes  GMAE "
                  f"{r['gmae_pct']:5.1f}%  median predicted/measured {r['median_ratio']:.2f}"
                  + al)
        try:
            reference = profile_for_device(args.reference)
        except (KeyError, ValueError) as exc:
            print(f"error: --reference: {exc}", file=sys.stderr)
            return 2
        bands = fp32_by_size(doc, bundled, reference)
        if bands:
            print(f"  fp32 linear by FLOPs: GMAE, median predicted/measured, and median "
                  f"measured / {reference.name}'s predicted (its own training data)")
        for r in bands:
            lo, hi = r["flops"]
            band = (f"under {hi:.0e}" if lo == 0 else f"from {lo:.0e}" if hi == float("inf")
                    else f"{lo:.0e} - {hi:.0e}")
            print(f"    {band:<17s} {r['shapes']:4d} shapes  GMAE "
                  f"{r['gmae_pct']:5.1f}%  median {r['median_ratio']:.2f}  "
                  f"measured / {reference.name}: {r['over_reference']:.2f}")
    other_profile = None
    if args.profile_from:
        other_profile = _other_profile(args.profile_from)
        for key, dtypes in (("gemm_half", ("bfloat16", "float16")), ("gemm_fp32", ("float32",))):
            model = other_profile.kernel_models.get(key)
            rows = [r for r in doc.get("gemm") or [] if r.get("ms") and r["dtype"] in dtypes]
            if model is None or not rows:
                continue
            from predictors.utils.metrics import gmae
            print(f"\n{'/'.join(dtypes)} GEMMs against the model measured for "
                  f"{args.profile_from} ({model.info.get('source')}):")
            for op in ("linear", "bmm"):
                sel = [r for r in rows if r["op"] == op]
                if sel:
                    pred = model.predict_rows(sel)
                    meas = np.array([r["ms"] for r in sel])
                    print(f"  {op:6s} {len(sel):4d} shapes  GMAE {100 * gmae(pred, meas):5.1f}%")
    if doc.get("scenarios"):
        print("\ntraining iterations: measured (median of 30) against predicted")
        print(f"  {'scenario':56s} {'measured':>9s} {'fitted':>8s} {'this host':>9s} "
              f"{'fitted, default host':>21s}")
        loo = scenario_errors(args.folder)
        base = scenario_errors(args.folder, profile=bundled)
        on_host = scenario_errors(args.folder, profile=profile_on_host(bundled, load_host()))
        for a, b, c in zip(loo, base, on_host):
            print(f"  {a['scenario'][:56]:56s} {a['measured_ms']:7.2f}ms "
                  f"{b['error_pct']:+7.1f}% {a['error_pct']:+8.1f}% {c['error_pct']:+20.1f}%")
        if other_profile is not None:
            other = scenario_errors(args.folder, profile=other_profile)
            print(f"  with the profile {args.profile_from}: {errors(other)}")
        print(f"  the profile fitted on public data, with its pooled overheads: "
              f"{errors(base)}")
        print(f"  the same on the default host ({load_host().name}, what a GPU without "
              f"measurements gets): {errors(on_host)}")
        print(f"  with this host's overheads and peaks (leave one out): {errors(loo)}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("plan")
    a.add_argument("plan")
    a.add_argument("--seed", type=int, default=2026)
    a.add_argument("--gemms", type=int, default=600)
    a.add_argument("--scenarios", type=int, default=10, help="random ones (6 GPU-sized too)")
    a.add_argument("--device-name", default="NVIDIA H200", help="the GPU to plan for")
    a.set_defaults(fn=cmd_plan)
    r = sub.add_parser("run")
    r.add_argument("plan")
    r.add_argument("out")
    r.add_argument("--device", default="cuda")
    r.add_argument("--budget-s", type=float, default=300.0)
    r.add_argument("--scale", type=int, default=1, help="divide peak/kernel sizes (dry runs)")
    r.set_defaults(fn=cmd_run)
    rp = sub.add_parser("report")
    rp.add_argument("folder", help="a measurements folder (resources/measurements/...)")
    rp.add_argument("--profile-from", metavar="DIR|PROFILE",
                    help="also predict with a measured profile: built from another "
                         "folder, or a profile file (e.g. the bundled one)")
    rp.add_argument("--reference", default="NVIDIA A100-PCIE-40GB",
                    help="a training GPU to set the fp32 GEMMs beside, by size")
    rp.set_defaults(fn=cmd_report)
    args = p.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    raise SystemExit(main())
