"""Kernel models for a GPU from its datasheet, and the profile of a GPU that has no bundled
one: its datasheet figures priced by the models of the public-data profiles."""
from __future__ import annotations

from functools import lru_cache

from ..hardware.peaks import measured_peaks
from ..hardware.specs import DeviceSpec, find_gpu_spec
from ..profiles import DeviceProfile, bundled_profiles, load_profile
from .gemm_features import figures_from_spec
from .gpu_embedding import EmbeddingLookupModel
from .gpu_gemm import GemmKernelModel
from .gpu_roofline import MeasuredRooflineModel, public_op_efficiency

__all__ = ["gpu_models", "datasheet_profile", "datasheet_default"]


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


def datasheet_profile(spec: DeviceSpec, template: DeviceProfile) -> DeviceProfile:
    """A profile for a GPU without a bundled one: its datasheet figures with the GEMM
    regressor of ``template``, peaks derived from the datasheet, and ``template``'s CPU
    overheads (the host's, not the GPU's: the public profiles pool them from recorded
    traces)."""
    gemm = template.kernel_models["gemm"]
    info = dict(getattr(gemm, "info", {}))
    overheads = (f"those of the bundled {template.name} profile"
                 + (f" ({template.overheads.source})" if template.overheads else ""))
    return DeviceProfile(spec.name, "datasheet", spec, overheads=template.overheads,
                         launch_map=dict(template.launch_map),
                         kernel_models=gpu_models(spec, gemm.regressor, info),
                         provenance={"kind": "datasheet",
                                     "device_figures": f"datasheet: {spec.source}",
                                     "gemm": f"regressor of the bundled {template.name} profile "
                                             "applied to this GPU's datasheet figures",
                                     "peaks": measured_peaks(spec).source,
                                     "overheads": overheads},
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
