"""Predicted peak memory of a training step against the real one, on this machine.

    .venv/bin/python benchmarks/memory.py [--n 12] [--seed 11] [--device cpu|cuda]
                                          [--optimizer sgd|adam|adamw] [--json OUT]
    .venv/bin/python benchmarks/memory.py --from-measurements DIR [DIR ...]

``--from-measurements`` compares, anywhere, the peaks that ``calibrate --device cuda``
measured for its scenarios (``max_memory_allocated``, in ``measurements.json``; older
folders have none) with the GPU captures' predictions.

Each random scenario (the issue-3 ranges: DLRMs and transformer LMs, plus the bundled
small DLRM) is captured on the meta device, as ``predict`` does, and its predicted peak
(``StepMemory.peak``) is set beside the peak that the same step allocates for real
(``predictors.calibrate.measure.peak_memory``: the profiler's memory events on the CPU,
``max_memory_allocated`` on CUDA), after two warm-up steps.  Prints one row per scenario
and the geomean and worst absolute errors; the memory sizes do not depend on the
machine's speed, so unlike the time figures they carry no noise.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from predictors.calibrate.measure import peak_memory  # noqa: E402
from predictors.calibrate.samples import random_scenarios  # noqa: E402
from predictors.model.capture import capture_training_step  # noqa: E402
from predictors.model.workload import build_workload, training_step  # noqa: E402
from predictors.scenario.format import OPTIMIZERS, load_scenario  # noqa: E402


def measured_peak(doc: dict, device: str) -> int:
    workload = build_workload(doc, device=device, fast_init=True)
    batch = workload.make_batch()
    optimizer = workload.optimizer()
    for _ in range(2):
        training_step(workload.module, batch, optimizer)
    peak = peak_memory(workload, batch, optimizer, device)
    del workload, batch, optimizer
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return peak


def measured_cases(folders: list[str]) -> list[tuple[dict, object]]:
    """``(scenario, peak)`` of every measured scenario with a peak in ``folders``."""
    import gzip

    from predictors.scenario.format import validate_scenario

    cases = []
    for folder in folders:
        path = next((p for p in (Path(folder) / "measurements.json",
                                 Path(folder) / "measurements.json.gz") if p.exists()), None)
        if path is None:
            continue
        data = path.read_bytes()
        doc = json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)
        for row in doc.get("scenarios", []):
            peak = row.get("measure", {}).get("peak_memory_bytes")
            if peak:
                cases.append((validate_scenario(row["doc"]), lambda peak=peak: int(peak)))
    return cases


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=12, help="random scenarios (default 12)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--optimizer", default="sgd", choices=OPTIMIZERS)
    ap.add_argument("--from-measurements", nargs="+", metavar="DIR",
                    help="measured GPU folders (calibrate --device cuda) instead of runs here")
    ap.add_argument("--json", metavar="OUT.json", help="also write the rows as JSON")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.from_measurements:
        cases = measured_cases(args.from_measurements)
        if not cases:
            print("no scenario in these folders has a measured peak "
                  "(max_memory_allocated in measurements.json)", file=sys.stderr)
            return 2
        args.device, gpu = "cuda (measured)", True
    else:
        docs = [load_scenario(ROOT / "resources" / "scenarios" / "small_dlrm.json")]
        docs += random_scenarios(args.n, args.seed)
        for doc in docs:
            doc["training"]["optimizer"] = args.optimizer
        gpu = args.device == "cuda"
        cases = [(doc, lambda doc=doc: measured_peak(doc, args.device)) for doc in docs]
    rows = []
    print(f"{'scenario':<44} {'measured MB':>11} {'predicted MB':>12} {'error':>7}  "
          f"{'params MB':>9} {'activations MB':>14}  {'peak op':<30}")
    for doc, measured in cases:
        t0 = time.perf_counter()
        graph = capture_training_step(build_workload(doc), gpu=gpu)
        memory = graph.graph["memory"]
        real = measured()
        error = 100 * (memory.peak / real - 1)
        node = graph.nodes[memory.peak_node]
        row = {"scenario": doc["name"], "measured_bytes": real,
               "predicted_bytes": memory.peak, "error_pct": error,
               "memory": memory.to_json(), "peak_op": node["name"],
               "peak_phase": node["phase"], "seconds": time.perf_counter() - t0}
        rows.append(row)
        print(f"{doc['name'][:44]:<44} {real / 1e6:>11.2f} {memory.peak / 1e6:>12.2f} "
              f"{error:>+6.2f}%  {memory.resident['parameters'] / 1e6:>9.2f} "
              f"{memory.at_peak['activations'] / 1e6:>14.2f}  "
              f"{node['name']} ({node['phase']})")
    errors = [max(abs(r["error_pct"]), 1e-3) for r in rows]
    geomean = math.exp(sum(math.log(e) for e in errors) / len(errors))
    print(f"\n{len(rows)} scenarios on {args.device}, {args.optimizer}: geomean |error| "
          f"{geomean:.2f} %, "
          f"worst {max(errors):.2f} %, torch {torch.__version__}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
