"""Batched fp32 GEMM (``bmm``) kernel time: tiles, waves and the roofline, then a learned
utilisation.

The structure comes first, as in NeuSight (Lee et al., ASPLOS 2025): an sgemm kernel cuts
each of the ``B`` products into output tiles, the device runs ``SMs x tiles-per-SM`` tiles
at a time (a *wave*), and a wave's time is bounded by its FLOPs at the SMs' share of the
peak and by the operand panels it reads at the DRAM bandwidth.
Those estimates, per tile shape, with the waves, the last wave's occupancy and the batch,
are the features; a gradient-boosted regressor (:func:`~.regressors.fit_gbm`) learns
``log(kernel / roofline)`` from them, i.e. the utilisation, and no prediction beats the
datasheet roofline.  Every feature is a function of ``(B, M, N, K)`` and datasheet figures,
so one model serves any GPU with a known datasheet.

Examples
--------
>>> fig = GpuFigures("x", 19.5e12, 1555e9, 108, 40e6, 1410, 64)
>>> float(structured_ms(np.array([64.]), np.array([32.]), np.array([32.]),
...                     np.array([64.]), fig)[0]) > 0
True
"""
from __future__ import annotations

import numpy as np

from .gemm_features import GpuFigures, gemm_flops_bytes
from .regressors import regressor_from_arrays

__all__ = [
    "BMM_FEATURES",
    "DEVICE_COLUMNS",
    "SGEMM_TILES",
    "BatchedGemmModel",
    "bmm_features",
    "device_columns",
    "roofline_ms",
    "same_die",
    "structured_ms",
    "tile_estimates",
]

# Output tiles of the fp32 sgemm kernels cuBLAS runs for bmm on Pascal to Ampere
# (the kernel names of the NeuSight measurements: *_sgemm_128x128, 128x64, 64x64,
# 128x32, 32x128, 32x32_sliced1x4), and how many of each one SM holds at once
# (blocks per SM of those kernels, from the same measurements' launch records).
SGEMM_TILES = ((128, 128, 1), (128, 64, 2), (64, 64, 4), (128, 32, 4), (32, 32, 8))
_ITEM = 4.0  # bytes per fp32 element


def _wave(B, M, N, K, a, b, per, fig: GpuFigures):
    """``(tiles, waves, seconds)`` of ``a x b`` output tiles, ``per`` of them on one SM."""
    rows, cols = np.ceil(M / a), np.ceil(N / b)  # one product's tile grid
    per_product = rows * cols
    n_tiles = B * per_product
    slots = fig.sms * per
    waves = np.ceil(n_tiles / slots)
    on = np.minimum(n_tiles, slots)  # tiles of the first wave
    t_flops = np.ceil(on / fig.sms) * 2.0 * a * b * K / (fig.peak_flops / fig.sms)
    whole = np.floor(on / per_product)  # products the first wave covers, then part of one
    part = on - whole * per_product
    panels_a = whole * rows + np.minimum(rows, np.ceil(part / cols))
    panels_b = whole * cols + np.minimum(cols, part)
    t_bytes = _ITEM * K * (panels_a * a + panels_b * b) / fig.mem_bw
    return n_tiles, waves, waves * np.maximum(t_flops, t_bytes)


def tile_estimates(B, M, N, K, fig: GpuFigures):
    """Per tile shape: ``(tiles, waves, structured seconds)``, each ``(len(SGEMM_TILES), n)``.

    Every wave takes as long as the first: the larger of one SM's FLOPs for its resident
    tiles at ``peak/SMs`` and the wave's operand traffic at the DRAM bandwidth.  Tiles of a
    wave that share an ``a x K`` row panel or a ``K x b`` column panel of one product read
    it once (L2 serves the others); the wave fills whole products in order, then part of
    the next, row by row.  A tile runs in the orientation (``a x b`` or ``b x a``) that
    takes less time.  Counting each tile's panels would make small tiles look memory-bound
    on GPUs with a high FLOP-to-byte ratio, and a regressor would read the GPU's identity
    from that, which does not carry to GPUs outside its training data.
    """
    B, M, N, K = np.broadcast_arrays(*(np.maximum(np.asarray(x, dtype=np.float64), 1.0)
                                       for x in (B, M, N, K)))
    tiles, waves, secs = [], [], []
    for a, b, per in SGEMM_TILES:
        one, other = _wave(B, M, N, K, a, b, per, fig), _wave(B, M, N, K, b, a, per, fig)
        pick = other[2] < one[2]
        tiles.append(np.where(pick, other[0], one[0]))
        waves.append(np.where(pick, other[1], one[1]))
        secs.append(np.minimum(one[2], other[2]))
    return np.array(tiles), np.array(waves), np.array(secs)


def roofline_ms(B, M, N, K, fig: GpuFigures) -> np.ndarray:
    """``max(FLOPs / peak, compulsory bytes / bandwidth)`` of ``B`` products, in ms."""
    flops, nbytes = gemm_flops_bytes(B, M, N, K)
    return np.maximum(flops / fig.peak_flops, nbytes / fig.mem_bw) * 1e3


def structured_ms(B, M, N, K, fig: GpuFigures) -> np.ndarray:
    """The structured estimate in ms: the best tile's waves, never under the roofline."""
    _, _, secs = tile_estimates(B, M, N, K, fig)
    return np.maximum(secs.min(axis=0) * 1e3, roofline_ms(B, M, N, K, fig))


def _names() -> list[str]:
    names = ["log_b", "log_m", "log_n", "log_k", "log_mn", "log_min_mn", "log_flops",
             "log_bytes", "log_intensity_over_ridge", "log_struct_over_roof",
             "log_bytes_over_l2", "log_matrix_bytes_over_l2", "log_flops_per_sm",
             "best_tile"]
    for a, b, _ in SGEMM_TILES:
        names += [f"log_waves_{a}x{b}", f"tail_{a}x{b}", f"log_time_{a}x{b}_over_best"]
    return names + ["log_flops_per_sm_cycle", "log_bw_per_sm", "log_clock", "log_l2_per_sm"]


BMM_FEATURES = _names()
# The device figures (last four): pooled away as in the GEMM model (calibrate/gemm_fit.py).
DEVICE_COLUMNS = 4


def bmm_features(B, M, N, K, fig: GpuFigures) -> np.ndarray:
    """Feature rows (columns :data:`BMM_FEATURES`) of ``B`` products ``(M,K) x (K,N)``."""
    B, M, N, K = np.broadcast_arrays(*(np.maximum(np.asarray(x, dtype=np.float64), 1.0)
                                       for x in (B, M, N, K)))
    flops, nbytes = gemm_flops_bytes(B, M, N, K)
    roof = np.maximum(flops / fig.peak_flops, nbytes / fig.mem_bw)
    tiles, waves, secs = tile_estimates(B, M, N, K, fig)
    best = secs.min(axis=0)
    struct = np.maximum(best, roof)
    ridge = fig.peak_flops / fig.mem_bw
    cols = [np.log(B), np.log(M), np.log(N), np.log(K), np.log(M * N), np.log(np.minimum(M, N)),
            np.log(flops), np.log(nbytes), np.log(flops / nbytes / ridge), np.log(struct / roof),
            np.log(nbytes / fig.l2_bytes), np.log(_ITEM * (M * K + K * N) / fig.l2_bytes),
            np.log(flops / (fig.peak_flops / fig.sms)), np.argmin(secs, axis=0).astype(float)]
    slots = np.array([fig.sms * per for _, _, per in SGEMM_TILES])[:, None]
    for i in range(len(SGEMM_TILES)):
        cols += [np.log(waves[i]), tiles[i] / (waves[i] * slots[i]), np.log(secs[i] / best)]
    cols += [np.full_like(B, v) for v in device_columns(fig)]
    return np.column_stack(cols)


def device_columns(fig: GpuFigures) -> tuple[float, ...]:
    """The last :data:`DEVICE_COLUMNS` features: per-SM figures (they carry across GPU
    sizes better than the absolute ones), in log.  FLOPs per SM per cycle are the lanes'
    (two per FP32 lane): derived from a rounded datasheet peak they would differ by
    rounding alone between GPUs of one design, and trees would split on that."""
    return tuple(float(np.log(v)) for v in (
        2.0 * fig.cores_per_sm, fig.mem_bw / fig.sms, fig.clock_mhz, fig.l2_bytes / fig.sms))


def same_die(a: GpuFigures, b: GpuFigures) -> bool:
    """Whether two GPUs share SMs, FP32 lanes per SM and L2: variants of one die that
    differ in clock, memory or board."""
    return a.sms == b.sms and a.cores_per_sm == b.cores_per_sm and a.l2_bytes == b.l2_bytes


class BatchedGemmModel:
    """fp32 ``bmm`` kernel time on one GPU: the roofline times the learned
    ``exp(regressor(features))``, never under the roofline nor ``min_kernel_ms``.

    Parameters
    ----------
    figures : GpuFigures
        The device the model predicts for (any GPU with datasheet figures).
    regressor : TreeEnsemble or PooledRegressor
        Maps :data:`BMM_FEATURES` to ``log(kernel / roofline)``.
    min_kernel_ms : float
        The shortest kernel it predicts.
    info : dict
        Training data and validation figures; ``trained_figures`` lists the training GPUs'
        figures.  A GPU of the same die as one of them (:func:`same_die`) gives the
        regressor that GPU's device columns, so a variant with another clock or memory
        keeps the efficiency its die was measured at (its own figures still set the
        roofline, tiles and waves); trees would otherwise place it by the nearest
        training GPU's clock or bandwidth, which may be another die's.
    """

    op_class = "bmm"
    type_name = "gpu-bmm"
    features = BMM_FEATURES

    target = "log(kernel_ms / roofline_ms), roofline from datasheet figures"

    def __init__(self, figures: GpuFigures, regressor, *, min_kernel_ms: float = 0.004,
                 info: dict | None = None):
        self.figures = figures
        self.regressor = regressor
        self.min_kernel_ms = float(min_kernel_ms)
        self.info = dict(info or {})
        trained = [GpuFigures.from_json(f) for f in self.info.get("trained_figures", [])]
        self.die = next((t for t in trained if same_die(t, figures)), figures)

    def _log_ratio(self, X: np.ndarray) -> np.ndarray:
        """The regressor on feature rows, with the die's device columns."""
        if self.die is not self.figures:
            X = X.copy()
            X[:, -DEVICE_COLUMNS:] = device_columns(self.die)
        return self.regressor.predict(X)

    def with_figures(self, figures: GpuFigures) -> BatchedGemmModel:
        """The same regressor bound to another GPU's figures."""
        return type(self)(figures, self.regressor, min_kernel_ms=self.min_kernel_ms,
                          info=self.info)

    def predict_shapes(self, B, M, N, K) -> np.ndarray:
        """Kernel milliseconds of ``B`` products ``(M,K) x (K,N)`` (arrays broadcast)."""
        B, M, N, K = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64)
                                           for x in (B, M, N, K)))
        out = np.full(B.shape, np.nan)
        ok = (B >= 1) & (M >= 1) & (N >= 1) & (K >= 1)
        if ok.any():
            args = [x[ok] for x in (B, M, N, K)]
            roof_ms = roofline_ms(*args, self.figures)
            ms = np.exp(self._log_ratio(bmm_features(*args, self.figures))) * roof_ms
            out[ok] = np.maximum(np.maximum(ms, roof_ms), self.min_kernel_ms)
        return out

    def to_json(self) -> tuple[dict, dict[str, np.ndarray]]:
        meta = {"type": self.type_name, "op_class": self.op_class,
                "regressor": self.regressor.kind, "features": list(self.features),
                "target": self.target, "figures": self.figures.to_json(),
                "min_kernel_ms": self.min_kernel_ms, "info": self.info}
        return meta, self.regressor.to_arrays()

    @classmethod
    def from_json(cls, meta: dict, arrays: dict[str, np.ndarray]):
        if list(meta.get("features", [])) != list(cls.features):
            raise ValueError(f"{cls.type_name} model: its features differ from this "
                             "version's; rebuild it (python benchmarks/gpu_kernels.py --write)")
        return cls(GpuFigures.from_json(meta["figures"]),
                   regressor_from_arrays(meta["regressor"], arrays),
                   min_kernel_ms=meta.get("min_kernel_ms", 0.004), info=meta.get("info", {}))
