"""GEMM kernel time learned from a GPU's own measurements (``calibrate --device cuda``):
half precision (fp16/bf16, tensor cores) and, where fp32 GEMMs were measured, fp32.

No public half-precision GEMM measurements exist in ``../shared/data``, and the datasheet
roofline misses what decides these kernels most: alignment.  Measured on an H200
(``resources/measurements``): with N or K not a multiple of 8 elements (16 bytes), cuBLAS leaves the
tensor cores' fast path and a 910x31429x4223 bf16 product runs at 110 TFLOP/s instead of
~690; the roofline's GMAE on such shapes was 72 %.  The model takes the fp32 GEMM
model's shape/wave features (with the dtype's datasheet peak) plus the alignment of M, N
and K, and learns ``log(kernel / roofline)`` with boosted trees.

The same model fitted on a GPU's fp32 GEMMs (``dtypes=("float32",)``, the fp32 peak)
replaces the model trained on other GPUs' public measurements: on the H200 that model ran
21 % fast in the median (19.6 % GMAE), the measured one 4-5 % on held-out shapes.
"""
from __future__ import annotations

import numpy as np

from ..profiles import KERNEL_MODEL_TYPES
from .gemm_features import FEATURE_NAMES, GpuFigures, gemm_features, roofline_s
from .gpu_gemm import gemm_dims
from .regressors import fit_gbm, regressor_from_arrays

__all__ = ["TensorCoreGemmModel", "HALF_DTYPES", "FP32_DTYPES", "alignment_features"]

HALF_DTYPES = ("bfloat16", "float16")
FP32_DTYPES = ("float32",)
ALIGN_NAMES = ["m_mod8", "n_mod8", "k_mod8", "n_pow2", "k_pow2", "is_bf16"]
MODEL_FEATURES = FEATURE_NAMES + ALIGN_NAMES


def _pow2(x: np.ndarray) -> np.ndarray:
    """The exponent of the largest power of two dividing ``x``, capped at 7 (128)."""
    x = x.astype(np.int64)
    out = np.zeros(len(x))
    for e in range(1, 8):
        out[(x % (1 << e)) == 0] = e
    return out


def alignment_features(M, N, K, bf16) -> np.ndarray:
    M, N, K = (np.asarray(v, dtype=np.int64) for v in (M, N, K))
    return np.column_stack([(M % 8 == 0), (N % 8 == 0), (K % 8 == 0), _pow2(N), _pow2(K),
                            np.asarray(bf16, dtype=float)]).astype(float)


class TensorCoreGemmModel:
    """GEMM kernel time of ``dtypes`` on one GPU (``figures``: its fp32 datasheet figures;
    ``half_peak``: the datasheet peak of ``dtypes``, the half-precision one by default)."""

    op_class = "gemm"
    type_name = "gpu-gemm-tensor-core"

    def __init__(self, figures: GpuFigures, half_peak: float, regressor, *,
                 min_kernel_ms: float = 0.002, info: dict | None = None,
                 dtypes: tuple[str, ...] = HALF_DTYPES):
        self.dtypes = tuple(dtypes)
        self.figures = figures
        self.half_peak = float(half_peak)
        self.regressor = regressor
        self.min_kernel_ms = float(min_kernel_ms)
        self.info = dict(info or {})

    def _half_figures(self) -> GpuFigures:
        f = self.figures
        return GpuFigures(f.name, self.half_peak, f.mem_bw, f.sms, f.l2_bytes, f.clock_mhz,
                          f.cores_per_sm)

    def features(self, B, M, N, K, bf16, shared_weight: bool = False) -> np.ndarray:
        fig = self._half_figures()
        return np.column_stack([gemm_features(B, M, N, K, fig, shared_weight=shared_weight),
                                alignment_features(M, N, K, bf16)])

    def predict_shapes(self, B, M, N, K, bf16=True, *, shared_weight: bool = False
                       ) -> np.ndarray:
        B, M, N, K, bf16 = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64)
                                                 for x in (B, M, N, K, bf16)))
        roof = roofline_s(B, M, N, K, self._half_figures(), shared_weight) * 1e3
        ratio = np.maximum(np.exp(self.regressor.predict(
            self.features(B, M, N, K, bf16, shared_weight))), 1.0)
        return np.maximum(ratio * roof, self.min_kernel_ms)

    def predict_ms(self, nodes: list[dict]) -> np.ndarray:
        out = np.full(len(nodes), np.nan)
        rows, dims, bf16 = [], [], []
        for i, node in enumerate(nodes):
            dtypes = node.get("input_dtypes") or []
            if not dtypes or dtypes[-1] not in self.dtypes:
                continue
            d = gemm_dims(node)
            if d is not None:
                rows.append(i)
                dims.append(d)
                bf16.append(dtypes[-1] == "bfloat16")
        if rows:
            B, M, N, K = np.array(dims, dtype=float).T
            out[rows] = self.predict_shapes(B, M, N, K, np.array(bf16, dtype=float))
        return out

    @classmethod
    def fit(cls, figures: GpuFigures, half_peak: float, rows: list[dict], *,
            seed: int = 0, info: dict | None = None,
            dtypes: tuple[str, ...] = HALF_DTYPES) -> "TensorCoreGemmModel":
        """Fit on measured rows ``{"op": "linear"|"bmm", "b", "m", "n", "k", "dtype",
        "ms"}`` (``linear``: ``b*m`` rows times a shared ``(n, k)`` weight)."""
        model = cls(figures, half_peak, None, info=info, dtypes=dtypes)
        B, M, N, K, bf16, y = model._arrays(rows)
        X = np.vstack([model.features(B[s], M[s], N[s], K[s], bf16[s], shared_weight=sw)
                       for s, sw in model._splits(rows)])
        y = np.concatenate([y[s] for s, _ in model._splits(rows)])
        model.regressor = fit_gbm(X, y, seed=seed, max_iter=300)
        return model

    def _arrays(self, rows):
        B = np.array([r["b"] for r in rows], float)
        M = np.array([r["m"] for r in rows], float)
        N = np.array([r["n"] for r in rows], float)
        K = np.array([r["k"] for r in rows], float)
        bf16 = np.array([r["dtype"] == "bfloat16" for r in rows], float)
        ms = np.array([r["ms"] for r in rows], float)
        target = np.empty(len(rows))
        for s, sw in self._splits(rows):
            roof = roofline_s(B[s], M[s], N[s], K[s], self._half_figures(), sw) * 1e3
            target[s] = np.log(ms[s] / roof)
        return B, M, N, K, bf16, target

    @staticmethod
    def _splits(rows):
        linear = np.array([r["op"] == "linear" for r in rows])
        return [(np.flatnonzero(linear), True), (np.flatnonzero(~linear), False)]

    def predict_rows(self, rows: list[dict]) -> np.ndarray:
        """Predicted ms of measured-row dicts (as :meth:`fit` takes)."""
        out = np.empty(len(rows))
        B, M, N, K, bf16, _ = (self._arrays([dict(r, ms=1.0) for r in rows])
                               if rows else (None,) * 6)
        for s, sw in self._splits(rows):
            out[s] = self.predict_shapes(B[s], M[s], N[s], K[s], bf16[s], shared_weight=sw)
        return out

    def to_json(self) -> tuple[dict, dict[str, np.ndarray]]:
        meta = {"type": self.type_name, "op_class": self.op_class, "features": MODEL_FEATURES,
                "regressor": self.regressor.kind, "figures": self.figures.to_json(),
                "half_peak": self.half_peak, "min_kernel_ms": self.min_kernel_ms,
                "dtypes": list(self.dtypes), "info": self.info,
                "target": "log(kernel_ms / roofline_ms), roofline at the half-precision "
                          "datasheet peak of its dtypes"}
        return meta, self.regressor.to_arrays()

    @classmethod
    def from_json(cls, meta: dict, arrays: dict[str, np.ndarray]) -> "TensorCoreGemmModel":
        if list(meta.get("features", [])) != MODEL_FEATURES:
            raise ValueError("tensor-core GEMM model: its features differ from this "
                             "version's; recalibrate (python -m predictors calibrate "
                             "--from-measurements DIR)")
        return cls(GpuFigures.from_json(meta["figures"]), meta["half_peak"],
                   regressor_from_arrays(meta["regressor"], arrays),
                   min_kernel_ms=meta.get("min_kernel_ms", 0.002), info=meta.get("info", {}),
                   dtypes=tuple(meta.get("dtypes", HALF_DTYPES)))


KERNEL_MODEL_TYPES[TensorCoreGemmModel.type_name] = TensorCoreGemmModel
