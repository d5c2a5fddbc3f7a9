"""Validate the GPU ``bmm`` and convolution models on the public NeuSight kernel
measurements and print the tables (docs/accuracy.md, docs/models/kernels.md).

    .venv/bin/python benchmarks/gpu_kernels.py [--op bmm|conv|both] [--no-logo] [--baseline]
    .venv/bin/python benchmarks/gpu_kernels.py --write      # rebuild resources/kernel_models
    .venv/bin/python benchmarks/gpu_kernels.py --memory-bound   # layer norm, softmax, add, GELU, ReLU

Per op, errors of the predicted latency (kernel + the GPU's measurement overhead) against
the measured one, per GPU (geomean, mean, worst of |pred / measured - 1|):

- **shape range**: fit on small and medium shapes of every GPU, score the large,
  tall-skinny and tiny-batched ones (convolutions: large, lopsided, tiny), per GPU and
  per kind of shape;
- **leave one GPU out**: fit on the other GPUs, predict every shape of the one left out from its
  datasheet figures and the others' median measurement overhead;
- ``--baseline``: every measured shape priced without these models: ``bmm`` by the
  bundled GEMM regressor (trained on ``linear`` GEMMs), convolutions as implicit GEMMs
  (:mod:`predictors.costs.convolution`).

``--memory-bound`` instead checks the profiles' measured roofline (no fit) on NeuSight's
layer norm, softmax, add, GELU and ReLU kernels of the same GPUs: per op and GPU the error
of the latency, and the median predicted / measured kernel time of kernels over 50 us.

Takes about a minute per op on one core (six fits, each of two boosted-tree ensembles).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from predictors.calibrate.kernel_fit import (
    OPS,
    build_kernel_models,
    kernels_dir,
    leave_one_gpu_out,
    load_kernel_set,
    memory_bound_check,
    shape_range_validation,
)
from predictors.utils.metrics import format_summary, summarize


def _table(title: str, rows: dict) -> None:
    print(title)
    for name, s in rows.items():
        print(f"  {name:<26} {format_summary(s)}")


def _conv_node(n, cin, cout, size, k, s, p) -> dict:
    out = (size + 2 * p - k) // s + 1
    return {"name": "aten::convolution", "input_shapes": [[n, cin, size, size],
                                                          [cout, cin, k, k]],
            "input_dtypes": ["float32"] * 2, "output_shapes": [[n, cout, out, out]]}


def _baseline(ks) -> dict:
    """Every measured shape priced by the bundled GEMM regressor alone (bmm: B products
    without a shared operand; conv: its implicit GEMMs)."""
    from predictors.calibrate.gpu_profiles import profile_for_device
    from predictors.costs.gpu_gemm import GemmKernelModel

    gemm = profile_for_device("NVIDIA A100-PCIE-40GB").kernel_models["gemm"]
    out = {}
    for g, name in enumerate(ks.names):
        rows = (ks.gpu == g) & ~ks.aux
        model = GemmKernelModel(ks.figures[g], gemm.regressor)
        model.__dict__["_bundled"] = {"gpu-bmm": None, "gpu-conv": None}  # none bundled
        if ks.op == "bmm":
            pred = model.predict_shapes(*ks.dims[rows].T, shared_weight=False)
        else:
            pred = model.predict_ms([_conv_node(*map(int, d)) for d in ks.dims[rows]])
        out[name] = summarize((pred + ks.overhead_ms[rows]) / ks.latency_ms[rows] - 1)
    return out


def _memory_bound() -> int:
    """The measured roofline of each GPU's profile against NeuSight's memory-bound ops."""
    for op, rows in memory_bound_check().items():
        print(f"[{op}] the profile's measured roofline (no fit); kernel ratio = median "
              "predicted / measured kernel over 50 us; bandwidth share = the share of the "
              "profile's DRAM bandwidth those kernels stream their roofline bytes at")
        shares: dict[str, list[float]] = {}
        for r in rows:
            shares.setdefault(r["peaks"], []).append(r["share"])
            print(f"  {r['gpu']:<26} ({r['kind']:<9}) {format_summary(r['error'])}; kernel "
                  f"ratio {r['ratio']:.2f}, bandwidth share {r['share']:.2f} ({r['long']} "
                  "kernels)")
        print("  median bandwidth share over the GPUs with "
              + ", ".join(f"{k} peaks: {np.median(v):.2f}" for k, v in sorted(shares.items())))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--op", choices=OPS + ("both",), default="both")
    ap.add_argument("--no-logo", action="store_true", help="skip leave-one-GPU-out")
    ap.add_argument("--baseline", action="store_true",
                    help="also score the GEMM regressor on the bmm shapes")
    ap.add_argument("--write", action="store_true",
                    help="fit on every GPU and write resources/kernel_models/gpu-OP.json")
    ap.add_argument("--memory-bound", action="store_true",
                    help="check the measured roofline on layer norm, softmax, add, GELU, ReLU")
    args = ap.parse_args()
    if kernels_dir() is None:
        print("the NeuSight kernel measurements are not there "
              "(../shared/data/microbench/neusight-kernels)", file=sys.stderr)
        return 2
    if args.memory_bound:
        return _memory_bound()
    ops = OPS if args.op == "both" else (args.op,)
    if args.write:
        build_kernel_models(ops=ops)
        return 0
    for op in ops:
        t0 = time.perf_counter()
        ks = load_kernel_set(op)
        extra = f" (and {ks.aux.sum()} linear GEMMs that only train)" if ks.aux.any() else ""
        print(f"== {op}: {(~ks.aux).sum()} measured kernels on {len(ks.names)} GPUs{extra}")
        _table(f"[{op}] shape range: fit on small and medium shapes, scored on the rest",
               shape_range_validation(ks))
        if not args.no_logo:
            logo = leave_one_gpu_out(ks)
            _table(f"[{op}] leave one GPU out (predicted from its datasheet figures)", logo)
            g = [s.geomean for s in logo.values()]
            print(f"  mean of the GPUs' geomeans {100 * np.mean(g):.1f} %, "
                  f"worst {100 * np.max(g):.1f} %")
        if args.baseline:
            _table(f"[{op}] without this model: the bundled GEMM regressor (trained on "
                   f"linear GEMMs), every {op} shape", _baseline(ks))
        print(f"[{op}] {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
