"""Replay every real recording at hand and compare each replayed step with the recorded one.

    .venv/bin/python benchmarks/replay_traces.py [--json OUT.json]

Three groups, each summarized by geomean, mean and worst error (``predictors.utils.metrics``):

- the public jobs of ``../shared/data/traces`` (files whose names differ only in digits are
  the ranks of one job), skipped with a note when that folder is absent;
- the CPU sample trace in ``sample_traces/``;
- every traced H200 training step in ``resources/measurements/nvidia-h200-*`` (one job per
  ``scenarioNN.json.gz``: one rank, one step, main thread and autograd thread).

Each is what ``python -m predictors replay FILE…`` prints for that job.  The target is every
recording within 2 % of its recorded step.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from predictors.calibrate.public_traces import TRACES_DIR, discover_jobs  # noqa: E402
from predictors.traces.recording import load_recording  # noqa: E402
from predictors.traces.replay import replay  # noqa: E402
from predictors.utils.metrics import format_summary, summarize  # noqa: E402

TARGET = 0.02


def groups() -> dict[str, list[tuple[str, list[str]]]]:
    """Group name -> ``(job name, Kineto files)``."""
    out: dict[str, list[tuple[str, list[str]]]] = {}
    if TRACES_DIR.is_dir():
        out["public jobs"] = [(name, files) for name, files, _ in discover_jobs(TRACES_DIR)]
    sample = ROOT / "sample_traces" / "small_dlrm_cpu1.pt.trace.json.gz"
    out["CPU sample"] = [(sample.name, [str(sample)])]
    h200 = sorted((ROOT / "resources" / "measurements").glob("nvidia-h200-*/scenario*.json.gz"))
    out["H200 traced steps"] = [(f"{f.parent.name}/{f.name}", [str(f)]) for f in h200]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="OUT.json", help="also write every job's figures")
    args = ap.parse_args()
    if not TRACES_DIR.is_dir():
        print(f"note: {TRACES_DIR} is absent; the public jobs are skipped")
    report = {}
    t0 = time.perf_counter()
    for group, jobs in groups().items():
        rows = []
        print(f"\n{group}")
        for name, files in jobs:
            r = replay(load_recording(files))
            err = r.error_pct / 100.0
            flag = "" if abs(err) <= TARGET else "   over 2 %"
            print(f"  {name:58s} recorded {r.recorded_ms:10.3f} ms  replayed "
                  f"{r.iteration_ms:10.3f} ms  {100 * err:+6.2f} %{flag}")
            rows.append({"job": name, "ranks": len(files), "recorded_ms": r.recorded_ms,
                         "replayed_ms": r.iteration_ms, "error": err})
        s = summarize(r["error"] for r in rows)
        within = sum(abs(r["error"]) <= TARGET for r in rows)
        print(f"  {group}: {format_summary(s)}; {within} of {len(rows)} within 2 %")
        report[group] = {"summary": s.to_json(), "within_2pct": within, "jobs": rows}
    every = [r["error"] for g in report.values() for r in g["jobs"]]
    print(f"\nall recordings: {format_summary(summarize(every))}; "
          f"{sum(abs(e) <= TARGET for e in every)} of {len(every)} within 2 % "
          f"({time.perf_counter() - t0:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
