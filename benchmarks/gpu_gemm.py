"""Validate the GPU GEMM model on the public NeuSight measurements and print the figures.

    .venv/bin/python benchmarks/gpu_gemm.py [--regressor gbm|mlp|both] [--no-logo]

Prints, per GPU: GMAE (geometric mean of |pred/measured - 1|), MAPE and the median ratio
on a random 20% of shapes held out (fit on the other 80% of all GPUs), and for
leave-one-GPU-out (fit on the other four GPUs, predict from datasheet figures).  Then the
bundled profiles' predictions for square GEMMs, as achieved TFLOP/s.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from predictors.gpu import BUNDLED_GPUS, profile_for_device  # noqa: E402
from predictors.gpu.data import load_neusight  # noqa: E402
from predictors.gpu.train import (heldout_validation, leave_one_gpu_out,  # noqa: E402
                                  training_set)


def _row(name, f):
    return (f"  {name:<24} n={f['n']:5d}  GMAE {100 * f['gmae']:5.1f}%  "
            f"MAPE {100 * f['mape']:5.1f}%  median pred/measured {f['median_ratio']:.3f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--regressor", choices=("gbm", "mlp", "both"), default="gbm")
    ap.add_argument("--no-logo", action="store_true", help="skip leave-one-GPU-out")
    args = ap.parse_args()
    ts = training_set(load_neusight())
    kinds = ("gbm", "mlp") if args.regressor == "both" else (args.regressor,)
    for kind in kinds:
        t0 = time.perf_counter()
        h = heldout_validation(ts, kind)
        print(f"[{kind}] held-out shapes ({h['split']}), fit {h['fit_s']} s")
        for name, f in h["per_gpu"].items():
            print(_row(name, f))
        print(_row("all", h["all"]))
        if not args.no_logo:
            print(f"[{kind}] leave-one-GPU-out (all shapes of the GPU; long = latency > 3x "
                  "its floor)")
            for name, f in leave_one_gpu_out(ts, kind).items():
                print(_row(name, f))
                print(_row("  long shapes", f["long_shapes"]))
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
