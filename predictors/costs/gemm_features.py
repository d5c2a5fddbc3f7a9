"""GEMM features from shapes and datasheet figures: roofline, tiles, waves, L2.

Every feature is a function of ``(B, M, N, K)`` and five device figures, so a model that
learns from them can predict a GPU it never saw from its datasheet.

Examples
--------
>>> import numpy as np
>>> fig = GpuFigures("x", 19.5e12, 1555e9, 108, 40e6, 1410, 64)
>>> X = gemm_features(np.array([1.]), np.array([4096.]), np.array([4096.]),
...                   np.array([4096.]), fig)
>>> X.shape == (1, len(FEATURE_NAMES))
True
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..hardware.specs import DeviceSpec

__all__ = ["GpuFigures", "FEATURE_NAMES", "DEVICE_FEATURES", "device_agnostic_columns",
           "TILES", "gemm_features", "roofline_s", "gemm_flops_bytes", "figures_from_spec",
           "figures_from_neusight_config"]

# Output tiles of the sgemm kernels cuBLAS picks (ampere/volta/maxwell_sgemm_AxB_*).
TILES = ((128, 128), (128, 64), (64, 64), (32, 32))
_SM_TILE = 128 * 128  # outputs one SM works on at a time in the quantized-time feature


@dataclass(frozen=True)
class GpuFigures:
    """The datasheet figures a GEMM model sees: FLOP/s (FP32 CUDA cores), bytes/s, SMs,
    L2 bytes, boost clock (MHz), FP32 lanes per SM."""

    name: str
    peak_flops: float
    mem_bw: float
    sms: int
    l2_bytes: float
    clock_mhz: float
    cores_per_sm: int

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "GpuFigures":
        return cls(d["name"], float(d["peak_flops"]), float(d["mem_bw"]), int(d["sms"]),
                   float(d["l2_bytes"]), float(d["clock_mhz"]), int(d["cores_per_sm"]))


def figures_from_spec(spec: DeviceSpec, dtype: str = "float32") -> GpuFigures:
    """Figures of a :class:`DeviceSpec`; clock and lanes are derived when missing."""
    cores = spec.cores_per_sm or 64
    peak = spec.flops(dtype)
    clock = spec.clock_mhz or (peak / max(spec.sms * cores * 2, 1) / 1e6)
    return GpuFigures(spec.name, peak, spec.mem_bw, spec.sms, spec.l2_bytes, clock, cores)


def figures_from_neusight_config(path: str | Path) -> GpuFigures:
    """Figures from a NeuSight ``device_configs/*.json`` (GB/s, MB, GFLOP/s, MHz)."""
    d = json.loads(Path(path).read_text())
    return GpuFigures(d["Device"], d["SingleFLOPs"] * 1e9, d["Mem_Bw"] * 1e9, int(d["Num_Sm"]),
                      d["L2Cache"] * 1e6, float(d["Freq"]), int(d["Core_Per_SM"]))


def gemm_flops_bytes(B, M, N, K, shared_weight: bool = False, itemsize: int = 4):
    """FLOPs and compulsory DRAM bytes of ``B`` GEMMs (M,K)x(K,N).

    ``shared_weight``: one (K,N) operand for all ``B`` (a linear layer on a 3-D input).
    """
    B, M, N, K = (np.asarray(x, dtype=np.float64) for x in (B, M, N, K))
    flops = 2.0 * B * M * N * K
    w = K * N if shared_weight else B * K * N
    nbytes = itemsize * (B * M * K + w + B * M * N)
    return flops, nbytes


def roofline_s(B, M, N, K, fig: GpuFigures, shared_weight: bool = False) -> np.ndarray:
    """``max(FLOPs / peak, bytes / bandwidth)`` in seconds, datasheet figures."""
    flops, nbytes = gemm_flops_bytes(B, M, N, K, shared_weight)
    return np.maximum(flops / fig.peak_flops, nbytes / fig.mem_bw)


def _feature_names() -> list[str]:
    names = ["log_m", "log_n", "log_k", "log_min_mn", "log_flops", "log_bytes",
             "log_peak", "log_bw", "log_sms", "log_l2", "log_clock", "log_ridge",
             "log_t_compute", "log_t_memory", "log_t_roofline", "log_compute_over_memory",
             "log_bytes_over_l2", "log_waves_per_sm_flops"]
    for a, b in TILES:
        names += [f"log_waves_{a}x{b}", f"tail_{a}x{b}", f"log_quantized_{a}x{b}"]
    return names


FEATURE_NAMES = _feature_names()

# The columns that are one constant per GPU (absolute datasheet figures and their ratio).
# With a handful of training GPUs each of them orders the GPUs, so a model can key on GPU
# identity through them; the pooled regressor (train.py) therefore shrinks their effect.
DEVICE_FEATURES = ("log_peak", "log_bw", "log_sms", "log_l2", "log_clock", "log_ridge")


def device_agnostic_columns(names=FEATURE_NAMES) -> list[int]:
    """Indices of the features that vary with the shape (all but :data:`DEVICE_FEATURES`)."""
    return [i for i, n in enumerate(names) if n not in DEVICE_FEATURES]


def gemm_features(B, M, N, K, fig: GpuFigures, shared_weight: bool = False) -> np.ndarray:
    """The feature matrix (one row per GEMM), columns :data:`FEATURE_NAMES`.

    Tiles are counted per matrix of a batch (``bmm`` runs ``B`` x tiles), waves are tiles
    over SMs, ``tail`` is the busy fraction of the last wave's SMs, and the quantized time
    is whole waves of 128x128-equivalent work at the per-SM peak, relative to FLOPs/peak.
    """
    B, M, N, K = (np.maximum(np.asarray(x, dtype=np.float64), 1.0) for x in (B, M, N, K))
    flops, nbytes = gemm_flops_bytes(B, M, N, K, shared_weight)
    tc = flops / fig.peak_flops
    tm = nbytes / fig.mem_bw
    per_sm = fig.peak_flops / fig.sms
    cols = [np.log(M), np.log(N), np.log(K), np.log(np.minimum(M, N)), np.log(flops),
            np.log(nbytes)]
    dev = [np.log(fig.peak_flops), np.log(fig.mem_bw), np.log(fig.sms), np.log(fig.l2_bytes),
           np.log(fig.clock_mhz), np.log(fig.peak_flops / fig.mem_bw)]
    cols += [np.full_like(M, v) for v in dev]
    cols += [np.log(tc), np.log(tm), np.log(np.maximum(tc, tm)), np.log(tc / tm),
             np.log(nbytes / fig.l2_bytes), np.log(flops / per_sm)]
    for a, b in TILES:
        tiles = B * np.minimum(np.ceil(M / a) * np.ceil(N / b), np.ceil(M / b) * np.ceil(N / a))
        per_wave = fig.sms * (_SM_TILE / (a * b))  # concurrent tiles on the device
        waves = tiles / per_wave
        full = np.ceil(waves)
        quantized = full * 2.0 * _SM_TILE * K / per_sm
        cols += [np.log(waves), waves / full, np.log(quantized / tc)]
    return np.column_stack(cols)
