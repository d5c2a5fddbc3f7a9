"""The 8-rank V100 DLRM of facebookresearch/param, end to end: its scenario from the
execution traces, predicted and set beside the Kineto recording of every rank.

    .venv/bin/python benchmarks/param_dlrm_v100.py [--write] [--json OUT.json]

``../shared/data/traces/param-dlrm-v100-8rank`` holds one training step of a TorchRec
DLRM on a DGX-1 (8 Tesla V100-SXM2-32GB): per rank a PyTorch execution trace
(``dlrm_eg_{r}.json.gz``) and a Kineto trace (``worker{r}_step_12.*.pt.trace.json.gz``).
:func:`scenario_from_et` reads the model from the execution traces' shapes alone:

- the local batch from the bottom MLP's first ``addmm``, the global batch from the
  pooled all-to-all (ranks x local batch);
- the MLPs from the ``addmm`` weights (bottom, up to the interaction's ``bmm``; top after);
- the pooling of each feature from the KJT's per-feature values (the ``aten::cat`` of the
  26 value tensors before the input all-to-all), divided by the local batch;
- each rank's tables from its fused lookup (``fbgemm::split_embedding_codegen_lookup_
  adagrad_function``: the stacked rows of its weight, its output's width, the indices it
  looks up); the data-parallel tables from ``fbgemm::dense_embedding_codegen_lookup_
  function`` and the dense Adagrad updates of their weights (``aten::addcdiv_`` of
  [rows, dim]).

A fused weight gives a rank's rows summed over its tables, and the indices give its
pooling summed; the job's table sizes are the MLPerf DLRM-DCNv2 Criteo 1TB sizes
(``configs/mlperf-dlrm-dcnv2/README.MD``, ``--num_embeddings_per_feature``), and
:func:`assign_tables` finds, per rank, the set of them whose rows and poolings give
exactly what the traces say (one set per rank).

With ``--write`` the scenario goes to ``resources/scenarios/param_dlrm_8xv100.json``.
The scenario runs TorchRec's pipeline (``"input_pipeline": "torchrec"``), as the job did.
The predictions use the bundled V100 profile (kernels fitted on public data) and four
host tables: the public recordings of other hosts and the project's H200 host (neither
holds anything of this job), this job's own traces (``dgx1-2023``), and the default host
``public-pool`` (which pools this job with the others), for comparison.  Each rank's
prediction is set beside its recorded step (with the other hosts' table, also with each
rank starting when its recording starts: ``predict(..., rank_starts_ms=...)``), and the
phases of the rank that starts last beside the predicted ones.
"""
from __future__ import annotations

import argparse
import gzip
import itertools
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from predictors.traces.et import read_et  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "traces" / "param-dlrm-v100-8rank"
SCENARIO = ROOT / "resources" / "scenarios" / "param_dlrm_8xv100.json"
RANKS = 8
# MLPerf DLRM-DCNv2 (Criteo 1TB, 40M-row cap): rows of the 26 tables, in feature order
CRITEO_1TB_ROWS = (40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000,
                   3067956, 405282, 10, 2209, 11938, 155, 4, 976, 14, 40000000, 40000000,
                   40000000, 590152, 12973, 108, 36)
TBE = "fbgemm::split_embedding_codegen_lookup_adagrad_function"
DENSE_TBE = "fbgemm::dense_embedding_codegen_lookup_function"


def _rank_facts(path: Path) -> dict:
    """What one rank's execution trace says about the model (shapes only)."""
    et = read_et(path)
    ops = et.ops()
    addmm = [n for n in ops if n.name == "aten::addmm"]
    bmm = next(i for i, n in enumerate(ops) if n.name == "aten::bmm")
    first_bmm = ops[bmm].id
    bottom = [n.input_shapes[2] for n in addmm if n.id < first_bmm]
    top = [n.input_shapes[2] for n in addmm if n.id > first_bmm]
    tbe = next(n for n in ops if n.name == TBE)
    dense = next(n for n in ops if n.name == DENSE_TBE)
    batch = next(n for n in addmm if n.id < first_bmm).input_shapes[1][0]
    # the KJT's values per feature, concatenated before the input all-to-all
    lengths = next(n.input_shapes[0] for n in ops if n.name == "aten::cat"
                   and len(n.input_shapes[0]) > 2 and all(len(s) == 1 for s in n.input_shapes[0]))
    dp_tables = dense.input_shapes[1][0]              # weights_offsets: one per table
    dp_dim = dense.output_shapes[0][1] // dp_tables
    # the data-parallel tables' weights get their dense Adagrad update first
    dp_rows = [n.input_shapes[0][0] for n in ops if n.name == "aten::addcdiv_"
               and len(n.input_shapes[0]) == 2 and n.input_shapes[0][1] == dp_dim][:dp_tables]
    if sum(dp_rows) * dp_dim != dense.input_shapes[0][0]:
        raise ValueError(f"{path.name}: the data-parallel tables' rows do not add up")
    global_batch, width = tbe.output_shapes[0]
    return {"batch": batch, "global_batch": global_batch,
            "bottom": [w[1] for w in bottom], "dense_features": bottom[0][0],
            "top": [w[1] for w in top],
            "pooling": [s[0] // batch for s in lengths],
            "tbe_rows": tbe.input_shapes[1][0],   # weights: stacked rows x dim
            "tbe_width": width, "tbe_lookups": tbe.input_shapes[11][0] // global_batch,
            "dp_tables": dp_tables, "dp_width": dense.output_shapes[0][1], "dp_rows": dp_rows}


def assign_tables(facts: list[dict], rows=CRITEO_1TB_ROWS) -> dict[int, int | str]:
    """Each table's rank (``"dp"`` for the data-parallel ones): per rank the one set of
    tables whose rows (x dim) and poolings sum to its fused lookup's weight and indices."""
    pooling = facts[0]["pooling"]
    dim = facts[0]["dp_width"] // facts[0]["dp_tables"]
    dp = sorted(facts[0]["dp_rows"])
    plan: dict[int, int | str] = {}
    for j, r in enumerate(rows):
        if dp and r == dp[0] and pooling[j] == 1 and j not in plan:
            plan[j] = "dp"
            dp.pop(0)
    for rank, f in enumerate(facts):
        free = [j for j in range(len(rows)) if j not in plan]
        k = f["tbe_width"] // dim
        fits = [c for c in itertools.combinations(free, k)
                if sum(rows[j] for j in c) * dim == f["tbe_rows"]
                and sum(pooling[j] for j in c) == f["tbe_lookups"]]
        if len(fits) != 1:
            raise ValueError(f"rank {rank}: {len(fits)} sets of tables fit its fused lookup")
        plan.update({j: rank for j in fits[0]})
    return plan


def scenario_from_et(folder: Path = DATA) -> dict:
    """The job's scenario on ``dgx1-v100``, read off its execution traces."""
    facts = [_rank_facts(folder / f"dlrm_eg_{r}.json.gz") for r in range(RANKS)]
    f = facts[0]
    for key in ("batch", "global_batch", "bottom", "top", "pooling"):
        if any(g[key] != f[key] for g in facts):
            raise ValueError(f"the ranks' execution traces differ in {key}")
    if f["global_batch"] != RANKS * f["batch"]:
        raise ValueError("the pooled all-to-all is not ranks x the local batch")
    dim = f["dp_width"] // f["dp_tables"]
    plan = assign_tables(facts)
    tables = [{"rows": rows, "dim": dim, "pooling": p, "distribution": {"kind": "uniform"}}
              for rows, p in zip(CRITEO_1TB_ROWS, f["pooling"])]
    sharding = {f"tables/{j}": ("dp" if r == "dp" else {"kind": "tw", "rank": r})
                for j, r in sorted(plan.items())}
    nodes = [
        {"id": "dense", "kind": "dense_input", "params": {"features": f["dense_features"]}},
        {"id": "bottom_mlp", "kind": "mlp",
         "params": {"layers": f["bottom"], "activation": "relu", "final": "relu"}},
        {"id": "tables", "kind": "embedding_tables",
         "params": {"tables": tables, "mode": "sum", "kernel": "fused"}},
        {"id": "interaction", "kind": "interaction", "params": {"op": "dot"}},
        {"id": "top_mlp", "kind": "mlp",
         "params": {"layers": f["top"], "activation": "relu", "final": None}},
        {"id": "loss", "kind": "loss", "params": {"kind": "bce"}}]
    edges = [("dense", "bottom_mlp"), ("bottom_mlp", "interaction"), ("tables", "interaction"),
             ("interaction", "top_mlp"), ("top_mlp", "loss")]
    return {"format": "ml-dse/scenario", "version": 1,
            "name": "PARAM TorchRec DLRM on 8 V100 (Criteo 1TB sizes, multi-hot)",
            "model": {"nodes": nodes,
                      "edges": [{"source": s, "target": t} for s, t in edges]},
            "platform": {"preset": "dgx1-v100"},
            "training": {"batch_size": f["global_batch"], "optimizer": "adagrad",
                         "dtype": "float32", "lr": 0.005, "input_pipeline": "torchrec"},
            "parallelism": {"embedding_sharding": sharding},
            "layout": {"model": {"dense": [0, 0], "bottom_mlp": [0, 120],
                                 "tables": [260, 60], "interaction": [130, 240],
                                 "top_mlp": [130, 360], "loss": [130, 480]}}}


def recorded(folder: Path = DATA) -> list[dict]:
    """Each rank's recorded step: its duration, and when it starts and ends (ms on the
    host's clock, from the first rank's start)."""
    steps = []
    for r in range(RANKS):
        path = next(folder.glob(f"worker{r}_step_12.*.pt.trace.json.gz"))
        with gzip.open(path) as f:
            events = json.loads(f.read())["traceEvents"]
        step = next(e for e in events if str(e.get("name", "")).startswith("ProfilerStep"))
        steps.append({"rank": r, "start_us": step["ts"], "ms": step["dur"] / 1e3})
    t0 = min(s["start_us"] for s in steps)
    for s in steps:
        s["start_ms"] = (s.pop("start_us") - t0) / 1e3
        s["end_ms"] = s["start_ms"] + s["ms"]
    return steps


def other_hosts_overheads(folder: Path = DATA):
    """The overheads of every public GPU recording but this job's (none of its own)."""
    from predictors.calibrate.public_traces import discover_jobs
    from predictors.traces.overhead_tables import trace_overheads
    from predictors.traces.recording import load_recording

    jobs = {name: load_recording(files) for name, files, _ in discover_jobs(folder.parent)
            if not name.startswith(folder.name + "/")}
    table, _, _ = trace_overheads(list(jobs.values()), [k.split("/")[0] for k in jobs])
    return table


def phases(folder: Path = DATA, rank: int = 7) -> list[tuple[str, float]]:
    """The recorded step's top-level phases (TorchRec's annotations) on ``rank``, ms."""
    path = next(folder.glob(f"worker{rank}_step_12.*.pt.trace.json.gz"))
    with gzip.open(path) as f:
        events = json.loads(f.read())["traceEvents"]
    top = ("zero_grad", "copy_batch_to_gpu", "wait_for_batch", "forward", "sparse_data_dist",
           "backward", "optimizer")
    spans = [e for e in events if e.get("cat") == "user_annotation"
             and e.get("name", "").strip("# ") in top]
    return [(e["name"].strip("# "), e["dur"] / 1e3) for e in sorted(spans, key=lambda e: e["ts"])]


def predicted_phases(result, rank: int = 7) -> list[tuple[str, float]]:
    """Everything until backward (the pipeline's copy and input distribution and the
    forward: until the autograd thread starts), backward (its span) and the optimizer
    (the rest) of ``rank``'s predicted step, ms."""
    tl = result.timeline
    lane = {ln.name: i for i, ln in enumerate(tl.lanes) if ln.rank == rank}
    mine = np.isin(tl.lane, list(lane.values()))
    t0, end = tl.start_us[mine].min(), (tl.start_us[mine] + tl.dur_us[mine]).max()
    auto = tl.lane == lane["CPU autograd thread"]
    b0, b1 = tl.start_us[auto].min(), (tl.start_us[auto] + tl.dur_us[auto]).max()
    return [("until backward", (b0 - t0) / 1e3), ("backward", (b1 - b0) / 1e3),
            ("optimizer", (end - b1) / 1e3)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true",
                    help=f"write the scenario to {SCENARIO.relative_to(ROOT)}")
    ap.add_argument("--json", metavar="OUT.json", help="also write the rows as JSON")
    args = ap.parse_args()
    if not DATA.is_dir():
        print(f"no traces at {DATA}", file=sys.stderr)
        return 1
    doc = scenario_from_et()
    if args.write:
        SCENARIO.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {SCENARIO.relative_to(ROOT)}")
    from predictors.costs.host_overheads import DEFAULT_HOST
    from predictors.engine.predict import predict
    # host overheads: none from this job (the other public hosts, the project's H200
    # host); this job's own; the default host, which pools it with the others
    steps = recorded()
    others = other_hosts_overheads()
    runs = {"other public hosts": predict(doc, overheads=others),
            # the same, each rank starting when its recording starts
            "other hosts, recorded starts": predict(
                doc, overheads=others, rank_starts_ms=[s["start_ms"] for s in steps]),
            "xeon-vm-2026": predict(doc, host="xeon-vm-2026"),
            "dgx1-2023 (own)": predict(doc, host="dgx1-2023"),
            f"{DEFAULT_HOST} (default)": predict(doc, host=DEFAULT_HOST)}
    last = max(steps, key=lambda s: s["start_ms"])
    print(f"{'rank':>4} {'recorded ms':>11} {'starts at':>9}  " + "  ".join(
        f"{k:>24}" for k in runs))
    rows = []
    for s in steps:
        row = {"rank": s["rank"], "recorded_ms": s["ms"], "start_ms": s["start_ms"]}
        cells = []
        for key, result in runs.items():
            ms = result.per_rank[s["rank"]]["iteration_ms"]
            row[key] = ms
            cells.append(f"{ms:9.3f} ms ({100 * (ms / s['ms'] - 1):+6.1f} %)")
        rows.append(row)
        print(f"{s['rank']:>4} {s['ms']:>11.3f} {s['start_ms']:>8.3f}   " + "  ".join(
            f"{c:>24}" for c in cells))
    slow = max(steps, key=lambda s: s["ms"])
    for key, result in runs.items():
        print(f"{key}: slowest rank predicted {result.iteration_ms:.3f} ms, "
              f"{100 * (result.iteration_ms / slow['ms'] - 1):+.1f} % against rank "
              f"{slow['rank']}'s {slow['ms']:.3f} ms, "
              f"{100 * (result.iteration_ms / last['ms'] - 1):+.1f} % against rank "
              f"{last['rank']}'s {last['ms']:.3f} ms (the last to start)")
    print(f"the ranks start up to {last['start_ms']:.3f} ms apart and end within "
          f"{max(s['end_ms'] for s in steps) - min(s['end_ms'] for s in steps):.3f} ms")
    recorded_phases = phases(rank=last["rank"])
    print(f"rank {last['rank']}, recorded phases: " + ", ".join(
        f"{name} {ms:.2f}" for name, ms in recorded_phases) + " ms")
    ahead = sum(ms for name, ms in recorded_phases if name not in ("backward", "optimizer"))
    print(f"rank {last['rank']}, recorded: until backward {ahead:.2f}, " + ", ".join(
        f"{name} {ms:.2f}" for name, ms in recorded_phases
        if name in ("backward", "optimizer")) + " ms")
    for key, result in runs.items():
        print(f"rank {last['rank']}, predicted ({key}): " + ", ".join(
            f"{name} {ms:.2f}" for name, ms in predicted_phases(result, last["rank"])) + " ms")
    if args.json:
        Path(args.json).write_text(json.dumps({"ranks": rows, "predicted_ms": {
            k: r.iteration_ms for k, r in runs.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
