"""How fast recorded traces load: MB of JSON per second, per file and per stage.

    .venv/bin/python benchmarks/trace_parse.py [FILE ...]

Without arguments it reads every Kineto trace in ../shared/data/traces.  Prints, per file,
the best of three runs: wall time and CPU time (the CPU time is what this process used;
on a shared machine the wall time also counts other processes' turns), split into
decompress / parse (JSON -> columns) / timeline (CPU ops + Timeline), and MB/s of
uncompressed JSON; the last line sums the stages' CPU time over all files.
"""
from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from predictors.traces import kineto  # noqa: E402
from predictors.traces.ops import cpu_ops  # noqa: E402
from predictors.traces.recording import build_timeline  # noqa: E402

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "traces"


def measure(path: Path, repeats: int = 3) -> dict:
    best = None
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        data = kineto.read_json_bytes(path)
        w1, c1 = time.perf_counter(), time.process_time()
        tr = kineto.parse_kineto_bytes(data, str(path))
        w2, c2 = time.perf_counter(), time.process_time()
        build_timeline([tr], [cpu_ops(tr)])
        w3, c3 = time.perf_counter(), time.process_time()
        run = {"mb": len(data) / 1e6, "events": len(tr), "wall": w3 - w0, "cpu": c3 - c0,
               "gunzip": c1 - c0, "parse": c2 - c1, "timeline": c3 - c2,
               "parse_wall": w2 - w1}
        if best is None or run["cpu"] < best["cpu"]:
            best = run
    return best


def main(argv: list[str]) -> int:
    files = [Path(a) for a in argv] or sorted(
        p for p in SHARED.glob("*/*.json.gz") if "_et" not in p.name and "dlrm_eg" not in
        p.name)
    if not files:
        print("no trace files (../shared/data/traces is absent); pass files as arguments")
        return 1
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}; decoder: "
          f"{'msgspec' if kineto.msgspec is not None else 'orjson'}")
    print(f"{'file':<48} {'MB':>6} {'events':>8} {'wall s':>7} {'cpu s':>7} "
          f"{'MB/s wall':>9} {'MB/s cpu':>9} {'parse-only MB/s cpu':>19}")
    tot_mb = tot_wall = tot_cpu = tot_parse = tot_gunzip = tot_timeline = 0.0
    for f in files:
        r = measure(f)
        tot_mb += r["mb"]
        tot_wall += r["wall"]
        tot_cpu += r["cpu"]
        tot_parse += r["parse"]
        tot_gunzip += r["gunzip"]
        tot_timeline += r["timeline"]
        name = f"{f.parent.name}/{f.name}"[:48]
        print(f"{name:<48} {r['mb']:6.1f} {r['events']:8d} {r['wall']:7.3f} {r['cpu']:7.3f} "
              f"{r['mb'] / r['wall']:9.1f} {r['mb'] / r['cpu']:9.1f} "
              f"{r['mb'] / max(r['parse'], 1e-9):19.1f}")
    print(f"{'all':<48} {tot_mb:6.1f} {'':>8} {tot_wall:7.3f} {tot_cpu:7.3f} "
          f"{tot_mb / tot_wall:9.1f} {tot_mb / tot_cpu:9.1f} {tot_mb / tot_parse:19.1f}")
    print(f"CPU s by stage: gunzip {tot_gunzip:.3f}, JSON -> columns {tot_parse:.3f}, "
          f"ops + timeline {tot_timeline:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
