"""The host catalogue (``resources/hosts``): build it, and check how its hosts transfer.

    .venv/bin/python benchmarks/host_overheads.py build     # needs ../shared/data/traces
    .venv/bin/python benchmarks/host_overheads.py check [--json OUT.json]

``build`` writes one host per source of CPU overheads:

- ``dgx1-2023``: the PARAM DLRM traces (``param-dlrm-v100-8rank``), a DGX-1 recorded
  with shapes and an execution trace, PyTorch 2.1-era;
- ``public-pool``: every public GPU recording in ``../shared/data/traces``, each host's
  mean per op, the least over the hosts (2021-2024 hosts and profiler settings);
- ``xeon-vm-2026``: the host of the project's H200 measurements (a Xeon VM, torch 2.11),
  the overheads of ``resources/profiles/gpu/nvidia-h200-measured.json``.

``check`` predicts the project's measured H200 steps (the four machine starts in
``resources/measurements/nvidia-h200-2026-11-29*``) with the H200 profile fitted on
public data on each host, BERT-base at batch 32 on every GPU preset of one host, and the
PARAM V100 DLRM (``resources/scenarios/param_dlrm_8xv100.json``) on each host.
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from predictors.costs.host_overheads import HOSTS_DIR, Host, load_host  # noqa: E402

H200_STARTS = tuple(ROOT / "resources" / "measurements" / f"nvidia-h200-2026-11-29{s}"
                    for s in ("", "-seed7", "-rerun", "-seed11"))
PRESETS = ("v100-1", "a100-1", "h100-1", "h200-1", "dgx1-v100", "dgx-a100", "dgx-h100",
           "dgx-h200")


def cmd_build(args) -> int:
    from predictors.calibrate.public_traces import TRACES_DIR, discover_jobs
    from predictors.profiles import load_profile
    from predictors.traces.overhead_tables import trace_overheads
    from predictors.traces.recording import load_recording

    jobs = {name: load_recording(files) for name, files, _ in discover_jobs(TRACES_DIR)}
    dlrm = {k: v for k, v in jobs.items() if k.startswith("param-dlrm-v100-8rank/")}
    table, _, _ = trace_overheads(list(dlrm.values()), [k.split("/")[0] for k in dlrm])
    pool, _, _ = trace_overheads(list(jobs.values()), [k.split("/")[0] for k in jobs])
    measured = load_profile(ROOT / "resources" / "profiles" / "gpu" /
                            "nvidia-h200-measured.json")
    hosts = [
        Host("dgx1-2023", "DGX-1, PyTorch 2.1-era, public traces", "2x Xeon (DGX-1)",
             "2.1-era (execution trace schema 1.0.1)", "Tesla V100-SXM2-32GB",
             "../shared/data/traces/param-dlrm-v100-8rank (facebookresearch/param, MIT): "
             "8 ranks of one TorchRec DLRM step, recorded with shapes", table),
        Host("public-pool", "every public GPU recording, pooled", "6 hosts", "1.8-2.x",
             "V100, A100, H100, RTX 2080 Ti",
             "../shared/data/traces: each host's mean per op, the least over hosts", pool),
        Host("xeon-vm-2026", "the project's H200 host: a Xeon VM, torch 2.11",
             measured.provenance.get("cpu_signature") or "Intel(R) Xeon(R) Processor (VM)",
             "2.11.0+cu130", measured.device.name,
             "resources/measurements/nvidia-h200-2026-11-29 (profiled steps on the H200)",
             measured.overheads),
    ]
    HOSTS_DIR.mkdir(parents=True, exist_ok=True)
    for host in hosts:
        path = HOSTS_DIR / f"{host.name}.json"
        path.write_text(json.dumps(host.to_json(), indent=1) + "\n")
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


def cmd_check(args) -> int:
    from predictors.calibrate.cuda_profile import load_measurements
    from predictors.calibrate.gpu_profiles import profile_for_device
    from predictors.costs.host_overheads import host_names, profile_on_host
    from predictors.engine.predict import predict
    from predictors.utils.metrics import format_summary, summarize

    out: dict = {"h200": {}, "bert": {}, "param_dlrm": {}}
    fitted = profile_for_device("NVIDIA H200")
    on_host = {name: profile_on_host(fitted, load_host(name)) for name in host_names()}
    for folder in H200_STARTS:
        rows = [r for r in load_measurements(folder)["scenarios"] if r.get("measure")]
        print(f"H200 steps of {folder.name} ({len(rows)}), the H200 profile fitted on "
              "public data, on each host:")
        for name, prof in on_host.items():
            errs = [predict(r["doc"], profile=prof).iteration_ms
                    / r["measure"]["iteration_ms"] - 1 for r in rows]
            out["h200"].setdefault(folder.name, {})[name] = [round(100 * e, 1) for e in errs]
            print(f"  {name:14s} {format_summary(summarize(errs))}")
    bert = json.loads((ROOT / "resources" / "scenarios" / "bert_base.json").read_text())
    print("BERT-base, batch 32, on the default host:")
    for preset in PRESETS:
        d = copy.deepcopy(bert)
        d["platform"] = {"preset": preset}
        d["training"]["batch_size"] = 32
        r = predict(d)
        out["bert"][preset] = round(r.iteration_ms, 2)
        print(f"  {preset:10s} {r.iteration_ms:8.2f} ms  ({r.profile})")
    dlrm = json.loads((ROOT / "resources" / "scenarios" / "param_dlrm_8xv100.json").read_text())
    print("PARAM DLRM on 8 V100 (recorded 12.51 ms from the last rank's start, 19.90 ms on "
          "the slowest rank):")
    for name in host_names():
        r = predict(dlrm, host=name)
        out["param_dlrm"][name] = round(r.iteration_ms, 3)
        print(f"  {name:14s} {r.iteration_ms:8.3f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build").set_defaults(fn=cmd_build)
    c = sub.add_parser("check")
    c.add_argument("--json", metavar="OUT.json")
    c.set_defaults(fn=cmd_check)
    args = ap.parse_args()
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
