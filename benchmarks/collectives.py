"""The collective model (predictors/costs/collectives.py) against measured collectives.

    .venv/bin/python benchmarks/collectives.py [--data ../shared/data] [--fit]

First the public nccl-tests tables of resources/measurements/nccl-tests-public (A100 and H100,
one and two nodes, each with its source): per size the measured and predicted bus bandwidth
and the error, then geomean / mean / worst per system and op over 32 KiB .. 512 MiB
(``public_tables``).  The tables marked "fit" fit the model's few fitted constants
(``--fit`` re-derives them); the others only validate.  Then three sources read in place
from ../shared/data (nothing is copied into the repository):

1. V100, 8 ranks, one DGX-1-class node (param-dlrm-v100-8rank): message sizes from the
   execution traces (``record_param_comms`` nodes, the ``wait`` ones skipped), kernel
   durations from the Kineto traces.  A kernel's recorded duration includes waiting for the
   slowest peer, so the transfer time of the q-th collective is its shortest duration over
   the 8 ranks (the last rank to arrive did not wait).
2. A100, aicb collective benchmark (A100_example.csv): each call is timed around the call, so
   every figure carries a host-side floor (~75 us even for 4-byte messages).  The floor is
   estimated from the calls of 64 KiB or less (median of measured - model) and added to the
   model; only messages of 1 MiB or more are compared (here 8 MiB to 33 GiB).
3. A100, HTA DDP sample, 2 ranks (hta-a100-ddp-2rank): rank 0 only, so every duration
   includes waiting for rank 1; a loose check (the model must not exceed the fastest
   recorded call by more than 25 %), not part of any error figure.

Error: the geomean absolute error exp(mean |ln(predicted / measured)|) - 1, which is
symmetric in over- and under-prediction (0.25 means "off by a factor 1.25 on average").
"""
from __future__ import annotations

import argparse
import csv
import glob
import gzip
import json
import math
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from predictors.costs.collectives import (
    CONSTANTS,
    arch_of,
    bus_factor,
    collective_kind,
    collective_time,
    platform_collective,
)
from predictors.hardware.platforms import LINK_KINDS, resolve_platform
from predictors.utils.metrics import format_summary, gmae, summarize

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
PUBLIC = ROOT / "resources" / "measurements" / "nccl-tests-public" / "tables.json"
REPORT_MIN, REPORT_MAX = 32 << 10, 512 << 20   # the sizes every summary covers
HARNESS_MAX = 1 << 10       # a -g N run's rows up to this size give its host floor
V100_DIR = Path("traces") / "param-dlrm-v100-8rank"
A100_CSV = Path("microbench") / "aicb-a100-collectives" / "A100_example.csv"
HTA_FILE = Path("traces") / "hta-a100-ddp-2rank" / "rank0.json.gz"

LARGE_BYTES = 1 << 20       # aicb rows compared: 1 MiB and more (here 8 MiB .. 33 GiB)
TINY_BYTES = 64 << 10       # aicb rows that measure the host floor: 64 KiB and less
HTA_SLACK = 1.25            # HTA: model <= 1.25 x fastest recorded call
_DTYPE_BYTES = {"float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2,
                "bfloat16": 2, "long": 8, "int64": 8, "int": 4, "int32": 4, "byte": 1,
                "char": 1, "bool": 1, "short": 2}


def pairs_gmae(pairs) -> float:
    """The geomean |error| (:func:`predictors.utils.metrics.gmae`) of (predicted, measured)
    pairs."""
    pairs = list(pairs)
    return gmae([p for p, _ in pairs], [m for _, m in pairs])


# ----------------------------------------------------------------------------------- V100
def _et_collectives(path) -> list[dict]:
    """The collectives of one execution trace, in issue order: kind, sent and received bytes."""
    with gzip.open(path) as f:
        et = json.load(f)
    out = []
    for node in sorted(et["nodes"], key=lambda n: n["id"]):
        if node.get("name") != "record_param_comms":
            continue
        inp = node.get("inputs", [])
        if len(inp) < 5 or not isinstance(inp[4], str) or inp[4] == "wait":
            continue
        tensor = inp[0]
        while tensor and isinstance(tensor[0], list):   # allreduce: a list of tensors
            tensor = tensor[0]
        numel, elem = int(tensor[3]), int(tensor[4])
        kind = collective_kind(inp[4])
        sent = received = numel * elem
        in_splits = inp[5] if len(inp) > 5 and isinstance(inp[5], list) else []
        out_splits = inp[6] if len(inp) > 6 and isinstance(inp[6], list) else []
        if in_splits and sum(in_splits) > 0:
            row_bytes = numel * elem / sum(in_splits)   # splits count rows of dim 0
            sent = sum(in_splits) * row_bytes
            received = sum(out_splits) * row_bytes if out_splits else sent
        out.append({"name": inp[4], "kind": kind, "sent": sent, "received": received})
    return out


def v100_rows(data: Path = SHARED_DATA) -> list[dict]:
    """One row per collective of the recorded DLRM step: sizes, shortest kernel, model."""
    from predictors.traces.kineto import Kind
    from predictors.traces.recording import load_recording

    d = Path(data) / V100_DIR
    ets = [_et_collectives(d / f"dlrm_eg_{r}.json.gz") for r in range(8)]
    rec = load_recording(sorted(glob.glob(str(d / "worker*.pt.trace.json.gz"))))
    ranks = len(rec.traces)
    kernels = []   # per rank: [(name, dur)] of its NCCL kernels in start order
    for tr in rec.traces:
        sel = [i for i in range(len(tr)) if tr.kind[i] == Kind.KERNEL
               and collective_kind(tr.names[tr.name_id[i]]) is not None]
        sel.sort(key=lambda i: tr.ts[i])
        kernels.append([(tr.names[tr.name_id[i]], float(tr.dur[i])) for i in sel])
    n_coll = len(ets[0])
    if any(len(k) != n_coll for k in kernels) or any(len(e) != n_coll for e in ets):
        raise ValueError("the ranks' NCCL kernels and ET collectives do not pair up one to one")
    arch = arch_of(rec.traces[0].device_name)
    rows = []
    for q in range(n_coll):
        kinds = {e[q]["kind"] for e in ets}
        if len(kinds) != 1:
            raise ValueError(f"collective {q}: ranks disagree on its kind: {kinds}")
        kind = kinds.pop()
        kname = kernels[0][q][0]
        kk = collective_kind(kname)
        # NCCL runs all-to-all as grouped send/recv.
        if not (kk == kind or (kk == "send_recv" and kind == "all_to_all")):
            raise ValueError(f"collective {q}: kernel {kname!r} is not a {kind}")
        nbytes = max(max(e[q]["sent"], e[q]["received"]) for e in ets)
        durs = [kernels[r][q][1] for r in range(ranks)]
        est = collective_time(kind, nbytes, ranks, LINK_KINDS["nvlink2"], arch)
        rows.append({"q": q, "op": ets[0][q]["name"], "kind": kind, "nbytes": nbytes,
                     "kernel": kname.split("(")[0], "measured_us": min(durs),
                     "fastest_rank": durs.index(min(durs)), "predicted_us": est.us,
                     "algorithm": est.algorithm, "protocol": est.protocol})
    return rows


# ----------------------------------------------------------------------------------- A100
def a100_rows(data: Path = SHARED_DATA) -> dict:
    """aicb rows grouped by (type, group, size): medians, group size, model; see module doc."""
    with open(Path(data) / A100_CSV, newline="") as f:
        raw = list(csv.DictReader(f))
    sizes_of_group = defaultdict(set)
    for r in raw:
        if r["comm_group_size"].isdigit():
            sizes_of_group[r["comm_group"]].add(int(r["comm_group_size"]))
    groups, excluded = defaultdict(list), []
    for r in raw:
        kind = collective_kind(r["comm_type"])
        if kind is None or r["stage"].startswith("init"):
            continue   # epoch markers; set-up calls (first-call warm-up of seconds)
        size = int(float(r["msg_size"]))
        if size <= 0:
            continue
        if r["comm_group_size"].isdigit():
            n = int(r["comm_group_size"])
        elif len(sizes_of_group[r["comm_group"]]) == 1:
            # The same torch group as its rows that state the size.
            n = next(iter(sizes_of_group[r["comm_group"]]))
        else:
            n = None
        groups[(kind, r["comm_group"].split(".")[-1], n, size)].append(
            float(r["_elapsed_time"]) * 1e3)
    rows = []
    arch, bw = arch_of("NVIDIA A100-SXM4"), LINK_KINDS["nvlink3"]
    for (kind, group, n, size), times in sorted(groups.items(),
                                                key=lambda kv: (kv[0][0], kv[0][3])):
        row = {"kind": kind, "group": group, "ranks": n, "nbytes": size, "calls": len(times),
               "measured_us": statistics.median(times)}
        if n is None:
            row["why_excluded"] = "group size unknown (no row of this group states it)"
            excluded.append(row)
            continue
        row["model_us"] = collective_time(kind, size, n, bw, arch).us
        rows.append(row)
    tiny = [r["measured_us"] - r["model_us"] for r in rows if r["nbytes"] <= TINY_BYTES]
    floor = statistics.median(tiny)
    large = []
    for r in rows:
        r["predicted_us"] = r["model_us"] + floor
        if r["nbytes"] >= LARGE_BYTES:
            kernel_us = r["measured_us"] - floor
            wire = bus_factor(r["kind"], r["ranks"]) * r["nbytes"]
            r["busbw_measured"] = wire / (kernel_us * 1e-6)
            r["busbw_model"] = wire / (r["model_us"] * 1e-6)
            large.append(r)
    return {"rows": rows, "large": large, "excluded": excluded, "floor_us": floor,
            "tiny_calls": len(tiny)}


def aicb_summaries(a: dict) -> dict:
    """Bus-bandwidth error summaries per collective of the aicb groups of 1 MiB and more."""
    groups = defaultdict(list)
    for r in a["large"]:
        groups[r["kind"]].append(r["busbw_model"] / r["busbw_measured"] - 1)
    return {k: summarize(v) for k, v in sorted(groups.items())}


# ----------------------------------------------------------------------------------- HTA
def hta_rows(data: Path = SHARED_DATA) -> list[dict]:
    """Rank 0's NCCL kernels of the 2-rank DDP sample, fastest call per (kind, size)."""
    with gzip.open(Path(data) / HTA_FILE) as f:
        doc = json.load(f)
    dev = doc.get("deviceProperties", [{}])[0].get("name", "")
    arch = arch_of(dev)
    best = {}
    for e in doc["traceEvents"]:
        a = e.get("args") or {}
        if e.get("cat") != "kernel" or "Collective name" not in a:
            continue
        kind = collective_kind(e["name"]) or collective_kind(a["Collective name"])
        elem = _DTYPE_BYTES.get(str(a.get("dtype", "")).lower(), 4)
        key = (kind, int(a["In msg nelems"]) * elem, int(a.get("Group size", 2)))
        best[key] = min(best.get(key, float("inf")), float(e["dur"]))
    rows = []
    for (kind, nbytes, n), dur in sorted(best.items()):
        est = collective_time(kind, nbytes, n, LINK_KINDS["nvlink3"], arch)
        rows.append({"kind": kind, "nbytes": nbytes, "ranks": n, "fastest_us": dur,
                     "predicted_us": est.us, "protocol": est.protocol,
                     "ok": est.us <= HTA_SLACK * dur})
    return rows


# ----------------------------------------------------------------------------------- public
def public_tables(path: Path = PUBLIC) -> list[dict]:
    """The transcribed nccl-tests tables (``resources/measurements/nccl-tests-public``), one
    entry per table and rank count, every row predicted on the table's platform preset.

    nccl-tests times a loop of back-to-back calls.  Where one process drove several GPUs
    (``-g N``), each call also issued N kernel launches from one thread, so a call never
    took less than that host floor: the median time of the table's own calls of 1 KiB or
    less (all below the reported sizes).  Such rows are predicted as
    ``max(floor, model)``; one-process-per-GPU runs as the model alone.
    """
    with open(path) as f:
        doc = json.load(f)
    out = []
    for t in doc["tables"]:
        sets = t["by_ranks"].items() if "by_ranks" in t else [(t["ranks"], t["rows"])]
        platform = resolve_platform({"preset": t["platform"]})
        for n, rows in sets:
            n = int(n)
            per_gpu = t.get("gpus_per_process", n if "by_ranks" in t else 1)
            tiny = [us for b, us in rows if b <= HARNESS_MAX]
            floor = statistics.median(tiny) if per_gpu > 1 and tiny else 0.0
            entry = {**{k: t[k] for k in ("id", "url", "system", "op", "nodes", "role")},
                     "ranks": n, "gpus_per_process": per_gpu, "floor_us": floor, "rows": []}
            factor = bus_factor(t["op"], n)
            for nbytes, us in rows:
                est = platform_collective(t["op"], nbytes, platform, n)[0]
                pred = max(floor, est.us)
                entry["rows"].append({
                    "nbytes": nbytes, "measured_us": us, "predicted_us": pred,
                    "busbw_measured": factor * nbytes / us / 1e3,
                    "busbw_predicted": factor * nbytes / pred / 1e3,
                    "error": us / pred - 1,      # bus-bandwidth error: predicted / measured - 1
                    "how": "host floor" if pred > est.us else f"{est.algorithm}/{est.protocol}"})
            out.append(entry)
    return out


def reported(entry: dict) -> list[dict]:
    """The rows of a table inside the reported sizes (32 KiB .. 512 MiB)."""
    return [r for r in entry["rows"] if REPORT_MIN <= r["nbytes"] <= REPORT_MAX]


def public_summaries(entries: list[dict]) -> dict[tuple, object]:
    """Bus-bandwidth error summaries (:func:`~predictors.utils.metrics.summarize`) per
    (system, op, ranks, role) over the reported sizes."""
    groups = defaultdict(list)
    for e in entries:
        groups[(e["system"], e["op"], e["ranks"], e["role"])] += [r["error"]
                                                                  for r in reported(e)]
    return {k: summarize(v) for k, v in groups.items() if v}


def fit_constants(entries: list[dict]) -> dict[str, float]:
    """The fitted constants, re-derived from the tables marked ``fit`` (``--fit``): each one
    minimises the mean |log(predicted / measured)| of its rows in the reported sizes."""
    import numpy as np

    from predictors.costs import collectives as model

    saved = {key: dict(model.CONSTANTS[key]) for key, _, _, _ in FITS}

    def loss(key, sub, value, tables):
        old = model.CONSTANTS[key][sub]
        model.CONSTANTS[key][sub] = value
        try:
            rows = [r for e in public_tables() if e["id"] in tables for r in reported(e)]
            return float(np.mean([abs(math.log(1 + r["error"])) for r in rows]))
        finally:
            model.CONSTANTS[key][sub] = old

    fits = {}
    for _ in range(2):          # coordinate descent: each constant given the others' fit
        for key, sub, tables, grid in FITS:
            best = grid[int(np.argmin([loss(key, sub, v, tables) for v in grid]))]
            model.CONSTANTS[key][sub] = float(best)
            fits[f"{key}[{sub}]"] = float(best)
    for key, values in saved.items():
        model.CONSTANTS[key].update(values)
    return fits


# (constant, generation, the tables it is fitted on, the values tried).  Only tables marked
# "fit" in tables.json serve: #290's 8-GPU NVLS all-reduce, the 4-GPU all-gather and one of
# #309's two-node tables; every other table only validates.
FITS = [("nvls_eff", "hopper", {"h100x8-node005-allreduce"},
         [x / 1000 for x in range(400, 950, 2)]),
        ("nvlink_eff", "hopper", {"h100x4-hgx-allgather"},
         [x / 1000 for x in range(500, 950, 2)]),
        ("simple_lat_us", "hopper", {"h100x4-hgx-allgather"}, [x / 2 for x in range(161)]),
        ("nvls_tree_net_lat_us", "hopper", {"h100x16-gj-allreduce"},
         [float(x) for x in range(5, 121)])]
_FIT_IDS = {t["id"] for t in json.loads(PUBLIC.read_text())["tables"] if t["role"] == "fit"}
assert all(ids <= _FIT_IDS for _, _, ids, _ in FITS), "a constant fitted on a validation table"


def print_public(entries: list[dict]) -> None:
    print("Public nccl-tests results (resources/measurements/nccl-tests-public/tables.json), "
          f"sizes {REPORT_MIN >> 10} KiB .. {REPORT_MAX >> 20} MiB")
    for e in entries:
        rows = reported(e)
        if not rows:
            continue
        floor = (f"; -g {e['gpus_per_process']} host floor {e['floor_us']:.1f} us"
                 if e["floor_us"] else "")
        print(f"\n{e['system']}: {e['op']}, {e['ranks']} ranks, {e['nodes']} node(s) "
              f"[{e['role']}]{floor}\n  {e['url']}")
        print(f"  {'size':>10} {'measured':>10} {'busbw meas':>10} {'busbw pred':>10} "
              f"{'error':>7}  model")
        for r in rows:
            print(f"  {_size(r['nbytes']):>10} {r['measured_us']:>8.1f}us "
                  f"{r['busbw_measured']:>6.1f}GB/s {r['busbw_predicted']:>6.1f}GB/s "
                  f"{r['error']:>+7.1%}  {r['how']}")
    print("\nBus-bandwidth error per system and op (32 KiB .. 512 MiB):")
    for (system, op, n, role), s in sorted(public_summaries(entries).items(),
                                           key=lambda kv: (kv[0][3], kv[0][0], kv[0][1])):
        print(f"  {role:<10} {system[:44]:<44} {op:<14} n={n:<3} {format_summary(s)}")


# ----------------------------------------------------------------------------------- print
def _size(b: float) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            return f"{b / div:.1f} {unit}"
    return f"{b:.0f} B"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.fspath(SHARED_DATA), help="the shared data folder")
    ap.add_argument("--fit", action="store_true",
                    help="re-derive the fitted constants from the tables marked 'fit'")
    args = ap.parse_args(argv)
    data = Path(args.data)
    if args.fit:
        for name, value in fit_constants(public_tables()).items():
            print(f"{name} = {value:.3f}   (CONSTANTS: "
                  f"{CONSTANTS[name.split('[')[0]][name.split('[')[1][:-1]]})")
        return 0
    print_public(public_tables())
    print()
    if not data.is_dir():
        print(f"no data at {data}")
        return 1

    rows = v100_rows(data)
    print("V100 x8 (DGX-1 class, NVLink2 150 GB/s), DLRM step 12: shortest kernel over 8 ranks")
    print(f"{'#':>2} {'ET op':<12} {'kernel':<44} {'bytes':>10} {'measured':>9} {'model':>8} "
          f"{'err':>6}  model's choice")
    for r in rows:
        err = r["predicted_us"] / r["measured_us"] - 1
        print(f"{r['q']:>2} {r['op']:<12} {r['kernel']:<44} {r['nbytes']:>10.0f} "
              f"{r['measured_us']:>7.1f}us {r['predicted_us']:>6.1f}us {err:>+6.0%}  "
              f"{r['algorithm']}/{r['protocol']}")
    v_err = pairs_gmae([(r["predicted_us"], r["measured_us"]) for r in rows])
    print(f"geomean absolute error over the {len(rows)} collectives: {v_err:.1%}")
    print("  all_to_allv sizes: the largest of any rank's sent or received bytes "
          "(the uneven one is bounded by rank 3 receiving 52 KiB).")
    print("  Kernel names carry the algorithm but not the protocol: NCCL 2.x builds one kernel "
          "per algorithm\n  (named ..._LL) and one SendRecv kernel (named ..._SIMPLE) and runs "
          "the chosen protocol inside.\n")

    a = a100_rows(data)
    print("A100 x8 node (NVLink3 300 GB/s), aicb: median call time; predicted = model + host "
          f"floor {a['floor_us']:.1f} us\n  (floor = median of measured - model over "
          f"{a['tiny_calls']} call groups of <= 64 KiB)")
    print(f"{'kind':<15} {'group':<9} {'n':>2} {'bytes':>10} {'calls':>5} {'measured':>10} "
          f"{'predicted':>10} {'err':>6} {'busbw meas':>10} {'busbw model':>11}")
    for r in a["large"]:
        err = r["predicted_us"] / r["measured_us"] - 1
        print(f"{r['kind']:<15} {r['group']:<9} {r['ranks']:>2} {_size(r['nbytes']):>10} "
              f"{r['calls']:>5} {r['measured_us']:>8.1f}us {r['predicted_us']:>8.1f}us "
              f"{err:>+6.0%} {r['busbw_measured'] / 1e9:>7.1f}GB/s "
              f"{r['busbw_model'] / 1e9:>8.1f}GB/s")
    a_err = pairs_gmae([(r["predicted_us"], r["measured_us"]) for r in a["large"]])
    print(f"geomean absolute error over the {len(a['large'])} large-message groups: {a_err:.1%}")
    print("  bus-bandwidth error per op (busbw model / busbw measured - 1, the floor "
          "taken off the call):")
    for kind, s in aicb_summaries(a).items():
        print(f"    {kind:<15} {format_summary(s)}")
    print("  n: the group's size; rows whose comm_group_size is 'None' take the size the same "
          "group states\n  in its other rows (tp_group 2, dp_group 4; aicb runs every call of a "
          "group on one torch group).")
    print("  measured busbw = bus bytes / (median - floor), with the group's own size; the "
          "CSV's busbw column\n  uses (8-1)/8 for every group (2- and 4-rank ones too), so it "
          "is not used.")
    small = [r for r in a["rows"] if TINY_BYTES < r["nbytes"] < LARGE_BYTES]
    print(f"  excluded: {len(a['rows']) - len(a['large']) - len(small)} call groups of <= 64 KiB "
          "(they set the floor: their time is the host overhead);")
    print("            set-up calls (stage init.*: first-call warm-up) and 0-byte calls;")
    for r in a["excluded"]:
        opts = ", ".join(
            f"n={n}: {collective_time(r['kind'], r['nbytes'], n, LINK_KINDS['nvlink3']).us + a['floor_us']:.0f}us"
            for n in (2, 4, 8))
        print(f"            {r['kind']} {r['group']} {_size(r['nbytes'])} measured "
              f"{r['measured_us']:.0f}us: {r['why_excluded']} (model {opts})")

    print("\nA100 x2 (HTA DDP sample, rank 0 only: durations include waiting for rank 1)")
    print(f"{'kind':<11} {'bytes':>10} {'fastest call':>12} {'model':>8}  check (model <= "
          f"{HTA_SLACK} x fastest)")
    for r in hta_rows(data):
        print(f"{r['kind']:<11} {_size(r['nbytes']):>10} {r['fastest_us']:>10.1f}us "
              f"{r['predicted_us']:>6.1f}us  {'ok' if r['ok'] else 'MODEL SLOWER'}")
    print("  not in any error figure: the all-reduces wait for rank 1's backward pass "
          "(milliseconds), only the\n  broadcasts at start-up are close to transfer times.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
