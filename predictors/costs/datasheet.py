"""Kernel models for a GPU from its datasheet, and the profile of a GPU that has no bundled
one: its datasheet figures priced by the models of the public-data profiles; a GPU without
measurements of its own takes the measured GEMM models of a GPU of the same compute."""
from __future__ import annotations

import dataclasses
from functools import lru_cache

import numpy as np

from ..hardware.generations import arch_of
from ..hardware.peaks import measured_peaks
from ..hardware.specs import DeviceSpec, find_gpu_spec
from ..profiles import (
    DeviceProfile,
    ProfileError,
    bundled_profiles,
    load_profile,
    resolve_profile,
)
from .gemm_features import figures_from_spec
from .gpu_embedding import EmbeddingLookupModel
from .gpu_gemm import GemmKernelModel
from .gpu_roofline import MeasuredRooflineModel, public_op_efficiency
from .tensor_core_gemm import TensorCoreGemmModel

__all__ = ["gpu_models", "datasheet_profile", "datasheet_default", "same_compute",
           "with_measured_sibling", "power_cap_note", "LOW_POWER_WATTS"]

# Boards of this power and less (T4 70 W, P4 75 W, L4 72 W) run large GEMMs power-capped:
# in the public GEMM measurements the T4 and the P4 sustain 39 % and 18 % of their
# datasheet FP32 peak on products of 1024 and more in every dimension
# (python benchmarks/gpu_gemm.py), where the 250 W boards sustain 63-87 %.
LOW_POWER_WATTS = 75.0
_PROBE = 4096  # the square fp32 GEMM the note quotes a sustained share for


def gpu_models(spec: DeviceSpec, regressor, gemm_info: dict) -> dict:
    """The kernel models of a GPU profile: the measured roofline for most ops, the GEMM
    regressor on the GPU's figures, the embedding L2 model on its peaks (later models
    override earlier ones where both apply, as :func:`~.op_costs.cost_op_graph` walks
    them)."""
    peaks = measured_peaks(spec)
    return {"other": MeasuredRooflineModel(spec, peaks,
                                           op_efficiency=public_op_efficiency(peaks)),
            "gemm": GemmKernelModel(figures_from_spec(spec), regressor, info=gemm_info),
            "embedding": EmbeddingLookupModel(peaks, clock_mhz=spec.clock_mhz)}


def _sustained_share(gemm, spec: DeviceSpec) -> float:
    """The GEMM model's predicted share of ``spec``'s datasheet FP32 peak on a
    :data:`_PROBE`-cubed product."""
    model = gemm.with_figures(figures_from_spec(spec))
    ms = float(np.ravel(model.predict_shapes(1, _PROBE, _PROBE, _PROBE))[0])
    return 2.0 * _PROBE ** 3 / (ms * 1e-3) / spec.flops("float32")


def power_cap_note(spec: DeviceSpec, gemm) -> str | None:
    """A warning for a board of at most :data:`LOW_POWER_WATTS` that the GEMM model never
    measured: its datasheet peak assumes a boost clock that such boards drop under
    sustained load, and the model prices it from datasheet figures alone.  The measured
    low-power boards' shares, as the model reproduces them, set the scale.  None for
    other boards, or when no such board is in the model's training data."""
    if not 0 < spec.board_watts <= LOW_POWER_WATTS:
        return None
    trained = list(getattr(gemm, "info", {}).get("trained_on", []))
    if spec.name in trained:
        return None
    low = [s for s in map(find_gpu_spec, trained)
           if s is not None and 0 < s.board_watts <= LOW_POWER_WATTS]
    if not low:
        return None
    seen = " and ".join(f"{_sustained_share(gemm, s):.0%} ({s.name}, {s.board_watts:.0f} W)"
                        for s in low)
    return (f"power: the {spec.name} is a {spec.board_watts:.0f} W board, which no GEMM "
            f"measurement covers: its fp32 GEMMs are priced at "
            f"{_sustained_share(gemm, spec):.0%} of its datasheet peak (a {_PROBE}^3 "
            f"product), where the model, fitted on their measurements, gives the boards "
            f"of {LOW_POWER_WATTS:.0f} W or less {seen}. Such boards cap their clock under "
            "sustained load: these GEMM times may be optimistic")


def datasheet_profile(spec: DeviceSpec, template: DeviceProfile) -> DeviceProfile:
    """A profile for a GPU without a bundled one: its datasheet figures with the GEMM
    regressor of ``template``, peaks derived from the datasheet, and ``template``'s CPU
    overheads (the host's, not the GPU's: the public profiles pool them from recorded
    traces)."""
    gemm = template.kernel_models["gemm"]
    info = dict(getattr(gemm, "info", {}))
    overheads = (f"those of the bundled {template.name} profile"
                 + (f" ({template.overheads.source})" if template.overheads else ""))
    power = power_cap_note(spec, gemm)
    return DeviceProfile(spec.name, "datasheet", spec, overheads=template.overheads,
                         launch_map=dict(template.launch_map),
                         kernel_models=gpu_models(spec, gemm.regressor, info),
                         provenance={"kind": "datasheet",
                                     "device_figures": f"datasheet: {spec.source}",
                                     "gemm": f"regressor of the bundled {template.name} profile "
                                             "applied to this GPU's datasheet figures",
                                     "peaks": measured_peaks(spec).source,
                                     "overheads": overheads,
                                     **({"power_cap": power} if power else {})},
                         validation={k: v for k, v in template.validation.items()
                                     if k != "this_gpu"})


@lru_cache(maxsize=32)
def datasheet_default(device_name: str) -> DeviceProfile | None:
    """The datasheet profile of a known GPU, from the first bundled profile fitted on
    public data; None for an unknown GPU or without such a profile."""
    spec = find_gpu_spec(device_name)
    if spec is None:
        return None
    for path in bundled_profiles():
        try:
            template = load_profile(path)
        except (OSError, ValueError, KeyError):
            continue
        if template.device.kind == "gpu" and template.kind == "fitted" \
                and "gemm" in template.kernel_models:
            return datasheet_profile(spec, template)
    return None


def same_compute(a: DeviceSpec, b: DeviceSpec) -> bool:
    """Two GPUs of one compute die at one clock (the H100 SXM and the H200): the same
    generation, SMs, lanes per SM, boost clock, L2 and matrix peaks; their memory may
    differ."""
    return (a.kind == b.kind == "gpu" and arch_of(a.name) == arch_of(b.name) != "unknown"
            and (a.sms, a.cores_per_sm, a.clock_mhz, a.l2_bytes) ==
            (b.sms, b.cores_per_sm, b.clock_mhz, b.l2_bytes) and a.sms > 0
            and a.peak_flops == b.peak_flops)


@lru_cache(maxsize=32)
def _measured_sibling(device_name: str) -> DeviceProfile | None:
    """A bundled measured profile of another GPU with the same compute, or None."""
    spec = find_gpu_spec(device_name)
    if spec is None:
        return None
    for path in bundled_profiles():
        try:
            prof = resolve_profile(str(path))
        except (OSError, ValueError, KeyError, ProfileError):
            continue
        if prof.kind == "measured" and prof.device.name != spec.name \
                and same_compute(spec, prof.device):
            return prof
    return None


# derived profiles by the id of their input, which each entry keeps alive (so the same
# input gives the same object, and the caches keyed on it stay warm)
_WITH_SIBLING: dict[int, tuple[DeviceProfile, DeviceProfile]] = {}


def with_measured_sibling(profile: DeviceProfile | None) -> DeviceProfile | None:
    """``profile`` (fitted on public data, or from the datasheet) with the GEMM models that
    ``calibrate --device cuda`` measured on a GPU of the same compute, bound to this GPU's
    own figures (its memory bandwidth prices the memory-bound GEMMs); as it is where no
    such GPU is measured.  A GEMM's time on one die at one clock does not depend on which
    board carries it: the H200's measured models price the H100's GEMMs of a public
    trace within 17 % where the public-data models are 48 % off."""
    if profile is None or profile.kind == "measured" or profile.device.kind != "gpu":
        return profile
    hit = _WITH_SIBLING.get(id(profile))
    if hit is not None and hit[0] is profile:
        return hit[1]
    derived = _with_sibling_gemms(profile)
    _WITH_SIBLING[id(profile)] = (profile, derived)
    return derived


def _with_sibling_gemms(profile: DeviceProfile) -> DeviceProfile:
    sibling = _measured_sibling(profile.device.name)
    if sibling is None:
        return profile
    figures = figures_from_spec(profile.device)
    models = dict(profile.kernel_models)
    taken = []
    for key, model in sibling.kernel_models.items():
        if isinstance(model, TensorCoreGemmModel):
            models[key] = TensorCoreGemmModel(figures, model.half_peak, model.regressor,
                                              min_kernel_ms=model.min_kernel_ms,
                                              info=model.info, dtypes=model.dtypes)
            taken.append("/".join(model.dtypes))
    if not taken:
        return profile
    note = (f"{', '.join(taken)} GEMMs: the models measured on the {sibling.device.name} "
            f"(the same compute: {profile.device.sms} SMs at {profile.device.clock_mhz:.0f} "
            "MHz), on this GPU's figures")
    return dataclasses.replace(profile, kernel_models=models,
                               provenance={**profile.provenance, "gemm_sibling": note})
