"""Fused embedding lookups against per-table ones: predicted and measured, on this machine.

    .venv/bin/python benchmarks/fused_lookups.py [--n 6] [--seed 5] [--rounds 8]
                                                 [--steps 3] [--device cpu|cuda] [--json OUT]

Each random DLRM (the issue-3 ranges) runs with ``kernel: per_table`` (one EmbeddingBag
per table) and ``kernel: fused`` (one lookup over the tables' stacked rows, as TorchRec's
table-batched embedding).  Both modules live in one process and take turns, ``--rounds``
rounds of ``--steps`` steps each after a warm-up, so that both see the same machine state;
each kernel's figure is the median step.  Both are predicted with the device's bundled
profile.  Prints each scenario's times and the fused / per-table ratio, measured and
predicted, then the geomean absolute errors: of each kernel's step, and of the ratio
(whether the model gets what fusing saves).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from predictors.calibrate.samples import random_dlrm  # noqa: E402
from predictors.utils.metrics import gmae  # noqa: E402
from predictors.engine.predict import predict  # noqa: E402
from predictors.model.embedding_blocks import with_kernel  # noqa: E402
from predictors.model.workload import build_workload, training_step  # noqa: E402
from predictors.scenario.format import validate_scenario  # noqa: E402

KERNELS = ("per_table", "fused")


def measure_pair(docs: list[dict], device: str, rounds: int, steps: int) -> list[float]:
    """The median step (ms) of each scenario in ``docs``, measured in turns."""
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    runs = []
    for doc in docs:
        workload = build_workload(doc, device=device, fast_init=True)
        batch, optimizer = workload.make_batch(), workload.optimizer()
        for _ in range(5):
            training_step(workload.module, batch, optimizer)
        runs.append((workload.module, batch, optimizer))
    samples: list[list[float]] = [[] for _ in docs]
    for _ in range(rounds):
        for run, out in zip(runs, samples):
            sync()
            for _ in range(steps):
                t0 = time.perf_counter()
                training_step(*run)
                sync()
                out.append((time.perf_counter() - t0) * 1e3)
    return [statistics.median(s) for s in samples]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=6, help="random DLRMs (default 6)")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3, help="steps per turn")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", metavar="OUT.json", help="also write the rows as JSON")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(args.seed)
    rows = []
    print(f"{'scenario':<44} {'per-table ms':>19} {'fused ms':>19} {'fused / per-table':>19}")
    print(f"{'':<44} {'meas':>9} {'pred':>9} {'meas':>9} {'pred':>9} {'meas':>9} {'pred':>9}")
    for _ in range(args.n):
        base = random_dlrm(rng)
        if args.device != "cpu":
            base["platform"] = {"preset": "h200-1"}
        docs = [validate_scenario(with_kernel(base, k)) for k in KERNELS]
        measured = measure_pair(docs, args.device, args.rounds, args.steps)
        predicted = [predict(d).iteration_ms for d in docs]
        row = {"scenario": base["name"], "measured_ms": dict(zip(KERNELS, measured)),
               "predicted_ms": dict(zip(KERNELS, predicted)),
               "measured_ratio": measured[1] / measured[0],
               "predicted_ratio": predicted[1] / predicted[0]}
        rows.append(row)
        print(f"{base['name'][:44]:<44} {measured[0]:>9.2f} {predicted[0]:>9.2f} "
              f"{measured[1]:>9.2f} {predicted[1]:>9.2f} {row['measured_ratio']:>9.3f} "
              f"{row['predicted_ratio']:>9.3f}", flush=True)
    for kernel in KERNELS:
        pred = [r["predicted_ms"][kernel] for r in rows]
        meas = [r["measured_ms"][kernel] for r in rows]
        worst = max(abs(p / m - 1) for p, m in zip(pred, meas))
        print(f"{kernel}: geomean |error| {100 * gmae(pred, meas):.1f} %, worst "
              f"{100 * worst:.1f} %")
    pred = [r["predicted_ratio"] for r in rows]
    meas = [r["measured_ratio"] for r in rows]
    worst = max(abs(p / m - 1) for p, m in zip(pred, meas))
    print(f"fused / per-table ratio: measured geomean {statistics.geometric_mean(meas):.3f}, "
          f"predicted {statistics.geometric_mean(pred):.3f}; geomean |error| "
          f"{100 * gmae(pred, meas):.1f} %, worst {100 * worst:.1f} %")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
