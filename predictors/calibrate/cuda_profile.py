"""A measured GPU profile from a folder of :mod:`cuda_collect` measurements.

It starts from the GPU's bundled (or datasheet) profile, whose GEMM model was trained on
public measurements, and replaces what the measurements know better:

- the peaks its roofline uses: device-to-device copy bandwidth, the fp32 GEMM rate and
  an L2-resident copy's bandwidth;
- the CPU overheads T1-T5 and the launch map, from the profiled training steps of this
  host: on the measured H200 machine the bundled overheads (pooled from the public
  traces of other hosts) predict its steps within 9-17 % (geomean), and this host's own
  traces bring the same scenarios to 5-9 % (leave one out).

The folder's scenarios also validate the profile: each one's iteration is predicted with
overheads pooled from the *other* scenarios' traces (leave one out) and compared with its
measured (unprofiled) iteration.
"""
from __future__ import annotations

import functools
import gzip
import json
import math
import tempfile
import zlib
from pathlib import Path

import numpy as np

from ..costs.gemm_features import figures_from_spec
from ..costs.gpu_roofline import (
    MeasuredRooflineModel,
    fit_op_efficiency,
    fit_op_floor,
)
from ..costs.tensor_core_gemm import FP32_DTYPES, HALF_DTYPES, TensorCoreGemmModel
from ..engine.predict import predict
from ..hardware.peaks import MeasuredPeaks
from ..profiles import DeviceProfile, ProfileError
from ..traces.overhead_tables import trace_overheads
from ..traces.recording import load_recording
from ..utils.metrics import geomean_abs, gmae
from .gpu_profiles import profile_for_device

__all__ = ["load_measurements", "profile_from_measurements", "scenario_errors",
           "calibrate_cuda", "gpu_end_to_end"]


def load_measurements(folder: str | Path) -> dict:
    """``measurements.json`` (or ``.json.gz``) of a folder, with ``folder`` added."""

    folder = Path(folder)
    for name in ("measurements.json", "measurements.json.gz"):
        path = folder / name
        if path.is_file():
            try:
                raw = gzip.decompress(path.read_bytes()) if name.endswith(".gz") else \
                    path.read_bytes()
                doc = json.loads(raw)
            except (OSError, EOFError, zlib.error) as exc:  # gzip's errors are OSErrors
                raise ProfileError(f"{path}: cannot read: {exc}") from None
            except ValueError as exc:
                raise ProfileError(f"{path}: not valid JSON ({exc})") from None
            if not isinstance(doc, dict) or doc.get("format") != "ml-dse-measurements":
                raise ProfileError(f"{path}: not a measurements file (format "
                                   f"{doc.get('format') if isinstance(doc, dict) else None!r})")
            if not isinstance(doc.get("device"), dict) or "name" not in doc["device"]:
                raise ProfileError(f"{path}: device: no GPU name recorded")
            doc["folder"] = str(folder)
            return doc
    raise ProfileError(f"{folder}: no measurements.json (run `python -m predictors "
                       "calibrate --device cuda` on the GPU first)")


def _recordings(doc: dict) -> dict[int, object]:
    """Each traced scenario's recording (index -> Recording)."""

    out = {}
    for row in doc.get("scenarios") or []:
        if row.get("trace") and row.get("measure"):
            out[row["index"]] = load_recording([str(Path(doc["folder"]) / row["trace"])])
    return out


# Binary elementwise ops of the kernel sweep: 12 bytes per element (two read, one written).
_STREAM_OPS = ("add", "mul", "sgd_dense")


def stream_fit(doc: dict, l2_bytes: float) -> dict | None:
    """What the folder's elementwise kernels stream at and cost when tiny: ``{"gbps",
    "floor_us", "n"}``, or None without a kernel sweep.  Bandwidth: the median over the
    sweep's sizes of four L2s or more (``peaks.dram_stream_gbps`` where measured);
    floor: the median of ``time - bytes / bandwidth`` over sizes under 64 KiB."""
    rows = [(12.0 * k["numel"], k["ms"] * 1e-3) for k in doc.get("kernels") or []
            if k.get("op") in _STREAM_OPS and k.get("ms") and k.get("numel")]
    big = [b / s for b, s in rows if b >= 4 * l2_bytes]
    measured = (doc.get("peaks") or {}).get("dram_stream_gbps")
    if not (big or measured):
        return None
    bw = measured * 1e9 if measured else float(np.median(big))
    tiny = [s - b / bw for b, s in rows if b < 65536]
    floor = float(np.median(tiny)) if tiny else None
    return {"gbps": bw / 1e9, "floor_us": None if floor is None else floor * 1e6,
            "n": len(rows)}


def _peaks(doc: dict, base, stream: dict | None):
    """The measured peaks of ``doc`` (``base``'s where it has none).  DRAM bandwidth: what
    elementwise kernels stream at (``stream``: :func:`stream_fit`), else the
    device-to-device copy's (cudaMemcpy's path: 0.64x the kernels' on the H200)."""

    p = doc.get("peaks") or {}
    if not p.get("dram_copy_gbps") or not p.get("gemm_fp32_tflops"):
        return base
    dram = stream["gbps"] if stream else p["dram_copy_gbps"]
    how = ("elementwise kernels streaming beyond L2" if stream
           else "a 1 GiB device-to-device copy")
    return MeasuredPeaks(p["gemm_fp32_tflops"] * 1e12, dram * 1e9,
                         p.get("l2_copy_gbps", base.l2_bw / 1e9) * 1e9, base.l2_bytes,
                         base.sms, f"measured on {doc['device'].get('name')} "
                         f"({doc['device'].get('date')}): DRAM from {how}, "
                         "an 8192^3 fp32 GEMM (TF32 off), an L2-resident copy")


MIN_GEMMS = 100  # per precision: fewer measured GEMMs keep the model the profile had


def _gemm_models(doc: dict, base: DeviceProfile, extra: list[dict] = ()) -> dict:
    """GEMM models fitted on the measured GEMMs of ``doc`` (and of ``extra`` folders of
    the same GPU): ``gemm_half`` (fp16/bf16) and ``gemm_fp32``, each where at least
    :data:`MIN_GEMMS` were measured."""

    spec, out = base.device, {}
    sources = [doc, *extra]
    for key, dtypes, peak_dtype, label in (("gemm_half", HALF_DTYPES, "bfloat16", "fp16/bf16"),
                                           ("gemm_fp32", FP32_DTYPES, "float32", "fp32")):
        rows = [r for d in sources for r in d.get("gemm") or []
                if r.get("ms") and r.get("dtype") in dtypes]
        if len(rows) < MIN_GEMMS:
            continue
        starts = ", ".join(sorted({f"{d['device'].get('date')}" for d in sources
                                   if any(r.get("dtype") in dtypes for r in d.get("gemm") or [])}))
        fit = functools.partial(TensorCoreGemmModel.fit, figures_from_spec(spec),
                                spec.flops(peak_dtype), dtypes=dtypes)
        out[key] = fit(rows, info={"source": f"fitted on {len(rows)} {label} GEMMs measured "
                                             f"on {doc['device'].get('name')} ({starts})",
                                   "samples": len(rows),
                                   "held_out": _held_out(fit, rows)})
    return out


def _held_out(fit, rows: list[dict], seed: int = 0) -> dict:
    """The per-op-class validation of a measured GEMM model (the Profiles tab's table):
    fitted on four in five rows, GMAE and MAPE on the fifth."""


    order = np.random.default_rng(seed).permutation(len(rows))
    cut = len(rows) * 4 // 5
    held = [rows[i] for i in order[cut:]]
    pred = fit([rows[i] for i in order[:cut]]).predict_rows(held)
    measured = np.array([r["ms"] for r in held])
    return {"samples": len(rows), "held_out": len(held), "chosen": "trees",
            "trees": {"gmae": gmae(pred, measured),
                      "mape": float(np.mean(np.abs(pred / measured - 1.0)))}}


def _measured_parts(folder: str | Path, base: DeviceProfile | None = None,
                    gemms_from: list = ()) -> tuple:
    """What a profile takes from ``folder`` whichever scenarios are left out: the
    measurements, the base profile, its kernel models with the measured peaks and the
    GEMM models fitted on the measured GEMMs (of ``gemms_from`` folders too), the launch
    map of the traces (predictions do not read it, so every fold shares it) and every
    traced scenario's step aligned with its capture."""

    doc = load_measurements(folder)
    if base is None:
        try:
            base = profile_for_device(doc["device"]["name"])
        except KeyError as exc:
            raise ProfileError(f"{folder}: {exc.args[0]}") from None
    models = dict(base.kernel_models)
    other = models.get("other")
    if isinstance(other, MeasuredRooflineModel):
        stream = stream_fit(doc, other.peaks.l2_bytes)
        peaks = _peaks(doc, other.peaks, stream)
        if stream and stream["floor_us"] is not None:  # the tiny kernels' own time
            models["other"] = MeasuredRooflineModel(
                other.spec, peaks, floor_ms=max(stream["floor_us"], 0.5) * 1e-3,
                half_bytes=0.0)
        else:
            models["other"] = MeasuredRooflineModel(other.spec, peaks, floor_ms=other.floor_ms)
    embedding = models.get("embedding")
    if embedding is not None and hasattr(embedding, "peaks") and "other" in models:
        models["embedding"] = type(embedding)(models["other"].peaks,
                                              default_distribution=embedding.default_distribution,
                                              kernel_floor_ms=embedding.kernel_floor_ms,
                                              clock_mhz=embedding.clock_mhz,
                                              bag_forward=embedding.bag_forward)
    extra = []
    for other_folder in gemms_from:
        more = load_measurements(other_folder)
        if more["device"].get("name") != doc["device"].get("name"):
            raise ProfileError(f"{other_folder}: measured on {more['device'].get('name')}, "
                               f"not on {doc['device'].get('name')}")
        extra.append(more)
    gemms = _gemm_models(doc, base, extra)
    # after "gemm" and "other": they override the public model and the roofline
    models.update(gemms)
    recordings = _recordings(doc)
    launch_map = base.launch_map
    if recordings:

        _, launch_map, _ = trace_overheads(list(recordings.values()),
                                           ["this host"] * len(recordings))
    return doc, base, models, gemms, launch_map, _aligned_steps(doc, recordings)


def _aligned_steps(doc: dict, recordings: dict) -> dict:
    """Each traced scenario's step aligned with its capture (index -> StepProfile)."""
    from .cuda_overheads import aligned_step  # deferred: imports torch

    return {row["index"]: aligned_step(row["doc"], recordings[row["index"]],
                                       row["measure"]["iteration_ms"])
            for row in doc.get("scenarios") or []
            if row.get("measure") and row["index"] in recordings}


def _assemble(doc: dict, base: DeviceProfile, models: dict, gemms: dict, launch_map: dict,
              steps: dict, exclude: set[int] = frozenset()) -> DeviceProfile:
    """The measured profile, T1-T5 from the traced steps not in ``exclude``, per
    captured op (:mod:`.cuda_overheads`)."""
    from .cuda_overheads import aligned_overheads  # deferred: imports torch

    dev = doc["device"]
    kept = [s for i, s in steps.items() if i not in exclude]
    overheads = base.overheads
    fitted = {}
    if kept:
        overheads, fitted = aligned_overheads(
            kept, f"measured from {len(kept)} profiled training steps "
                  f"({sum(len(s.records) for s in kept):,} ops aligned with their "
                  f"captures) on {dev.get('host')} ({dev.get('cpu_model')}, torch "
                  f"{dev.get('torch')})")
    models = dict(models)
    other = models.get("other")
    efficiency = {}
    floors = {}
    if kept and isinstance(other, MeasuredRooflineModel):
        samples = [(r["node"], r.get("kernel_us")) for step in kept for r in step.records]
        floors = fit_op_floor(other, samples)
        other = MeasuredRooflineModel(other.spec, other.peaks, floor_ms=other.floor_ms,
                                      half_bytes=other.half_bytes,
                                      op_floor_ms={k: v["floor_ms"] for k, v in floors.items()})
        efficiency = fit_op_efficiency(other, samples)
        other.op_efficiency = {k: v["efficiency"] for k, v in efficiency.items()}
        models["other"] = other
    provenance = {
        "kind": "measured", "source": "calibrated on this GPU by `python -m predictors "
                                      "calibrate --device cuda`",
        "host": dev.get("host"), "gpu": dev.get("name"), "cpu_model": dev.get("cpu_model"),
        "torch": dev.get("torch"), "cuda": dev.get("cuda"), "date": dev.get("date"),
        "peaks": (doc.get("peaks") or {}),
        "gemm": gemms["gemm_fp32"].info["source"] if "gemm_fp32" in gemms else
        f"model of the bundled {base.name} profile (public measurements)",
        "overheads": overheads.source if overheads is not None else "none",
        "gemm_half": gemms["gemm_half"].info["source"] if "gemm_half" in gemms else
        "no half-precision GEMMs measured: the roofline",
        "profiled_steps": len(kept),
        "other_kernels": (f"roofline with the measured peaks; {len(efficiency)} ops stream at "
                          f"their own share of the DRAM bandwidth and {len(floors)} have "
                          "their own floor, fitted on "
                          f"{sum(v['n'] for v in (*efficiency.values(), *floors.values())):,}"
                          " of their kernels in the traced steps" if efficiency or floors
                          else "roofline with the measured peaks"),
        "profiler_us_per_event": fitted.get("profiler_us_per_event")}
    validation = dict(base.validation)
    labels = {"gemm_half": "gemm fp16/bf16 (measured)", "gemm_fp32": "gemm fp32 (measured)"}
    classes = {labels[k]: m.info["held_out"] for k, m in gemms.items()
               if "held_out" in m.info}
    if classes:
        validation["classes"] = classes
    return DeviceProfile(dev["name"], "measured", base.device, overheads, launch_map,
                         models, provenance, validation)


def profile_from_measurements(folder: str | Path, *, exclude: set[int] = frozenset(),
                              base: DeviceProfile | None = None,
                              gemms_from: list = ()) -> DeviceProfile:
    """The measured profile of the GPU in ``folder`` (``exclude``: scenario indices whose
    traces stay out of the overheads, for leave-one-out validation; ``gemms_from``:
    other folders of the same GPU whose GEMMs are fitted too)."""
    return _assemble(*_measured_parts(folder, base, gemms_from), exclude)


def scenario_errors(folder: str | Path, *, profile: DeviceProfile | None = None,
                    gemms_from: list = (), only: set[int] | None = None) -> list[dict]:
    """Predicted against measured iteration of every measured scenario in ``folder``:
    with ``profile`` as it is, or (without one) with this folder's profile whose
    overheads come from the *other* scenarios' traces (leave one out; the models and
    recordings are made once; ``gemms_from`` as for :func:`profile_from_measurements`).
    ``only``: the scenario indices to predict (default all)."""

    parts = _measured_parts(folder, gemms_from=gemms_from) if profile is None else None
    doc = parts[0] if parts is not None else load_measurements(folder)
    rows = []
    for row in doc.get("scenarios") or []:
        if not row.get("measure") or (only is not None and row["index"] not in only):
            continue
        prof = profile if profile is not None else _assemble(*parts, {row["index"]})
        pred = predict(row["doc"], profile=prof)
        measured = row["measure"]["iteration_ms"]
        step = parts[5].get(row["index"]) if parts is not None else None
        rows.append({"index": row["index"], "scenario": row["doc"]["name"],
                     "measured_ms": measured, "predicted_ms": pred.iteration_ms,
                     "error_pct": 100.0 * (pred.iteration_ms / measured - 1.0),
                     "spread_pct": row["measure"].get("spread_pct"),
                     "device_active_ms": pred.per_rank[0]["device_active_ms"],
                     "kernels": _step_kernels(step, prof) if step is not None else []})
    return rows


def _step_kernels(step, prof: DeviceProfile) -> list[tuple[str, float, float]]:
    """``(model class, recorded us, predicted us)`` of every captured op of a traced step
    that launched device work, predicted with ``prof`` (the whole step at once)."""
    from ..costs.op_costs import kernel_seconds  # deferred: imports torch

    nodes = [r["node"] for r in step.records]
    _, seconds, models = kernel_seconds(nodes, prof.device, prof)
    return [(m.split(" ")[0], r["kernel_us"], s * 1e6)
            for r, s, m in zip(step.records, seconds, models) if r.get("kernel_us")]


# The Profiles tab's rows for the kernel classes of a leave-one-out validation: (label,
# the model that priced them).
_IN_STEP_LABELS = {"gemm": ("in-step GEMM kernels", "GEMM models"),
                   "gemm_fp32": ("in-step GEMM kernels", "GEMM models"),
                   "gemm_half": ("in-step GEMM kernels", "GEMM models"),
                   "embedding": ("in-step embedding kernels", "L2/latency"),
                   "other": ("in-step roofline-op kernels", "roofline")}


def in_step_classes(rows: list[dict]) -> dict:
    """Per kernel class, the error of the held-out scenarios' traced kernels (each
    predicted by the fold that left its scenario out), as the Profiles tab's table reads
    validation classes: ``{label: {"samples", "held_out", "chosen", <chosen>: {"gmae",
    "mape"}}}``."""
    ratios: dict[tuple, list[float]] = {}
    for row in rows:
        for cls, recorded, predicted in row.get("kernels") or []:
            if recorded > 0 and cls in _IN_STEP_LABELS:
                ratios.setdefault(_IN_STEP_LABELS[cls], []).append(predicted / recorded)
    out = {}
    for (label, model), r in ratios.items():
        err = np.abs(np.asarray(r) - 1.0)
        out[label] = {"samples": len(r), "held_out": len(r), "chosen": model,
                      model: {"gmae": geomean_abs(err),
                              "mape": float(np.mean(err))}}
    return out


def gpu_end_to_end(rows: list[dict], provenance: dict, command: str) -> dict:
    """A GPU validation in the shape ``validate --record`` gives CPU profiles (the
    Profiles tab reads both): when, how, the summary and every scenario."""
    geomean = geomean_abs(r["error_pct"] / 100 for r in rows)
    return {"date": provenance.get("date"), "host": provenance.get("host"),
            "command": command,
            "summary": {"scenarios": len(rows),
                        "geomean_abs_error": None if math.isnan(geomean) else geomean},
            "rows": [{"scenario": r["scenario"], "measured_ms": round(r["measured_ms"], 3),
                      "predicted_ms": round(r["predicted_ms"], 3),
                      "error": round(r["error_pct"] / 100, 4),
                      "noise": None if r["spread_pct"] is None
                      else round(r["spread_pct"] / 100, 4)} for r in rows]}


def with_validation(prof: DeviceProfile, folder: str | Path, progress=None,
                    gemms_from: list = ()) -> tuple[DeviceProfile, list[dict]]:
    """``prof`` with its leave-one-scenario-out validation first in ``validation``."""
    if progress is not None:
        progress(0.97, "validating: each scenario predicted from the others' overheads")
    rows = scenario_errors(folder, gemms_from=gemms_from)
    end_to_end = gpu_end_to_end(rows, prof.provenance, "python -m predictors calibrate "
                                "--device cuda (leave one scenario out: each predicted with "
                                "overheads from the other scenarios' traces)")
    prof.validation = {"end_to_end": end_to_end, **prof.validation}
    classes = in_step_classes(rows)
    if classes:
        prof.validation["classes"] = {**prof.validation.get("classes", {}), **classes}
    return prof, rows


def calibrate_cuda(budget_s: float = 600.0, seed: int = 0, folder: str | Path | None = None,
                   progress=None, cancelled=None, log=None) -> tuple[DeviceProfile, list[dict]]:
    """Measure this machine's CUDA GPU into ``folder`` (a new temporary folder by default)
    and return its profile, validated, with the validation rows.  Raises
    :class:`ProfileError` without a GPU and ``Cancelled`` on cancel."""

    import torch  # deferred: torch

    from .cuda_collect import (  # deferred: imports torch
        calibration_gemm_shapes,
        collect,
        gpu_scenarios,
    )

    if not torch.cuda.is_available():
        raise ProfileError("no CUDA GPU here (torch.cuda.is_available() is False)")
    name = torch.cuda.get_device_name()
    folder = Path(folder) if folder else Path(tempfile.mkdtemp(prefix="ml-dse-cuda-"))
    collect(folder, device="cuda", scenarios=gpu_scenarios(name, seed),
            gemm_shapes=calibration_gemm_shapes(seed), kernels=False, budget_s=budget_s, log=log,
            progress=progress, cancelled=cancelled)
    prof = profile_from_measurements(folder)
    prof.provenance["measurements"] = str(folder)
    return with_validation(prof, folder, progress)
