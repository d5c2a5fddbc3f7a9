"""Learned GEMM / batched-GEMM kernel model for GPUs, from shapes and datasheet figures.

The regressor predicts ``log(kernel time / roofline time)`` from :mod:`.features`; the
roofline uses the device's datasheet peak and bandwidth, so one regressor, trained on the
public measurements of several GPUs, serves any GPU whose figures are known.  Batched
products (``B > 1`` without a shared operand) and 3x3 stride-1 convolutions go to the
bundled models trained on measured ``bmm`` and convolution kernels
(:mod:`.batched_gemm`, :mod:`.conv_kernels`), bound to the same figures.
"""
from __future__ import annotations

import numpy as np

from ..profiles import KERNEL_MODEL_TYPES
from .convolution import WINOGRAD_SPEEDUP, conv_gemms
from .gemm_features import FEATURE_NAMES, GpuFigures, gemm_features, roofline_s
from .kernel_artifacts import bundled_kernel_model
from .regressors import regressor_from_arrays

__all__ = ["GemmKernelModel", "gemm_dims", "GEMM_OPS"]

GEMM_OPS = ("mm", "addmm", "bmm", "baddbmm")


def gemm_dims(node: dict) -> tuple[int, int, int, int] | None:
    """``(B, M, N, K)`` of a captured aten GEMM op, or None when it is not one we model.

    ``mm (M,K)x(K,N)``, ``addmm (bias, (M,K), (K,N))``, ``bmm (B,M,K)x(B,K,N)``,
    ``baddbmm (C, (B,M,K), (B,K,N))``.
    """
    op = node["name"].split("::")[-1]
    ins = node.get("input_shapes") or []
    try:
        if op == "mm":
            a, b = ins[0], ins[1]
        elif op in ("addmm", "baddbmm"):
            a, b = ins[1], ins[2]
        elif op == "bmm":
            a, b = ins[0], ins[1]
        else:
            return None
        if op in ("mm", "addmm"):
            if len(a) != 2 or len(b) != 2:
                return None
            (m, k), (_, n) = a, b
            return 1, int(m), int(n), int(k)
        if len(a) != 3 or len(b) != 3:
            return None
        return int(a[0]), int(a[1]), int(b[2]), int(a[2])
    except (IndexError, TypeError, ValueError):
        return None


class GemmKernelModel:
    """FP32 GEMM kernel time on one GPU (CUDA-core sgemm, as PyTorch runs float32 matmul
    with TF32 off by default); convolutions as their implicit GEMMs
    (:mod:`predictors.costs.convolution`).

    Parameters
    ----------
    figures : GpuFigures
        The device the model predicts for.
    regressor : TreeEnsemble, MlpRegressor or PooledRegressor
        Maps :data:`FEATURE_NAMES` to ``log(kernel / roofline)``.
    min_kernel_ms : float
        The shortest kernel it predicts.
    dtypes : tuple of str
        Input dtypes the model covers; other GEMMs get NaN (the roofline takes them).
    info : dict
        Training data, hyperparameters and validation figures (copied into the profile).
    """

    op_class = "gemm"
    type_name = "gpu-gemm"

    def __init__(self, figures: GpuFigures, regressor, *, min_kernel_ms: float = 0.002,
                 dtypes: tuple[str, ...] = ("float32",), info: dict | None = None):
        self.figures = figures
        self.regressor = regressor
        self.min_kernel_ms = float(min_kernel_ms)
        self.dtypes = tuple(dtypes)
        self.info = dict(info or {})

    def with_figures(self, figures: GpuFigures) -> "GemmKernelModel":
        """The same regressor bound to another GPU's figures."""
        return GemmKernelModel(figures, self.regressor, min_kernel_ms=self.min_kernel_ms,
                               dtypes=self.dtypes, info=self.info)

    def bundled(self, name: str):
        """The bundled ``gpu-bmm`` or ``gpu-conv`` model on this GPU's figures (None when
        the file is absent)."""
        cache = self.__dict__.setdefault("_bundled", {})
        if name not in cache:
            model = bundled_kernel_model(name)
            cache[name] = model.with_figures(self.figures) if model is not None else None
        return cache[name]

    def predict_shapes(self, B, M, N, K, *, shared_weight: bool = False,
                       batched: bool = True) -> np.ndarray:
        """Kernel milliseconds of ``B`` GEMMs (M,K)x(K,N) each (arrays broadcast);
        ``batched=False`` keeps ``B > 1`` off the bmm model (a grouped convolution's
        implicit GEMMs are no ``bmm`` kernel)."""
        B, M, N, K = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64)
                                           for x in (B, M, N, K)))
        out = np.full(B.shape, np.nan)
        ok = (B >= 1) & (M >= 1) & (N >= 1) & (K >= 1)
        if not ok.any():
            return out
        bmm = self.bundled("gpu-bmm") if batched and not shared_weight else None
        if bmm is not None:  # B separate products: the model measured on them
            many = ok & (B > 1)
            out[many] = bmm.predict_shapes(B[many], M[many], N[many], K[many])
            ok &= ~many
            if not ok.any():
                return out
        args = [x[ok] for x in (B, M, N, K)]
        X = gemm_features(*args, self.figures, shared_weight=shared_weight)
        roof_ms = roofline_s(*args, self.figures, shared_weight=shared_weight) * 1e3
        # no kernel beats the datasheet roofline (the regressor can, just above the floor)
        ratio = np.maximum(np.exp(self.regressor.predict(X)), 1.0)
        out[ok] = np.maximum(ratio * roof_ms, self.min_kernel_ms)
        return out

    def predict_ms(self, nodes: list[dict]) -> np.ndarray:
        """Per node: its GEMM's kernel time; a convolution's from the bundled convolution
        model where it covers the pass, else as the implicit GEMMs of its passes (a
        Winograd-eligible pass divided by the multiply savings); NaN for anything else."""
        dims = np.full((len(nodes), 4), np.nan)
        passes: list[tuple[int, float, tuple[int, int, int, int]]] = []
        conv = self.bundled("gpu-conv") if "float32" in self.dtypes else None
        convs: list[tuple[int, tuple]] = []
        for i, node in enumerate(nodes):
            dtypes = node.get("input_dtypes") or []
            if not dtypes or dtypes[-1] not in self.dtypes:
                continue
            geo = conv.covers(node) if conv is not None else None
            if geo is not None:
                convs.append((i, geo))
                continue
            for g in conv_gemms(node):
                passes.append((i, WINOGRAD_SPEEDUP if g.winograd else 1.0,
                               (g.groups, g.m, g.n, g.k)))
            d = gemm_dims(node)
            if d is not None:
                dims[i] = d
        out = np.full(len(nodes), np.nan)
        ok = ~np.isnan(dims[:, 0])
        if ok.any():
            out[ok] = self.predict_shapes(*dims[ok].T)
        if passes:
            who = np.array([p[0] for p in passes])
            ms = self.predict_shapes(*np.array([p[2] for p in passes], float).T,
                                     batched=False) / np.array(
                [p[1] for p in passes])
            out[np.unique(who)] = 0.0
            np.add.at(out, who, ms)
        if convs:
            idx, geo = zip(*convs)
            out[list(idx)] = conv.predict_conv(*np.array(geo, dtype=np.float64).T)
        return out

    def to_json(self) -> tuple[dict, dict[str, np.ndarray]]:
        meta = {"type": self.type_name, "op_class": self.op_class,
                "regressor": self.regressor.kind, "features": FEATURE_NAMES,
                "target": "log(kernel_ms / roofline_ms), roofline from datasheet figures",
                "figures": self.figures.to_json(), "min_kernel_ms": self.min_kernel_ms,
                "dtypes": list(self.dtypes), "info": self.info}
        return meta, self.regressor.to_arrays()

    @classmethod
    def from_json(cls, meta: dict, arrays: dict[str, np.ndarray]) -> "GemmKernelModel":
        if list(meta.get("features", [])) != FEATURE_NAMES:
            raise ValueError("gemm model: its features differ from this version's; rebuild "
                             "the profile (python -m predictors kernels build-profiles)")
        return cls(GpuFigures.from_json(meta["figures"]),
                   regressor_from_arrays(meta["regressor"], arrays),
                   min_kernel_ms=meta.get("min_kernel_ms", 0.002),
                   dtypes=tuple(meta.get("dtypes", ("float32",))), info=meta.get("info", {}))


KERNEL_MODEL_TYPES[GemmKernelModel.type_name] = GemmKernelModel
