"""Build the bundled GPU profiles from the public measurements and datasheets, and find a
profile for a device name.

``build_profiles`` fits the GEMM regressor on every GPU of the NeuSight measurements,
validates it (random held-out shapes, leave-one-GPU-out), and writes one profile per
bundled GPU: datasheet figures, measured peaks where public, the GEMM, embedding and
measured-roofline kernel models, provenance and validation figures.
"""
from __future__ import annotations

import datetime as _dt
import time
from pathlib import Path

from ..costs.datasheet import datasheet_profile, gpu_models
from ..costs.gemm_features import DEVICE_FEATURES
from ..hardware.peaks import measured_peaks
from ..hardware.specs import (
    DeviceSpec,
    find_gpu_spec,
    profile_slug,
    unknown_gpu_message,
)
from ..profiles import DeviceProfile, ProfileError, load_profile, save_profile
from ..traces.overhead_tables import overhead_check, trace_overheads
from ..traces.recording import load_recording
from .gemm_fit import (
    DEVICE_WEIGHT,
    HYPERPARAMETERS,
    fit_regressor,
    heldout_validation,
    leave_one_gpu_out,
    training_set,
)
from .public_data import load_neusight, neusight_dir
from .public_traces import TRACES_DIR, discover_jobs

__all__ = ["BUNDLED_GPUS", "PROFILE_DIR", "build_profiles", "profile_slug", "find_gpu_spec",
           "profile_for_device", "datasheet_profile", "attach_trace_overheads"]

PROFILE_DIR = Path(__file__).resolve().parents[2] / "resources" / "profiles" / "gpu"
BUNDLED_GPUS = ("Tesla V100-SXM2-32GB", "Tesla V100-PCIE-32GB", "NVIDIA A100-SXM4-40GB",
                "NVIDIA A100-PCIE-40GB", "NVIDIA H100 80GB HBM3", "NVIDIA H200")
_METRIC = ("GMAE = geometric mean over shapes of |predicted / measured latency - 1|; "
           "latency = kernel + the GPU's measurement overhead (NeuSight times whole ops)")


def _provenance(spec: DeviceSpec, trained_on: list[str], gemm_info: dict, kind: str) -> dict:
    in_data = spec.name in trained_on
    return {
        "kind": kind,
        "device_figures": f"datasheet: {spec.source}",
        "gemm": ("fitted from public measurements: ../shared/data/microbench/neusight-gemm "
                 f"(sitar-lab/NeuSight, MIT; fp32 linear, PyTorch 2.1) on {', '.join(trained_on)}"
                 f"; {gemm_info.get('regressor')} on log(kernel/roofline), pooled with one "
                 "that does not see the absolute device figures; "
                 + ("this GPU is in the training data" if in_data else
                    "this GPU is not in the training data: predicted from its datasheet "
                    "figures")),
        "peaks": measured_peaks(spec).source,
        "embedding": "HiPC 2022 L2 hit-rate traffic model on the peaks above (not fitted; "
                     "no public embedding measurements in ../shared/data)",
        "other_kernels": "roofline with the peaks above and a small-size efficiency curve",
        "overheads": "none in this profile: the default GPU overheads apply (run "
                     "`kernels build-profiles --overheads-only` with ../shared/data present)",
        "built_by": "python -m predictors kernels build-profiles",
    }


def build_profiles(out_dir: str | Path = PROFILE_DIR, *, regressor: str = "gbm", seed: int = 0,
                   validate: bool = True, gpus=BUNDLED_GPUS, data_dir=None,
                   log=print) -> list[Path]:
    """Fit, validate and write the bundled GPU profiles; returns the written paths."""
    out_dir = Path(out_dir)
    data = load_neusight(data_dir or neusight_dir())
    ts = training_set(data)
    trained_on = [d.name for d in data]
    validation = {"metric": _METRIC}
    if validate:
        t0 = time.perf_counter()
        validation["heldout"] = heldout_validation(ts, regressor, seed=seed)
        log(f"held-out validation: GMAE {validation['heldout']['all']['gmae']:.3f} "
            f"({time.perf_counter() - t0:.0f} s)")
        t0 = time.perf_counter()
        validation["leave_one_gpu_out"] = leave_one_gpu_out(ts, regressor, seed=seed)
        log("leave-one-GPU-out: " + ", ".join(
            f"{k} {v['gmae']:.3f}" for k, v in validation["leave_one_gpu_out"].items())
            + f" ({time.perf_counter() - t0:.0f} s)")
    t0 = time.perf_counter()
    reg = fit_regressor(regressor, ts.X, ts.y, seed)
    log(f"final fit on {len(ts.y)} shapes of {len(trained_on)} GPUs "
        f"({time.perf_counter() - t0:.0f} s)")
    gemm_info = {"regressor": regressor, "hyperparameters": {
        k: list(v) if isinstance(v, tuple) else v for k, v in HYPERPARAMETERS[regressor].items()},
        "pooling": {"device_weight": DEVICE_WEIGHT, "device_features": list(DEVICE_FEATURES),
                    "note": "log(kernel/roofline) = device_weight x regressor on every feature "
                            "+ (1 - device_weight) x regressor without device_features"},
        "seed": seed, "trained_on": trained_on, "shapes": int(len(ts.y)),
        "measurement_overhead_ms": {d.name: round(d.overhead_ms, 4) for d in data}}
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in gpus:
        spec = find_gpu_spec(name)
        if spec is None:
            raise KeyError(f"unknown GPU {name!r}")
        kind = "fitted"
        val = dict(validation)
        if validate:
            if spec.name in trained_on:
                val["this_gpu"] = {"heldout": validation["heldout"]["per_gpu"][spec.name],
                                   "as_unseen": validation["leave_one_gpu_out"][spec.name]}
            else:
                val["this_gpu"] = {"note": "not measured: see leave_one_gpu_out for how the "
                                           "model does on GPUs it never saw"}
        profile = DeviceProfile(spec.name, kind, spec,
                                kernel_models=gpu_models(spec, reg, gemm_info),
                                provenance=_provenance(spec, trained_on, gemm_info, kind)
                                | {"built": _dt.date.today().isoformat()},
                                validation=val)
        paths.append(save_profile(profile, out_dir / f"{profile_slug(spec.name)}.json"))
        log(f"wrote {paths[-1]}")
    if TRACES_DIR.is_dir():
        attach_trace_overheads(paths, log=log)
    return paths


def attach_trace_overheads(paths: list[Path], traces_dir: Path = TRACES_DIR,
                           log=print) -> dict:
    """Measure T1-T5 and launch maps on every public GPU recording, pool them, and store
    them in the profiles at ``paths`` with a leave-one-host-out check of the pooling."""

    t0 = time.perf_counter()
    jobs = {name: load_recording(files) for name, files, _ in discover_jobs(traces_dir)}
    if not jobs:
        raise FileNotFoundError(f"no recorded GPU traces under {traces_dir}")
    hosts = {name: name.split("/")[0] for name in jobs}  # a folder: one source, one host
    table, lmap, info = trace_overheads(list(jobs.values()), list(hosts.values()))
    check = overhead_check(jobs, hosts)
    log(f"overheads: {info['ops']} dispatch-level ops of {len(jobs)} jobs, {info['op_names']} op "
        f"entries ({time.perf_counter() - t0:.0f} s); leave-one-host-out dispatch time: "
        + ", ".join(f"{k.split('/')[0]} {v['error_pct']:+.0f}%" for k, v in check.items()
                    if v["error_pct"] is not None))
    for path in paths:
        profile = load_profile(path)
        if profile.kind == "measured":  # its own host's overheads, measured on the device
            log(f"{path}: a measured profile, left as it is")
            continue
        profile.overheads, profile.launch_map = table, lmap
        profile.provenance["overheads"] = (
            f"{table.source}; T1-T5 per dispatch-level aten op (predictors/traces/overhead_tables.py). Hosts "
            "and profiler settings differ: see validation.overheads for how well the pool "
            "predicts a job it did not see")
        profile.validation["overheads"] = {
            "metric": "leave one host out: the CPU dispatch time of a recorded job's "
                      "dispatch-level ops predicted from the other hosts' pooled overheads",
            "jobs": {k: {"ops": v["ops"], "recorded_ms": round(v["recorded_ms"], 3),
                         "predicted_ms": round(v["predicted_ms"], 3),
                         "error_pct": None if v["error_pct"] is None
                         else round(v["error_pct"], 1)} for k, v in check.items()},
            "files": info["files"]}
        save_profile(profile, path)
        log(f"overheads added to {path}")
    return check


def profile_for_device(name: str, profile_dir: str | Path = PROFILE_DIR) -> DeviceProfile:
    """The profile of a GPU by the name it reports, a bundled profile slug, or a path.

    A known GPU without a bundled profile gets a datasheet profile; an unknown name raises
    ``KeyError`` with the known names.
    """
    path = Path(name)
    if path.suffix == ".json" and path.is_file():
        prof = load_profile(path)
        if prof.device.kind != "gpu":
            raise ProfileError(f"{path}: describes a CPU ({prof.device.name}), not a GPU")
        return prof
    profile_dir = Path(profile_dir)
    slug = profile_slug(name)
    candidate = profile_dir / f"{slug}.json"
    if candidate.is_file():
        return load_profile(candidate)
    spec = find_gpu_spec(name)
    if spec is not None:
        bundled = profile_dir / f"{profile_slug(spec.name)}.json"
        if bundled.is_file():
            return load_profile(bundled)
        templates = sorted(profile_dir.glob("*.json"))
        if templates:
            return datasheet_profile(spec, load_profile(templates[0]))
        raise ProfileError(f"no GPU profiles in {profile_dir}: run "
                           "`python -m predictors kernels build-profiles`")
    profiles = sorted(p.stem for p in profile_dir.glob("*.json"))
    raise KeyError(unknown_gpu_message(
        name, extra=f"; bundled profiles: {', '.join(profiles)}" if profiles else ""))
