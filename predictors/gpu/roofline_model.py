"""Roofline with measured peaks and a small-size efficiency curve, for the kernels that
have no learned model (elementwise, reductions, copies, concat, and GEMMs in dtypes the
GEMM model does not cover).

``time = floor + max(FLOPs / (peak x eff_c), bytes / (DRAM bw x eff_m(bytes)))`` with
``eff_m(bytes) = bytes / (bytes + b_half)``: a kernel moving ``b_half`` bytes reaches half
of the bandwidth (too few bytes in flight to hide DRAM latency; ``b_half`` = bandwidth x
~1 us, about one wave of SMs each streaming a few KB).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..devices.roofline import attention_efficiency, kernel_cost
from ..devices.specs import DeviceSpec
from ..profiles import KERNEL_MODEL_TYPES
from .peaks import MeasuredPeaks

__all__ = ["MeasuredRooflineModel"]

# Fraction of the measured FP32 peak that non-GEMM compute reaches (transcendentals,
# reductions); GEMMs in other dtypes use the datasheet tensor peak x GEMM_EFFICIENCY.
VECTOR_EFFICIENCY = 0.5
GEMM_EFFICIENCY = 0.7
# A dense tensor updated with sparse rows (SGD on an embedding table: ``index_add_`` with
# atomics at random rows) reaches this share of the copy bandwidth on the roofline's
# bytes (H200, session 5: 0.43-0.53 over three GPU-sized DLRMs).
SPARSE_UPDATE_EFFICIENCY = 0.5
# ``index_put_(..., accumulate=True)`` (the backward of advanced indexing: DLRM's
# interaction reads the pairs ``Z[:, li, lj]``) runs CUDA's sort-based path, whose
# accumulate kernel reads the values with a stride: latency-bound, far off the roofline.
# On the H200 traces of session 5 it took 7-1380 us for 14k-5.75M values, 0.20-0.24 ns
# per value from 225k on (the roofline said 3-47 us): this many bytes of copy bandwidth
# per value (0.22 ns x 2.7 TB/s).
ACCUMULATE_BYTES_PER_VALUE = 600.0
_INDEX_PUT = ("_index_put_impl_", "index_put_", "index_put")


def _accumulated_values(node: dict) -> int:
    """How many values an accumulating ``index_put`` adds in (0: not one)."""
    if node["name"].split("::")[-1] not in _INDEX_PUT:
        return 0
    flags = [a for a in node.get("scalars") or [] if isinstance(a, bool)]
    shapes = node.get("input_shapes") or []
    if not flags or not flags[0] or len(shapes) < 2:
        return 0
    return int(np.prod(shapes[-1], dtype=float))


class MeasuredRooflineModel:
    """Every non-view op: FLOPs and bytes from :func:`predictors.devices.roofline.kernel_cost`,
    time from measured peaks with the small-size curve."""

    op_class = "other"
    type_name = "gpu-roofline-measured"

    def __init__(self, spec: DeviceSpec, peaks: MeasuredPeaks, *, floor_ms: float = 0.002,
                 half_bytes: float | None = None):
        self.spec = spec
        self.peaks = peaks
        self.floor_ms = float(floor_ms)
        self.half_bytes = float(half_bytes if half_bytes is not None else peaks.dram_bw * 1e-6)

    def time_ms(self, flops, nbytes, category="elementwise", dtype="float32") -> np.ndarray:
        flops, nbytes = np.asarray(flops, dtype=float), np.asarray(nbytes, dtype=float)
        if category == "gemm":
            peak = (self.peaks.fp32_flops if dtype == "float32"
                    else self.spec.flops(dtype) * GEMM_EFFICIENCY)
        else:
            peak = self.peaks.fp32_flops * VECTOR_EFFICIENCY
        mem = (nbytes + self.half_bytes * (nbytes > 0)) / self.peaks.dram_bw
        return self.floor_ms + 1e3 * np.maximum(flops / peak, mem)

    def predict_ms(self, nodes: list[dict]) -> np.ndarray:
        out = np.full(len(nodes), np.nan)
        for i, node in enumerate(nodes):
            try:
                cost = kernel_cost(node, self.spec)
            except (IndexError, KeyError, TypeError, ValueError):
                continue
            if cost.category == "view":
                continue
            dtype = (node.get("input_dtypes") or ["float32"])[0]
            if cost.category != "gemm" and any(
                    n is not None for n in (node.get("input_nnz") or [])[1:]):
                mem = cost.bytes / (self.peaks.dram_bw * SPARSE_UPDATE_EFFICIENCY)
                out[i] = self.floor_ms + 1e3 * mem
                continue
            values = _accumulated_values(node)
            if values:
                mem = (values * ACCUMULATE_BYTES_PER_VALUE + self.half_bytes) / self.peaks.dram_bw
                out[i] = self.floor_ms + 1e3 * mem
                continue
            eff = attention_efficiency(node["name"].split("::")[-1], dtype)
            if eff is not None:  # fused attention: its own share of the datasheet peak
                mem = cost.bytes / self.peaks.dram_bw
                out[i] = self.floor_ms + 1e3 * max(cost.flops / (self.spec.flops(dtype) * eff),
                                                   mem)
                continue
            out[i] = self.time_ms(cost.flops, cost.bytes, cost.category, dtype)
        return out

    def to_json(self) -> tuple[dict, dict]:
        return ({"type": self.type_name, "op_class": self.op_class,
                 "spec": dataclasses.asdict(self.spec), "peaks": self.peaks.to_json(), "floor_ms": self.floor_ms,
                 "half_bytes": self.half_bytes, "vector_efficiency": VECTOR_EFFICIENCY,
                 "gemm_efficiency_other_dtypes": GEMM_EFFICIENCY}, {})

    @classmethod
    def from_json(cls, meta: dict, arrays: dict) -> "MeasuredRooflineModel":
        names = {f.name for f in dataclasses.fields(DeviceSpec)}
        spec = DeviceSpec(**{k: v for k, v in meta["spec"].items() if k in names})
        peaks = MeasuredPeaks.from_json(meta["peaks"])
        return cls(spec, peaks, floor_ms=meta.get("floor_ms", 0.002),
                   half_bytes=meta.get("half_bytes"))


KERNEL_MODEL_TYPES[MeasuredRooflineModel.type_name] = MeasuredRooflineModel
