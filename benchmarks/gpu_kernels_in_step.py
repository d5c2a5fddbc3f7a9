"""Every kernel of a GPU's traced training steps against a profile's kernel models.

    python benchmarks/gpu_kernels_in_step.py FOLDER... [--profile P.json] [--scenarios GPU]

Each traced step of a measurement folder (``calibrate --device cuda``) is aligned with its
scenario's GPU capture, as the calibration aligns it
(:func:`predictors.calibrate.cuda_overheads.aligned_step`); every captured op that launched
device work gets the recorded time of its kernels, copies and memsets and the time the
profile predicts for it (the whole step at once, as a prediction costs it).  Prints, per
model and op, the count, recorded and predicted totals, their ratio and the GMAE and median
of predicted / recorded per op.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from predictors.utils.metrics import geomean_abs  # noqa: E402


def in_step_kernels(folder: str, profile, only: str = "") -> list[dict]:
    """``{scenario, op, model, recorded_us, predicted_us}`` per captured op that launched
    device work, over the folder's traced steps (scenario names starting with ``only``)."""
    from predictors.calibrate.cuda_profile import (
        _aligned_steps,
        _recordings,
        load_measurements,
    )
    from predictors.costs.op_costs import kernel_seconds

    doc = load_measurements(folder)
    doc["scenarios"] = [s for s in doc.get("scenarios") or []
                        if s["doc"]["name"].startswith(only)]
    rows = []
    for step in _aligned_steps(doc, _recordings(doc)).values():
        records = [r for r in step.records if r.get("kernel_us")]
        nodes = [r["node"] for r in step.records]
        _, seconds, models = kernel_seconds(nodes, profile.device, profile)
        at = {id(r["node"]): j for j, r in enumerate(step.records)}
        for r in records:
            j = at[id(r["node"])]
            rows.append({"scenario": step.scenario, "op": r["node"]["name"],
                         "model": models[j].split(" ")[0], "recorded_us": r["kernel_us"],
                         "predicted_us": seconds[j] * 1e6})
    return rows


def summary(rows: list[dict], key) -> list[tuple]:
    groups: dict = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    out = []
    for k, rs in groups.items():
        rec = np.array([r["recorded_us"] for r in rs])
        pred = np.array([r["predicted_us"] for r in rs])
        ratio = pred / rec
        gmae = geomean_abs(ratio - 1)
        out.append((k, len(rs), rec.sum(), pred.sum(), gmae, float(np.median(ratio))))
    return sorted(out, key=lambda t: -t[2])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--profile", default=str(ROOT / "resources/profiles/gpu/"
                                             "nvidia-h200-measured.json"))
    ap.add_argument("--scenarios", default="", help="names starting with this (e.g. GPU)")
    ap.add_argument("--ops", type=int, default=25, help="how many ops to list")
    args = ap.parse_args(argv)
    from predictors.profiles import load_profile

    profile = load_profile(args.profile)
    rows = [r for f in args.folders for r in in_step_kernels(f, profile, args.scenarios)]
    head = f"{'':44s} {'n':>5s} {'recorded':>10s} {'predicted':>10s} {'ratio':>6s} " \
           f"{'GMAE':>6s} {'median':>6s}"
    print(f"{args.profile} on {', '.join(args.folders)}"
          + (f" (scenarios {args.scenarios}*)" if args.scenarios else ""))
    for title, key, n in (("all", lambda r: "all kernels", 1),
                          ("per model", lambda r: r["model"], 10),
                          ("per op", lambda r: f"{r['model']:9s} {r['op']}", args.ops)):
        print(f"\n{title}\n{head}")
        for k, count, rec, pred, gmae, med in summary(rows, key)[:n]:
            print(f"{k[:44]:44s} {count:5d} {rec / 1e3:8.2f}ms {pred / 1e3:8.2f}ms "
                  f"{pred / rec:6.2f} {100 * gmae:5.1f}% {med:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
