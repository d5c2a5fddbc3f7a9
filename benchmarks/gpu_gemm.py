"""Validate the GPU GEMM model on the public NeuSight measurements and print the figures.

    .venv/bin/python benchmarks/gpu_gemm.py [--regressor gbm|mlp|both] [--no-logo]
    .venv/bin/python benchmarks/gpu_gemm.py --variants [--regressor gbm|mlp|both]

Prints, per GPU: GMAE (geometric mean of |pred/measured - 1|), MAPE and the median ratio
on a random 20% of shapes held out (fit on the other 80% of all GPUs), on the shapes
outside the training range (fit on small and medium shapes, scored on the largest 10 % by
FLOPs and tall-skinny ones, per GPU and per kind), and for
leave-one-GPU-out (fit on the other four GPUs, predict from datasheet figures).  Then the
bundled profiles' predictions for square GEMMs, as achieved TFLOP/s.

``--variants`` prints instead one line per model variant (feature set, target, regressor,
pooling weight): held-out and shape-range GMAE per GPU and leave-one-GPU-out GMAE per GPU,
mean and worst (the table in docs/models/gpu_profiles.md).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from predictors.calibrate.gemm_fit import (
    DEVICE_WEIGHT,
    fit_regressor,
    heldout_validation,
    leave_one_gpu_out,
    shape_range_validation,
    training_set,
)
from predictors.calibrate.gpu_profiles import BUNDLED_GPUS, profile_for_device  # noqa: E402
from predictors.calibrate.public_data import load_neusight  # noqa: E402
from predictors.costs.gemm_features import (
    DEVICE_FEATURES,
    FEATURE_NAMES,
    TILES,
    gemm_flops_bytes,
)


def _row(name, f):
    return (f"  {name:<24} n={f['n']:5d}  GMAE {100 * f['gmae']:5.1f}%  "
            f"MAPE {100 * f['mape']:5.1f}%  median pred/measured {f['median_ratio']:.3f}")


def _extras(d):
    """Variant-only columns: quantized roofline (ms) and tiled-GEMM DRAM traffic features."""
    B, M, N, K = (np.maximum(np.asarray(x, dtype=np.float64), 1.0) for x in (d.B, d.M, d.N, d.K))
    f = d.figures
    flops, nbytes = gemm_flops_bytes(B, M, N, K, shared_weight=True)
    tc, tm = flops / f.peak_flops, nbytes / f.mem_bw
    per_sm = f.peak_flops / f.sms
    quantized, traffic = [], []
    for a, b in TILES:
        tiles = B * np.minimum(np.ceil(M / a) * np.ceil(N / b), np.ceil(M / b) * np.ceil(N / a))
        waves = tiles / (f.sms * (128 * 128 / (a * b)))
        quantized.append(np.ceil(waves) * 2.0 * 128 * 128 * K / per_sm)
        # each output tile streams its A and B panels once (no L2 reuse), vs compute time
        moved = 4.0 * tiles * (a + b) * K + 4.0 * B * M * N
        traffic.append(np.log(moved / f.mem_bw / tc))
    qroof_ms = np.maximum(np.min(quantized, axis=0), tm) * 1e3
    return qroof_ms, np.column_stack(traffic)


def _variants(kinds) -> int:
    data = load_neusight()
    base = training_set(data)
    extras = [_extras(d) for d in data]
    qroof = np.concatenate([e[0] for e in extras])
    traffic = np.concatenate([e[1] for e in extras])
    n_feat = len(FEATURE_NAMES)
    agnostic = [i for i, n in enumerate(FEATURE_NAMES) if n not in DEVICE_FEATURES]
    peak_only = agnostic + [FEATURE_NAMES.index("log_peak")]
    with_traffic = np.hstack([base.X, traffic])
    # quantized-roofline target: the last column is log(quantized roofline / roofline);
    # the regressor fits y minus it and adds it back (still clamped at the roofline)
    q_ts = dataclasses.replace(base, X=np.hstack([base.X, np.log(qroof / base.roof_ms)[:, None]]))
    t_ts = dataclasses.replace(base, X=with_traffic)

    def fitter(kind, w, cols=None):
        return lambda X, y, seed: fit_regressor(kind, X, y, seed, device_weight=w,
                                                agnostic_columns=cols)

    class _Offset:
        def __init__(self, reg):
            self.reg = reg

        def predict(self, X):
            return self.reg.predict(X[:, :n_feat]) + X[:, n_feat]

    def q_fitter(kind, w):
        return lambda X, y, seed: _Offset(fit_regressor(kind, X[:, :n_feat], y - X[:, n_feat],
                                                        seed, device_weight=w))

    rows = []
    for kind in kinds:
        rows += [
            (f"{kind} all features (before)", base, fitter(kind, 1.0)),
            (f"{kind} no device figures", base, fitter(kind, 0.0)),
            (f"{kind} no device figs but log_peak", base, fitter(kind, 0.0, peak_only)),
            (f"{kind} all, quantized-roof target", q_ts, q_fitter(kind, 1.0)),
            (f"{kind} no dev, quantized-roof target", q_ts, q_fitter(kind, 0.0)),
            (f"{kind} no dev + tile traffic", t_ts,
             fitter(kind, 0.0, agnostic + list(range(n_feat, n_feat + len(TILES))))),
        ]
        weights = (0.25, 0.5, 0.75) if kind == "gbm" else (DEVICE_WEIGHT,)
        if kind == "mlp":  # ~40 s a fit: the feature-set and pooling rows only
            rows = [r for r in rows if not r[0].startswith("mlp") or not any(
                k in r[0] for k in ("quantized", "traffic", "log_peak"))]
        rows += [(f"{kind} pooled w={w}" + (" (default)" if w == DEVICE_WEIGHT else ""),
                  base, fitter(kind, w)) for w in weights]
    names = [n.replace("NVIDIA ", "").replace("Tesla ", "").split("-")[0] for n in base.names]
    cells = " ".join(f"{n:>5}" for n in names)
    print(f"{'variant':<38} | held-out GMAE %: {cells}   all | shape range GMAE %: {cells}"
          f"   all | leave-one-GPU-out GMAE %: {cells}  mean worst")
    for label, ts, fit in rows:
        t0 = time.perf_counter()
        h = heldout_validation(ts, fit)
        r = shape_range_validation(ts, fit)
        lo = leave_one_gpu_out(ts, fit)
        logo = [100 * lo[n]["gmae"] for n in ts.names]
        held, far = ([100 * v["per_gpu"][n]["gmae"] for n in ts.names] + [100 * v["all"]["gmae"]]
                     for v in (h, r))
        print(f"{label:<38} | {'':17}" + " ".join(f"{v:5.1f}" for v in held)
              + f" | {'':20}" + " ".join(f"{v:5.1f}" for v in far)
              + f" | {'':26}" + " ".join(f"{v:5.1f}" for v in logo)
              + f" {np.mean(logo):5.1f} {np.max(logo):5.1f}  ({time.perf_counter() - t0:.0f} s)",
              flush=True)
    return 0


_DURATIONS_MS = (0.0, 0.1, 1.0, 10.0, 100.0, float("inf"))


def _sustained_shares(data) -> None:
    """Each GPU's median share of its datasheet fp32 peak: on GEMMs with B*M, N, K all at
    least 1024 (median, 90th percentile), and by kernel duration on compute-bound shapes
    (largest over smallest of B*M, N, K under 16): a power-capped board holds its clock
    for short kernels only."""
    bands = "  ".join(f"<{hi:g} ms" if lo == 0 else f">={lo:g} ms" if hi == float("inf")
                      else f"{lo:g}-{hi:g} ms" for lo, hi in zip(_DURATIONS_MS,
                                                                _DURATIONS_MS[1:]))
    print("sustained share of the datasheet fp32 peak: B*M, N, K >= 1024 (median, p90), "
          f"then compute-bound shapes by kernel time ({bands})")
    for d in data:
        rows = d.B * d.M
        lo = np.minimum(np.minimum(rows, d.N), d.K)
        hi = np.maximum(np.maximum(rows, d.N), d.K)
        flops, _ = gemm_flops_bytes(d.B, d.M, d.N, d.K, shared_weight=True)
        kernel = d.kernel_ms()
        share = flops / (kernel * 1e-3) / d.figures.peak_flops
        big = lo >= 1024
        cells = []
        for a, b in zip(_DURATIONS_MS, _DURATIONS_MS[1:]):
            q = (hi / lo < 16) & (kernel >= a) & (kernel < b)
            cells.append(f"{np.median(share[q]):5.2f}" if q.sum() >= 20 else "    -")
        print(f"  {d.name:<24} {big.sum():5d} shapes  {np.median(share[big]):5.2f}  "
              f"{np.percentile(share[big], 90):5.2f}   by kernel time: " + " ".join(cells))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--regressor", choices=("gbm", "mlp", "both"), default="gbm")
    ap.add_argument("--no-logo", action="store_true", help="skip leave-one-GPU-out")
    ap.add_argument("--variants", action="store_true",
                    help="compare feature sets, targets and pooling weights instead")
    args = ap.parse_args()
    kinds = ("gbm", "mlp") if args.regressor == "both" else (args.regressor,)
    if args.variants:
        return _variants(kinds)
    data = load_neusight()
    ts = training_set(data)
    _sustained_shares(data)
    for kind in kinds:
        t0 = time.perf_counter()
        h = heldout_validation(ts, kind)
        print(f"[{kind}, pooled w={DEVICE_WEIGHT}] held-out shapes ({h['split']}), "
              f"fit {h['fit_s']} s")
        for name, f in h["per_gpu"].items():
            print(_row(name, f))
        print(_row("all", h["all"]))
        r = shape_range_validation(ts, kind)
        print(f"[{kind}] shape range ({r['split']})")
        for name, f in {**r["per_gpu"], "all": r["all"]}.items():
            print(_row(name, f))
        for name, f in r["per_kind"].items():
            print(_row(f"kind:{name}", f))
        if not args.no_logo:
            print(f"[{kind}] leave-one-GPU-out (all shapes of the GPU, the others' median "
                  "overhead; long = latency > 3x (that overhead + floor kernel))")
            logo = leave_one_gpu_out(ts, kind)
            for name, f in logo.items():
                print(_row(name, f))
                print(_row("  long shapes", f["long_shapes"]))
            g = [f["gmae"] for f in logo.values()]
            print(f"  mean GMAE {100 * np.mean(g):.1f}%, worst {100 * np.max(g):.1f}%")
        print(f"[{kind}] {time.perf_counter() - t0:.0f} s")
    print("bundled profiles: square fp32 GEMM, predicted kernel ms (achieved TFLOP/s)")
    sizes = np.array([512, 1024, 2048, 4096, 8192])
    for name in BUNDLED_GPUS:
        gemm = profile_for_device(name).kernel_models["gemm"]
        ms = gemm.predict_shapes(1, sizes, sizes, sizes)
        cells = "  ".join(f"{s}: {m:.3f} ({2 * s ** 3 / m / 1e9:.1f})" for s, m in zip(sizes, ms))
        print(f"  {name:<24} {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
