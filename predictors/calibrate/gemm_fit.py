"""Fit and validate the GEMM regressor on the public measurements.

Error metric: GMAE (:func:`predictors.utils.metrics.gmae`), the geometric mean over
shapes of the absolute relative error ``|pred / actual - 1|``.  We also report MAPE (arithmetic mean of
the same) and the median ratio ``pred / actual`` (bias).  Errors are on the measured
latency: the predicted kernel time plus the GPU's measurement overhead (for an unseen GPU,
the median overhead of the training GPUs; for held-out shapes, the overhead estimated from
the GPU's training shapes alone).

The regressor is *pooled* across GPUs: ``DEVICE_WEIGHT`` x (a regressor on every feature)
+ (1 - ``DEVICE_WEIGHT``) x (one on the device-agnostic features alone), in log space.
With five training GPUs the first can key on GPU identity through the absolute datasheet
figures (each of them orders the five GPUs) and carries a GPU's sustained efficiency over
to the nearest GPU in that order; the second predicts what holds across GPUs.  The weight
trades the two checks of extrapolation: to GPUs outside the data (leave one GPU out) and to
shapes outside the training range (docs/models/gpu_profiles.md has the comparison).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..costs.gemm_features import device_agnostic_columns, gemm_features, roofline_s
from ..costs.regressors import PooledRegressor, fit_gbm, fit_mlp
from ..utils.metrics import gmae
from .public_data import FLOOR_KERNEL_MS, GemmMeasurements, overhead_from_latencies

__all__ = ["TrainingSet", "training_set", "fit_regressor", "error_figures", "gmae",
           "heldout_validation", "shape_range_validation", "leave_one_gpu_out",
           "HYPERPARAMETERS", "DEVICE_WEIGHT"]

# Chosen on the held-out split and leave-one-GPU-out (docs/models/gpu_profiles.md).
HYPERPARAMETERS = {"gbm": {"max_iter": 150, "learning_rate": 0.15, "max_leaf_nodes": 31},
                   "mlp": {"hidden": (128, 128, 128), "epochs": 30, "batch": 1024, "lr": 3e-3}}
# Weight of the regressor that sees the absolute device figures (1: no pooling, 0: none of
# them).  Of 0.25, 0.5, 0.75 and 1, 0.75 trades a little leave-one-GPU-out error for much
# less on the shapes outside the training range (docs/models/gpu_profiles.md), as for the
# bmm and convolution models (kernel_fit.DEVICE_WEIGHT).
DEVICE_WEIGHT = 0.75


def error_figures(pred: np.ndarray, actual: np.ndarray) -> dict:
    ratio = np.asarray(pred) / np.asarray(actual)
    return {"n": int(len(ratio)), "gmae": round(gmae(pred, actual), 4),
            "mape": round(float(np.mean(np.abs(ratio - 1))), 4),
            "median_ratio": round(float(np.median(ratio)), 4)}


@dataclass
class TrainingSet:
    """Features, targets and references of the measured GEMMs of several GPUs."""

    X: np.ndarray
    y: np.ndarray  # log(kernel / roofline)
    roof_ms: np.ndarray
    latency_ms: np.ndarray
    overhead_ms: np.ndarray  # the GPU's measurement overhead, per row
    gpu: np.ndarray  # index into names
    names: list[str]
    dims: np.ndarray | None = None  # (B, M, N, K) per row


def training_set(data: list[GemmMeasurements]) -> TrainingSet:
    parts = []
    for i, d in enumerate(data):
        X = gemm_features(d.B, d.M, d.N, d.K, d.figures, shared_weight=True)
        roof = roofline_s(d.B, d.M, d.N, d.K, d.figures, shared_weight=True) * 1e3
        parts.append((X, np.log(d.kernel_ms() / roof), roof, d.latency_ms,
                      np.full(len(roof), d.overhead_ms), np.full(len(roof), i),
                      np.column_stack([d.B, d.M, d.N, d.K])))
    cols = [np.concatenate([p[j] for p in parts]) for j in range(7)]
    return TrainingSet(*cols[:5], cols[5].astype(int), [d.name for d in data], cols[6])


def _fit_one(kind: str, X: np.ndarray, y: np.ndarray, seed: int):
    hp = HYPERPARAMETERS[kind]
    if kind == "gbm":
        return fit_gbm(X, y, seed=seed, **hp)
    if kind == "mlp":
        return fit_mlp(X, y, seed=seed, **hp)
    raise ValueError(f"unknown regressor kind {kind!r}")


def fit_regressor(kind: str, X: np.ndarray, y: np.ndarray, seed: int = 0, *,
                  device_weight: float | None = None, agnostic_columns=None):
    """Fit ``kind`` (``gbm`` or ``mlp``) on the :data:`FEATURE_NAMES` columns of ``X``,
    pooled as the module docstring says (``device_weight`` defaults to
    :data:`DEVICE_WEIGHT`; 1 returns the plain regressor on every feature)."""
    w = DEVICE_WEIGHT if device_weight is None else float(device_weight)
    cols = np.asarray(device_agnostic_columns() if agnostic_columns is None
                      else agnostic_columns, dtype=np.int64)
    if w >= 1.0:
        return _fit_one(kind, X, y, seed)
    agnostic = _fit_one(kind, X[:, cols], y, seed)
    if w <= 0.0:
        return PooledRegressor([(agnostic, cols, 1.0)])
    full = _fit_one(kind, X, y, seed)
    return PooledRegressor([(full, np.arange(X.shape[1]), w), (agnostic, cols, 1.0 - w)])


def _fitter(kind):
    """``kind`` as a ``fit(X, y, seed)`` callable (a callable passes through)."""
    return kind if callable(kind) else (lambda X, y, seed: fit_regressor(kind, X, y, seed))


def _latency(reg, ts: TrainingSet, rows: np.ndarray, overhead: np.ndarray) -> np.ndarray:
    # as GemmKernelModel.predict_shapes: never faster than the datasheet roofline
    return np.maximum(np.exp(reg.predict(ts.X[rows])), 1.0) * ts.roof_ms[rows] + overhead


def heldout_validation(ts: TrainingSet, kind, *, fraction: float = 0.2,
                       seed: int = 0) -> dict:
    """Fit on a random (1 - fraction) of every GPU's shapes, score the rest per GPU.

    Each GPU's measurement overhead (and so the kernel-time targets) is re-estimated from
    its training shapes alone.  ``kind``: ``gbm``, ``mlp`` or a ``fit(X, y, seed)``.
    """
    test = np.random.default_rng(seed).random(len(ts.y)) < fraction
    return _split_validation(ts, kind, test, seed,
                             f"random {fraction:.0%} of shapes per GPU held out (seed {seed})")


def shape_range_split(ts: TrainingSet) -> dict[str, np.ndarray]:
    """Masks of the shapes outside the training range, by kind: ``large`` (the top 10 %
    by FLOPs), ``tall_skinny`` (largest over smallest of B·M, N, K at least 256)."""
    if ts.dims is None:
        raise ValueError("the training set has no shapes (dims): build it with training_set()")
    B, M, N, K = ts.dims.T
    rows = B * M
    flops = rows * N * K
    lo, hi = np.minimum(np.minimum(rows, N), K), np.maximum(np.maximum(rows, N), K)
    return {"large": flops >= np.percentile(flops, 90), "tall_skinny": hi / lo >= 256}


def shape_range_validation(ts: TrainingSet, kind, *, seed: int = 0) -> dict:
    """Fit on every GPU's small and medium shapes, score the large and tall-skinny ones
    (:func:`shape_range_split`) per GPU and per kind."""
    masks = shape_range_split(ts)
    test = np.logical_or.reduce(list(masks.values()))
    return _split_validation(ts, kind, test, seed, "fit on small and medium shapes, scored "
                             "on the largest 10 % by FLOPs and tall-skinny ones", masks)


def _split_validation(ts: TrainingSet, kind, test: np.ndarray, seed: int, split: str,
                      kinds: dict | None = None) -> dict:
    overhead = np.empty(len(ts.y))
    for g in range(len(ts.names)):
        mine = ts.gpu == g
        overhead[mine] = overhead_from_latencies(ts.latency_ms[mine & ~test])
    kernel = np.maximum(ts.latency_ms - overhead, FLOOR_KERNEL_MS / 2)
    y = np.log(kernel / ts.roof_ms)
    t0 = time.perf_counter()
    reg = _fitter(kind)(ts.X[~test], y[~test], seed)
    out = {"split": split, "fit_s": round(time.perf_counter() - t0, 1), "per_gpu": {}}

    def figures(mask):
        rows = np.flatnonzero(mask)
        return error_figures(_latency(reg, ts, rows, overhead[rows]), ts.latency_ms[rows])

    for g, name in enumerate(ts.names):
        out["per_gpu"][name] = figures(test & (ts.gpu == g))
    out["all"] = figures(test)
    if kinds:
        out["per_kind"] = {k: figures(m) for k, m in kinds.items()}
    return out


def leave_one_gpu_out(ts: TrainingSet, kind, *, seed: int = 0) -> dict:
    """For each GPU: fit on the others, predict all its shapes from its datasheet figures.

    Nothing of the left-out GPU's measurements enters: its measurement overhead is the
    others' median, and "long shapes" (latency over 3x that overhead plus the floor
    kernel) are picked with the same figure.
    """
    out = {}
    for g, name in enumerate(ts.names):
        train, rows = ts.gpu != g, np.flatnonzero(ts.gpu == g)
        reg = _fitter(kind)(ts.X[train], ts.y[train], seed)
        others = float(np.median([ts.overhead_ms[ts.gpu == h][0]
                                  for h in range(len(ts.names)) if h != g]))
        pred = _latency(reg, ts, rows, np.full(len(rows), others))
        out[name] = error_figures(pred, ts.latency_ms[rows])
        out[name]["overhead_ms_used"] = round(others, 4)
        big = ts.latency_ms[rows] > 3 * (others + FLOOR_KERNEL_MS)
        out[name]["long_shapes"] = error_figures(pred[big], ts.latency_ms[rows][big])
    return out
