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

from ..hardware.peaks import MeasuredPeaks
from ..hardware.specs import DeviceSpec
from ..profiles import KERNEL_MODEL_TYPES
from .roofline import attention_efficiency, kernel_cost

__all__ = [
    "PUBLIC_OP_EFFICIENCY",
    "MeasuredRooflineModel",
    "fit_op_efficiency",
    "fit_op_floor",
    "public_op_efficiency",
]

# Fraction of the measured FP32 peak that non-GEMM compute reaches (transcendentals,
# reductions); GEMMs in other dtypes use the datasheet tensor peak x GEMM_EFFICIENCY.
VECTOR_EFFICIENCY = 0.5
GEMM_EFFICIENCY = 0.7
# A dense tensor updated with sparse rows (SGD on an embedding table: ``index_add_`` with
# atomics at random rows) reaches this share of the DRAM bandwidth on the roofline's
# bytes (H200 traces in resources/measurements: 0.43-0.53 over three GPU-sized DLRMs of
# the 2.71 TB/s that cudaMemcpy copies at; 0.31 of the 4.33 TB/s that kernels stream at,
# the bandwidth the profiles hold).
SPARSE_UPDATE_EFFICIENCY = 0.31
# ``index_put_(..., accumulate=True)`` (the backward of advanced indexing: DLRM's
# interaction reads the pairs ``Z[:, li, lj]``) runs CUDA's sort-based path, whose
# accumulate kernel reads the values with a stride: latency-bound, far off the roofline.
# On the H200 traces (resources/measurements) it took 7-1380 us for 14k-5.75M values, 0.20-0.24 ns
# per value from 225k on (the roofline said 3-47 us): this many bytes of DRAM bandwidth
# per value (0.22 ns x the 4.33 TB/s that kernels stream at).
ACCUMULATE_BYTES_PER_VALUE = 950.0
_INDEX_PUT = ("_index_put_impl_", "index_put_", "index_put")
# op_efficiency keys of the two paths above, fitted where a device measured them
SPARSE_KEY = "sparse update"
ACCUMULATE_KEY = "accumulate bytes per value"
ACCUMULATE_MIN_VALUES = 225_000  # below, the sort's fixed costs dominate
# Share of the DRAM bandwidth that fp32 layer norm and softmax forwards stream their
# roofline bytes at, for profiles without measurements of their own, by where the peaks
# come from (hardware/peaks.py): medians over NeuSight's kernels of the GPUs with measured
# peaks (A100, V100) and of those with estimated ones (P100, P4, T4), as
# ``python benchmarks/gpu_kernels.py --memory-bound`` prints them.  The H200's traced
# steps gave layer norm 0.64.
PUBLIC_OP_EFFICIENCY = {
    "measured": {"aten::native_layer_norm": 0.73, "aten::_softmax": 0.74},
    "estimated": {"aten::native_layer_norm": 0.54, "aten::_softmax": 0.71},
}


def public_op_efficiency(peaks: MeasuredPeaks) -> dict[str, float]:
    """:data:`PUBLIC_OP_EFFICIENCY` for peaks measured or estimated."""
    return dict(PUBLIC_OP_EFFICIENCY["estimated" if peaks.source.startswith("estimated")
                                     else "measured"])


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
    """Every non-view op: FLOPs and bytes from :func:`predictors.costs.roofline.kernel_cost`,
    time from measured peaks with the small-size curve."""

    op_class = "other"
    type_name = "gpu-roofline-measured"

    def __init__(self, spec: DeviceSpec, peaks: MeasuredPeaks, *, floor_ms: float = 0.002,
                 half_bytes: float | None = None, op_efficiency: dict | None = None,
                 op_floor_ms: dict | None = None):
        self.spec = spec
        self.peaks = peaks
        self.floor_ms = float(floor_ms)
        self.half_bytes = float(half_bytes if half_bytes is not None else peaks.dram_bw * 1e-6)
        # op name -> share of the DRAM bandwidth it streams at in a training step (measured
        # profiles: :func:`fit_op_efficiency`); ops not listed stream at all of it.  The
        # keys SPARSE_KEY and ACCUMULATE_KEY replace SPARSE_UPDATE_EFFICIENCY and
        # ACCUMULATE_BYTES_PER_VALUE where the device measured its own.
        self.op_efficiency = dict(op_efficiency or {})
        # op name -> its tiny kernels' time in a training step (:func:`fit_op_floor`): a
        # reduction or a fused attention launches more, and longer, kernels than an add
        self.op_floor_ms = dict(op_floor_ms or {})

    def time_ms(self, flops, nbytes, category="elementwise", dtype="float32",
                efficiency: float = 1.0, floor_ms: float | None = None) -> np.ndarray:
        flops, nbytes = np.asarray(flops, dtype=float), np.asarray(nbytes, dtype=float)
        if category == "gemm":
            peak = (self.peaks.fp32_flops if dtype == "float32"
                    else self.spec.flops(dtype) * GEMM_EFFICIENCY)
        else:
            peak = self.peaks.fp32_flops * VECTOR_EFFICIENCY
        mem = (nbytes + self.half_bytes * (nbytes > 0)) / (self.peaks.dram_bw * efficiency)
        floor = self.floor_ms if floor_ms is None else floor_ms
        return floor + 1e3 * np.maximum(flops / peak, mem)

    def plain(self, node: dict):
        """``(KernelCost, dtype)`` of an op this model prices by the plain roofline (not
        a sparse update, an accumulating ``index_put`` or fused attention), else None."""
        try:
            cost = kernel_cost(node, self.spec)
        except (IndexError, KeyError, TypeError, ValueError):
            return None
        dtype = (node.get("input_dtypes") or ["float32"])[0]
        if (cost.category == "view" or _accumulated_values(node)
                or (cost.category != "gemm"
                    and any(n is not None for n in (node.get("input_nnz") or [])[1:]))
                or attention_efficiency(node["name"].split("::")[-1], dtype) is not None):
            return None
        return cost, dtype

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
            floor = self.op_floor_ms.get(node["name"], self.floor_ms)
            if cost.category != "gemm" and any(
                    n is not None for n in (node.get("input_nnz") or [])[1:]):
                share = self.op_efficiency.get(SPARSE_KEY, SPARSE_UPDATE_EFFICIENCY)
                mem = cost.bytes / (self.peaks.dram_bw * share)
                out[i] = floor + 1e3 * mem
                continue
            values = _accumulated_values(node)
            if values:
                per_value = self.op_efficiency.get(ACCUMULATE_KEY, ACCUMULATE_BYTES_PER_VALUE)
                mem = (values * per_value + self.half_bytes) / self.peaks.dram_bw
                out[i] = floor + 1e3 * mem
                continue
            eff = attention_efficiency(node["name"].split("::")[-1], dtype)
            if eff is not None:  # fused attention: its own share of the datasheet peak
                mem = cost.bytes / self.peaks.dram_bw
                out[i] = floor + 1e3 * max(cost.flops / (self.spec.flops(dtype) * eff), mem)
                continue
            out[i] = self.time_ms(cost.flops, cost.bytes, cost.category, dtype,
                                  self.op_efficiency.get(node["name"], 1.0), floor)
        return out

    def to_json(self) -> tuple[dict, dict]:
        return ({"type": self.type_name, "op_class": self.op_class,
                 "spec": dataclasses.asdict(self.spec), "peaks": self.peaks.to_json(), "floor_ms": self.floor_ms,
                 "half_bytes": self.half_bytes, "vector_efficiency": VECTOR_EFFICIENCY,
                 "op_efficiency": self.op_efficiency, "op_floor_ms": self.op_floor_ms,
                 "gemm_efficiency_other_dtypes": GEMM_EFFICIENCY}, {})

    @classmethod
    def from_json(cls, meta: dict, arrays: dict) -> "MeasuredRooflineModel":
        names = {f.name for f in dataclasses.fields(DeviceSpec)}
        spec = DeviceSpec(**{k: v for k, v in meta["spec"].items() if k in names})
        peaks = MeasuredPeaks.from_json(meta["peaks"])
        return cls(spec, peaks, floor_ms=meta.get("floor_ms", 0.002),
                   half_bytes=meta.get("half_bytes"), op_efficiency=meta.get("op_efficiency"),
                   op_floor_ms=meta.get("op_floor_ms"))


# Samples below this many bytes are dominated by the floor: they do not tell a bandwidth.
EFFICIENCY_MIN_BYTES = 1e6
EFFICIENCY_MIN_SAMPLES = 3
# An op whose share varies more than this between its quartiles does not stream its
# roofline bytes (``nll_loss_forward`` reads one logit per row, not the rows: 47x on the
# H200): it keeps the plain roofline.
EFFICIENCY_MAX_SPREAD = 4.0


def fit_op_efficiency(model: MeasuredRooflineModel, samples) -> dict[str, dict]:
    """Per op name, the share of the DRAM bandwidth its kernels streamed at in traced
    training steps: ``samples`` = ``(captured node, recorded kernel us)``.  The median over
    the op's memory-bound samples of at least :data:`EFFICIENCY_MIN_BYTES` (at least
    :data:`EFFICIENCY_MIN_SAMPLES` of them, consistent within
    :data:`EFFICIENCY_MAX_SPREAD`), of ``bytes / bandwidth / (time - floor)``; only ops
    the plain roofline prices.  Returns ``{name: {"efficiency", "n"}}``."""
    ratios: dict[str, list[float]] = {}
    for node, kernel_us in samples:
        if kernel_us is None:
            continue
        _special_path_sample(model, node, kernel_us, ratios)
        got = model.plain(node)
        if got is None:
            continue
        cost = got[0]
        busy_ms = kernel_us * 1e-3 - model.op_floor_ms.get(node["name"], model.floor_ms)
        compute_s = cost.flops / (model.peaks.fp32_flops * VECTOR_EFFICIENCY)
        if (cost.category in ("gemm", "embedding") or cost.bytes < EFFICIENCY_MIN_BYTES
                or busy_ms <= 0 or compute_s > cost.bytes / model.peaks.dram_bw):
            continue
        ratios.setdefault(node["name"], []).append(
            1e3 * cost.bytes / model.peaks.dram_bw / busy_ms)
    out = {}
    for name, r in sorted(ratios.items()):
        q25, q50, q75 = np.percentile(r, [25, 50, 75])
        if name == ACCUMULATE_KEY:
            if len(r) >= EFFICIENCY_MIN_SAMPLES:
                out[name] = {"efficiency": float(q50), "n": len(r)}
            continue
        if len(r) >= EFFICIENCY_MIN_SAMPLES and q75 <= EFFICIENCY_MAX_SPREAD * q25:
            out[name] = {"efficiency": float(np.clip(q50, 0.1, 2.0)), "n": len(r)}
    return out


# Kernels of ops under this many roofline bytes are their fixed cost (1 MB streams in
# 0.25 us on an H200, a fifth of its floor).
FLOOR_MAX_BYTES = EFFICIENCY_MIN_BYTES  # below the bandwidth fit: the fixed cost


def fit_op_floor(model: MeasuredRooflineModel, samples) -> dict[str, dict]:
    """Per op name the model prices, the median recorded time of its kernels in traced
    steps when it moves under :data:`FLOOR_MAX_BYTES` (at least
    :data:`EFFICIENCY_MIN_SAMPLES` of them): ``{name: {"floor_ms", "n"}}``."""
    tiny: dict[str, list[float]] = {}
    for node, kernel_us in samples:
        try:
            cost = kernel_cost(node, model.spec)
        except (IndexError, KeyError, TypeError, ValueError):
            continue
        dtype = (node.get("input_dtypes") or ["float32"])[0]
        fused = attention_efficiency(node["name"].split("::")[-1], dtype) is not None
        if (kernel_us and cost.category not in ("embedding", "view")
                and (cost.category != "gemm" or fused) and cost.bytes < FLOOR_MAX_BYTES):
            tiny.setdefault(node["name"], []).append(kernel_us * 1e-3)
    return {name: {"floor_ms": float(np.median(t)), "n": len(t)}
            for name, t in sorted(tiny.items()) if len(t) >= EFFICIENCY_MIN_SAMPLES}


def _special_path_sample(model: MeasuredRooflineModel, node: dict, kernel_us: float,
                         ratios: dict) -> None:
    """A sparse update's share of the bandwidth, an accumulating ``index_put``'s bytes
    per value: what the device measured for :data:`SPARSE_KEY` and :data:`ACCUMULATE_KEY`."""
    busy_s = (kernel_us * 1e-3 - model.op_floor_ms.get(node["name"], model.floor_ms)) * 1e-3
    if busy_s <= 0:
        return
    values = _accumulated_values(node)
    if values >= ACCUMULATE_MIN_VALUES:
        ratios.setdefault(ACCUMULATE_KEY, []).append(busy_s * model.peaks.dram_bw / values)
        return
    if any(n is not None for n in (node.get("input_nnz") or [])[1:]):
        try:
            cost = kernel_cost(node, model.spec)
        except (IndexError, KeyError, TypeError, ValueError):
            return
        if cost.category != "gemm" and cost.bytes >= EFFICIENCY_MIN_BYTES:
            ratios.setdefault(SPARSE_KEY, []).append(cost.bytes / model.peaks.dram_bw / busy_s)


KERNEL_MODEL_TYPES[MeasuredRooflineModel.type_name] = MeasuredRooflineModel
