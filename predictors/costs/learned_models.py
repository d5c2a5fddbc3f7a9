"""Learned kernel-time models per op class: an MLP (the papers' recipe) or gradient-boosted
trees, whichever validates better.  Both are stored as plain arrays (no pickle)."""
from __future__ import annotations

import math

import numpy as np

from ..hardware.specs import DeviceSpec
from ..profiles import KERNEL_MODEL_TYPES, ProfileError
from ..utils.metrics import gmae
from .op_features import FEATURES_VERSION, featurize, model_class
from .regressors import (
    MlpRegressor,
    TreeEnsemble,
    fit_gbm,
    fit_mlp,
    regressor_from_arrays,
)
from .roofline import kernel_cost

__all__ = ["LearnedKernelModel", "fit_class_model", "mape"]


def mape(pred: np.ndarray, actual: np.ndarray) -> float:
    """Mean absolute relative error."""
    return float(np.mean(np.abs(np.asarray(pred) / np.asarray(actual) - 1.0)))


class LearnedKernelModel:
    """Kernel time of one op class: log(ms) predicted from :func:`featurize` features."""

    type_name = "learned"

    def __init__(self, op_class: str, regressor, names: list[str], device: DeviceSpec,
                 metrics: dict | None = None, features: int = FEATURES_VERSION):
        self.op_class, self.regressor, self.names = op_class, regressor, list(names)
        self.device, self.metrics = device, dict(metrics or {})
        self.features = features

    @property
    def kind(self) -> str:
        return self.regressor.kind

    def _raw(self, x: np.ndarray) -> np.ndarray:
        wants = _features_wanted(self.regressor)
        if (x.shape[1] != wants) if self.kind == "mlp" else (x.shape[1] < wants):
            raise ProfileError(f"kernel model {self.op_class!r} was fitted on {wants} "
                               f"features; feature set {self.features} gives {x.shape[1]}")
        return self.regressor.predict(x)

    def predict_ms(self, nodes: list[dict]) -> np.ndarray:
        out = np.full(len(nodes), np.nan)
        idx = [i for i, n in enumerate(nodes) if model_class(n) == self.op_class]
        if idx:
            x = np.stack([featurize(stand_in(nodes[i], self.names), self.op_class,
                                    self.device, self.names, self.features) for i in idx])
            out[idx] = np.exp(self._raw(x))
        return out

    def to_json(self):
        meta = {"type": self.type_name, "op_class": self.op_class, "kind": self.kind,
                "arrays": ARRAYS_FORMAT, "names": self.names, "metrics": self.metrics,
                "features": self.features}
        return meta, self.regressor.to_arrays()

    @classmethod
    def from_json(cls, meta: dict, arrays: dict, device: DeviceSpec | None = None):
        # Profiles written before feature versions existed used version 1.
        features = int(meta.get("features", 1))
        if features > FEATURES_VERSION:
            raise ProfileError(f"kernel model {meta.get('op_class')!r} uses feature set "
                               f"{features}; this version reads up to {FEATURES_VERSION}")
        where = f"kernel model {meta['op_class']!r} ({meta['kind']})"
        try:
            if meta.get("arrays") == ARRAYS_FORMAT:
                regressor = regressor_from_arrays(meta["kind"], arrays)
            else:
                regressor = _from_first_format(meta["kind"], arrays)
        except KeyError as exc:
            raise ProfileError(f"{where}: arrays missing: {exc.args[0]}") from None
        except ValueError as exc:
            raise ProfileError(f"{where}: {exc}") from None
        return cls(meta["op_class"], regressor, meta["names"], device, meta.get("metrics"),
                   features)


def stand_in(node: dict, names: list[str]) -> dict:
    """``node``, or an op a model knows that does the same work when the model never saw
    ``node``'s (its features would sit outside everything it was fitted on): an
    in-place ``copy_`` (DDP's gradient buckets) reads and writes what a ``clone`` of its
    source does."""
    if node["name"] in names:
        return node
    if (node["name"] == "aten::copy_" and "aten::clone" in names
            and len(node["input_shapes"]) >= 2):
        return {**node, "name": "aten::clone", "overload": "default",
                "input_shapes": node["input_shapes"][1:2],
                "input_dtypes": node["input_dtypes"][1:2],
                "input_nnz": node["input_nnz"][1:2]}
    return node


# The arrays of a model: the regressors' own (:mod:`.regressors`).  Profiles calibrated
# before carry the first format, which reads into the same regressors.
ARRAYS_FORMAT = "regressors"


def _features_wanted(regressor) -> int:
    if isinstance(regressor, MlpRegressor):
        return regressor.weights[0].shape[1]
    inner = ~regressor.is_leaf
    return int(regressor.feature_idx[inner].max(initial=-1)) + 1


def _from_first_format(kind: str, a: dict):
    """A regressor from the first array format: trees with node indices local to each
    tree, or a two-layer MLP with a standardized target."""
    if kind == "mlp":
        if not (a["w0"].ndim == a["w1"].ndim == a["w2"].ndim == 2
                and a["mu"].shape == a["sd"].shape == (a["w0"].shape[1],)
                and a["w2"].shape[0] == 1 and a["ym"].size == a["ys"].size == 1):
            raise ValueError("layer shapes do not fit together")
        ym, ys = float(a["ym"][0]), float(a["ys"][0])
        return MlpRegressor.from_arrays({
            "mean": a["mu"], "std": a["sd"], "w0": a["w0"], "b0": a["b0"], "w1": a["w1"],
            "b1": a["b1"], "w2": a["w2"] * ys, "b2": a["b2"] * ys + ym})
    if kind != "gbm":
        raise ValueError("unknown kind")
    sizes = np.asarray(a["tree_sizes"], np.int64)
    if (sizes < 1).any() or len(a["baseline"]) < 1:
        raise ValueError("tree arrays of different lengths")
    start = np.cumsum(sizes) - sizes
    offset = np.repeat(start, sizes)
    if len(offset) != len(a["left"]):
        raise ValueError("tree arrays of different lengths")
    leaf = np.asarray(a["leaf"], bool)
    return TreeEnsemble.from_arrays({
        "baseline": a["baseline"], "tree_start": start, "value": a["value"],
        "feature_idx": a["feature"], "num_threshold": a["threshold"],
        "left": np.where(leaf, 0, a["left"] + offset),
        "right": np.where(leaf, 0, a["right"] + offset), "is_leaf": leaf,
        "missing_go_to_left": a["missing_left"]})


KERNEL_MODEL_TYPES[LearnedKernelModel.type_name] = LearnedKernelModel


def fitted_range(nodes: list[dict], device: DeviceSpec, durations_ms=None) -> dict:
    """The largest roofline FLOPs and bytes among a model's samples: above them its
    predictions are extrapolations (``costs/large_ops.py`` takes over).  With the
    samples' times, also ``top_flops_per_s``: the 90th percentile of the FLOP rate its
    samples in the top decade of FLOPs reached, which no larger op exceeds."""
    costs = [kernel_cost(n, device) for n in nodes]
    top = {"max_flops": max((c.flops for c in costs), default=0.0),
           "max_bytes": max((c.bytes for c in costs), default=0.0)}
    if durations_ms is not None and top["max_flops"] > 0:
        rates = [c.flops / (ms * 1e-3) for c, ms in zip(costs, durations_ms)
                 if c.flops >= top["max_flops"] / 10 and ms > 0]
        top["top_flops_per_s"] = float(np.percentile(rates, 90)) if len(rates) >= 5 else 0.0
    return {k: float(v) for k, v in top.items() if v > 0}   # profiles check: positive


def fit_class_model(op_class: str, nodes: list[dict], durations_ms: np.ndarray,
                    device: DeviceSpec, seed: int = 0, holdout: float = 0.2,
                    kinds=("mlp", "gbm"),
                    features: int = FEATURES_VERSION) -> LearnedKernelModel:
    """Fit both kinds on a random split, keep the better on the held-out part, then refit
    the winner on everything.  ``metrics`` records both kinds' held-out figures."""
    names = sorted({n["name"] for n in nodes})
    x = np.stack([featurize(n, op_class, device, names, features) for n in nodes])
    y = np.log(np.asarray(durations_ms, np.float64))
    rng = np.random.default_rng(seed)
    test = rng.random(len(x)) < holdout
    if test.sum() < 3 or (~test).sum() < 5:
        test = np.zeros(len(x), bool)

    def fit(kind, xs, ys):
        # One thread: a small fit gains nothing from more, and on a busy machine a thread
        # that waits for a core stalls every step for a whole scheduler slice.
        if kind == "mlp":
            return fit_mlp(xs, ys, hidden=(64, 64), solver="lbfgs", epochs=200, seed=seed,
                           threads=1)
        return fit_gbm(xs, ys, seed=seed, threads=1, max_iter=300, learning_rate=0.08,
                       min_samples_leaf=max(2, min(20, len(xs) // 20)),
                       l2_regularization=0.0, early_stopping="auto")

    iso = np.array([bool(n.get("isolated")) for n in nodes])
    metrics = {"samples": int(len(x)), "held_out": int(test.sum()),
               "held_out_isolated": int((test & iso).sum()),
               **fitted_range(nodes, device, durations_ms)}
    best, best_err = kinds[0], math.inf
    if test.any():
        for kind in kinds:
            model = LearnedKernelModel(op_class, fit(kind, x[~test], y[~test]), names,
                                       device, features=features)
            # clipped: a diverged fit must lose the comparison, not overflow into inf
            pred = np.exp(np.clip(model._raw(x[test]), -60.0, 60.0))
            actual = np.exp(y[test])
            metrics[kind] = {"gmae": gmae(pred, actual), "mape": mape(pred, actual)}
            # Microbenchmarks and in-context samples carry different noise: split them.
            for part, sel in (("isolated", iso[test]), ("in_context", ~iso[test])):
                if sel.any():
                    metrics[kind][f"gmae_{part}"] = gmae(pred[sel], actual[sel])
            if metrics[kind]["gmae"] < best_err:
                best, best_err = kind, metrics[kind]["gmae"]
    metrics["chosen"] = best
    return LearnedKernelModel(op_class, fit(best, x, y), names, device, metrics, features)
