"""Multi-GPU predictions against measured throughput: the TorchRec DLRM on A100-40GB.

    .venv/bin/python benchmarks/multi_gpu_dlrm.py [--kernel per_table|fused|both] [--host NAME]
        [--json OUT.json]

The MLPerf/TorchRec reference README (../shared/data/configs/mlperf-dlrm-dcnv2) reports
train records/s of its DLRM on Criteo 1TB (26 one-hot tables of dim 128, 91 GB; bottom
MLP 512-256-128, top 1024-1024-512-256-1, dot interaction) on 4 and 8 A100-40GB at several
batch sizes.  ``resources/scenarios/torchrec_dlrm_criteo1tb.json`` is that model; each row
predicts it on the matching platform and batch and converts the predicted iteration to
records/s, with the tables looked up one ``EmbeddingBag`` each (``per_table``) and as
TorchRec runs them, one fused lookup per rank (``fused``, FBGEMM's table-batched
embedding).  The 1-GPU row of the README is left out: 91 GB of tables do not fit one
40 GB GPU (TorchRec ran it with its UVM cache, which the scenario format cannot say).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from predictors.utils.metrics import gmae  # noqa: E402
from predictors.engine.predict import predict  # noqa: E402
from predictors.model.embedding_blocks import with_kernel  # noqa: E402
from predictors.scenario.definition import INPUT_PIPELINES  # noqa: E402
from predictors.scenario.format import load_scenario  # noqa: E402

SCENARIO = ROOT / "resources" / "scenarios" / "torchrec_dlrm_criteo1tb.json"

# (GPUs, global batch, measured train records/s) from the README's table
MEASURED = [(4, 16384, 1_458_176), (8, 2048, 284_615), (8, 16384, 1_671_168),
            (8, 65536, 5_373_952)]


def four_a100() -> dict:
    """Four A100-40GB on one NVSwitch, as half of a DGX A100 / p4d node."""
    gpus = [{"id": f"gpu{i}", "kind": "gpu", "params": {"model": "a100"}} for i in range(4)]
    edges = [{"source": f"gpu{i}", "target": "nvswitch", "kind": "nvlink3"} for i in range(4)]
    return {"nodes": gpus + [{"id": "nvswitch", "kind": "nvswitch"}], "edges": edges}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", choices=("per_table", "fused", "both"), default="both",
                    help="the embedding tables' lookup kernels (default: both)")
    ap.add_argument("--host", help="the host of the catalogue (default: the default host)")
    ap.add_argument("--input-pipeline", choices=INPUT_PIPELINES,
                    help="replace the scenario's input pipeline (it runs TorchRec's)")
    ap.add_argument("--json", metavar="OUT.json", help="also write the rows as JSON")
    args = ap.parse_args()
    base = load_scenario(SCENARIO)
    rows = []
    kernels = ("per_table", "fused") if args.kernel == "both" else (args.kernel,)
    print(f"{'kernel':>9} {'GPUs':>4} {'batch':>6} {'measured ms':>11} {'predicted ms':>12} "
          f"{'error':>7}  {'device active':>13} {'exposed comm':>12}  {'predicted s':>11}")
    for kernel, (gpus, batch, rps) in ((k, m) for k in kernels for m in MEASURED):
        doc = with_kernel(base, kernel)
        doc["training"]["batch_size"] = batch
        if args.input_pipeline:
            doc["training"]["input_pipeline"] = args.input_pipeline
        doc["platform"] = {"preset": "dgx-a100"} if gpus == 8 else four_a100()
        t0 = time.perf_counter()
        result = predict(doc, host=args.host)
        elapsed = time.perf_counter() - t0
        measured_ms = batch / rps * 1e3
        slowest = max(result.per_rank, key=lambda r: r["iteration_ms"])
        row = {"kernel": kernel, "gpus": gpus, "batch": batch, "measured_records_per_s": rps,
               "measured_ms": measured_ms, "predicted_ms": result.iteration_ms,
               "error_pct": 100 * (result.iteration_ms / measured_ms - 1),
               "device_active_ms": slowest["device_active_ms"],
               "exposed_comm_ms": slowest["exposed_comm_ms"], "predict_s": elapsed}
        rows.append(row)
        print(f"{kernel:>9} {gpus:>4} {batch:>6} {measured_ms:>11.2f} {result.iteration_ms:>12.2f} "
              f"{row['error_pct']:>+6.1f}%  {row['device_active_ms']:>10.2f} ms "
              f"{row['exposed_comm_ms']:>9.2f} ms  {elapsed:>10.1f}")
    for kernel in kernels:
        mine = [r for r in rows if r["kernel"] == kernel]
        error = gmae([r["predicted_ms"] for r in mine], [r["measured_ms"] for r in mine])
        print(f"{kernel}: geomean |error| {100 * error:.1f} %")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
