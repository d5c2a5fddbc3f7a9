"""Validate the GPU profiles against every real GPU trace in ../shared/data/traces.

    .venv/bin/python benchmarks/gpu_traces.py [TRACES_DIR] [--json OUT.json]

Each job (the Kineto files of one run: files whose names differ only in digits are the
ranks of one job) is replayed twice: with its recorded kernel durations and with kernels
modeled by the profile of the GPU it names (``python -m predictors kernels
validate-traces``).  Execution traces in the same folder with as many files as the job
has ranks supply collective sizes.  Prints one block per job and a summary table.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from predictors.calibrate.gpu_profiles import profile_for_device  # noqa: E402
from predictors.calibrate.public_traces import TRACES_DIR, discover_jobs  # noqa: E402
from predictors.calibrate.trace_validation import validate_recording  # noqa: E402
from predictors.costs.datasheet import with_measured_sibling  # noqa: E402
from predictors.cli.kernels import print_validation  # noqa: E402
from predictors.traces.recording import load_recording  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default=str(TRACES_DIR))
    ap.add_argument("--json", metavar="OUT.json", help="also write all results as JSON")
    args = ap.parse_args()
    root = Path(args.root)
    if not root.is_dir():
        print(f"error: {root} is not there (the public traces live in ../shared/data)")
        return 2
    results = []
    for name, files, ets in discover_jobs(root):
        t0 = time.perf_counter()
        rec = load_recording(files)
        device = rec.traces[0].device_name
        if not device:
            print(f"{name}: no GPU named in the trace; skipped\n")
            continue
        v = validate_recording(rec, with_measured_sibling(profile_for_device(device)),
                               job=name, et_paths=ets)
        print_validation(v)
        print(f"  ({time.perf_counter() - t0:.1f} s)\n")
        results.append(v)
    print(f"{'job':<58} {'iter err':>9} {'active err':>10} {'modeled':>8} {'op GMAE':>8}")
    for v in results:
        modeled = 100 - v.coverage.get("recorded (no model)", 0.0)
        g = f"{100 * v.kernel_gmae:7.1f}%" if v.kernel_gmae is not None else "      -"
        print(f"{v.job[:58]:<58} {v.iteration_error_pct:+8.1f}% {v.active_error_pct:+9.1f}% "
              f"{modeled:7.1f}% {g}")
    if args.json:
        Path(args.json).write_text(json.dumps([v.to_json() for v in results], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
