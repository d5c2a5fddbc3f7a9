"""Compare kernel-model feature sets on identical calibration samples.

    .venv/bin/python -m predictors calibrate --device cpu --out /tmp/p.json \\
        --keep-samples /tmp/p-samples.json.gz
    .venv/bin/python benchmarks/feature_ab.py /tmp/p-samples.json.gz [--versions 2,3] \\
        [--classes gemm,elementwise] [--splits 4] [--kinds gbm]

Every class is refitted once per feature version (``predictors.costs.op_features``) and
random 80/20 split, exactly as calibration fits it (``fit_class_model``), and the held-out
GMAE is averaged over the splits.  The measurements are the same for every version, so
the differences are the features' alone, not the run-to-run spread of two calibrations
(1-3 points here).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from predictors.calibrate.kept_samples import load_samples  # noqa: E402
from predictors.costs.learned_models import fit_class_model  # noqa: E402
from predictors.costs.op_features import FEATURES_VERSION  # noqa: E402
from predictors.hardware.specs import local_cpu_spec  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("samples", help="a file written by calibrate --keep-samples")
    ap.add_argument("--versions", default=f"{FEATURES_VERSION - 1},{FEATURES_VERSION}")
    ap.add_argument("--classes", default="", help="comma-separated (default: all)")
    ap.add_argument("--splits", type=int, default=4)
    ap.add_argument("--kinds", default="gbm", help="gbm, mlp or gbm,mlp (the better kept)")
    args = ap.parse_args(argv)
    try:
        classes, prov = load_samples(args.samples)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    versions = [int(v) for v in args.versions.split(",")]
    wanted = [c for c in args.classes.split(",") if c] or sorted(classes)
    spec = local_cpu_spec(int(prov.get("threads", 1)))
    print(f"samples: {args.samples} (calibrated {prov.get('date', '?')} on "
          f"{prov.get('cpu_model', '?')}); held-out GMAE %, mean of {args.splits} splits")
    print(f"  {'class':<15} {'samples':>7} " + " ".join(f"{'v' + str(v):>8}" for v in versions))
    for cls in wanted:
        rows = classes.get(cls)
        if not rows:
            print(f"  {cls:<15} (no samples)")
            continue
        nodes, ms = [n for n, _ in rows], np.array([m for _, m in rows])
        t0, cells = time.perf_counter(), []
        for v in versions:
            errs = [fit_class_model(cls, nodes, ms, spec, seed=s, features=v,
                                    kinds=tuple(args.kinds.split(","))).metrics
                    for s in range(args.splits)]
            cells.append(np.mean([m[m["chosen"]]["gmae"] for m in errs]))
        print(f"  {cls:<15} {len(rows):>7} " + " ".join(f"{100 * c:>7.1f}%" for c in cells)
              + f"   ({time.perf_counter() - t0:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
