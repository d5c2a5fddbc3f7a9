"""GPU EmbeddingBag forward: the model against an H200's measured kernels.

    python benchmarks/gpu_embedding.py [--fit] [--profile P.json]

Two kinds of measurement, both in ``resources/measurements/nvidia-h200-*``:

- microbenchmarks (``kernels`` of ``measurements.json``): one table's forward replayed in a
  CUDA graph, so its rows stay in L2 between calls (warm);
- in-step kernels: the bag forwards of the DLRM scenarios' traced training steps, each
  aligned with its captured op (:func:`predictors.calibrate.cuda_overheads.aligned_step`)
  and predicted as a prediction does (the whole step's ops, so each table's reuse
  distance is the other tables' rows).

Prints GMAE, MAPE and the median pred/measured per set, for the model in the profile and
the traffic model it replaced.  ``--fit`` refits the three latency constants
(:data:`predictors.costs.gpu_embedding.BAG_FORWARD`) on the microbenchmarks and the first
start's scenarios, and reports the held-out sets (other scenarios, other starts).
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from predictors.utils.metrics import geomean_abs  # noqa: E402

FOLDERS = ["nvidia-h200-2026-11-29", "nvidia-h200-2026-11-29-rerun",
           "nvidia-h200-2026-11-29-seed7", "nvidia-h200-2026-11-29-seed11"]
FIT_SETS = {"micro", "nvidia-h200-2026-11-29"}  # what --fit sees; the rest is held out


def micro_cases() -> list[dict]:
    """Forward microbenchmarks: ``{rows, dim, batch, pooling, distribution, us, reuse}``."""
    from predictors.calibrate.cuda_profile import load_measurements

    out = []
    for folder in FOLDERS:
        doc = load_measurements(ROOT / "resources/measurements" / folder)
        for k in doc.get("kernels") or []:
            if k.get("op") == "embedding_bag_fwd" and k.get("ms"):
                out.append({"set": "micro", "folder": folder, "rows": k["rows"],
                            "dim": k["dim"], "batch": k["batch"], "pooling": k["pooling"],
                            "distribution": k["distribution"], "us": k["ms"] * 1e3,
                            "reuse": 0.0, "itemsize": 4})
    return out


def step_cases(model) -> list[dict]:
    """Bag forwards of the traced DLRM steps, each aligned with its captured op (as the
    calibration aligns them), with the model's reuse distance of each."""
    from predictors.calibrate.cuda_profile import (
        _aligned_steps,
        _recordings,
        load_measurements,
    )

    out = []
    for folder in FOLDERS:
        doc = load_measurements(ROOT / "resources/measurements" / folder)
        doc["scenarios"] = [s for s in doc.get("scenarios") or []
                            if "DLRM" in s["doc"]["name"]]
        for step in _aligned_steps(doc, _recordings(doc)).values():
            nodes = [r["node"] for r in step.records]
            touched = model.touched_bytes(nodes)
            total = sum(touched.values())
            for i, r in enumerate(step.records):
                shape = model.bag_shape(r["node"])
                if shape is None or not r.get("kernel_us"):
                    continue
                rows, dim, lookups, batch = shape
                out.append({"set": folder, "scenario": step.scenario, "rows": rows,
                            "dim": dim, "batch": batch, "pooling": lookups / batch,
                            "distribution": model.distribution(r["node"]),
                            "us": r["kernel_us"], "reuse": total - touched[i],
                            "itemsize": model.itemsize(r["node"])})
    return out


def predict_us(case: dict, model, constants: dict | None = None, old: bool = False) -> float:
    from predictors.costs.gpu_embedding import bag_forward_ms, embedding_bag_ms

    args = (case["rows"], case["dim"], case["batch"], case["pooling"],
            case["distribution"], model.peaks)
    if old:  # the traffic model this replaced
        return 1e3 * embedding_bag_ms(*args, itemsize=case["itemsize"], bag=False,
                                      kernel_floor_ms=model.kernel_floor_ms)
    return 1e3 * bag_forward_ms(*args, itemsize=case["itemsize"], reuse_bytes=case["reuse"],
                                clock_mhz=model.clock_mhz,
                                kernel_floor_ms=model.kernel_floor_ms,
                                constants=constants or model.bag_forward)


def errors(cases, pred) -> dict:
    r = np.array([pred(c) / c["us"] for c in cases])
    e = np.abs(r - 1)
    return {"n": len(cases), "gmae": geomean_abs(e),
            "mape": float(np.mean(e)), "median": float(np.median(r))}


def fit(cases, model) -> dict:
    from scipy.optimize import least_squares

    keys = ("issue_cycles", "l2_ns", "dram_ns")

    def residuals(x):
        c = {**model.bag_forward, **dict(zip(keys, np.exp(x)))}
        return [math.log(predict_us(case, model, c) / case["us"]) for case in cases]

    x0 = np.log([model.bag_forward[k] for k in keys])
    res = least_squares(residuals, x0, loss="soft_l1", f_scale=0.1)
    return dict(zip(keys, (float(v) for v in np.exp(res.x))))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default=str(ROOT / "resources/profiles/gpu/"
                                             "nvidia-h200-measured.json"))
    ap.add_argument("--fit", action="store_true", help="refit the latency constants")
    args = ap.parse_args(argv)
    from predictors.profiles import load_profile

    model = load_profile(args.profile).kernel_models["embedding"]
    cases = micro_cases() + step_cases(model)
    sets = ["micro"] + FOLDERS
    constants = model.bag_forward
    if args.fit:
        constants = {**constants, **fit([c for c in cases if c["set"] in FIT_SETS], model)}
        print("fitted on", ", ".join(sorted(FIT_SETS)), ":",
              ", ".join(f"{k} {constants[k]:.1f}" for k in ("issue_cycles", "l2_ns",
                                                            "dram_ns")))
    print(f"{'set':34s} {'n':>4s} {'GMAE':>7s} {'MAPE':>7s} {'median':>7s}   "
          f"traffic model: GMAE  median")
    held = [c for c in cases if c["set"] not in FIT_SETS]
    for name, group in [(s, [c for c in cases if c["set"] == s]) for s in sets] + \
            [("held out (" + ("not fitted" if args.fit else "fit's complement") + ")",
              held), ("all in-step", [c for c in cases if c["set"] != "micro"])]:
        if not group:
            continue
        new = errors(group, lambda c: predict_us(c, model, constants))
        old = errors(group, lambda c: predict_us(c, model, old=True))
        print(f"{name:34s} {new['n']:4d} {100 * new['gmae']:6.1f}% {100 * new['mape']:6.1f}% "
              f"{new['median']:7.2f}   {100 * old['gmae']:18.1f}% {old['median']:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
