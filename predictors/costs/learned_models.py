"""Learned kernel-time models per op class: an MLP (the papers' recipe) or gradient-boosted
trees, whichever validates better.  Both are stored as plain arrays (no pickle)."""
from __future__ import annotations

import math

import numpy as np

from ..hardware.specs import DeviceSpec
from ..profiles import KERNEL_MODEL_TYPES, ProfileError
from ..utils.metrics import gmae
from .op_features import FEATURES_VERSION, featurize, model_class

__all__ = ["LearnedKernelModel", "fit_class_model", "mape"]


def mape(pred: np.ndarray, actual: np.ndarray) -> float:
    """Mean absolute relative error."""
    return float(np.mean(np.abs(np.asarray(pred) / np.asarray(actual) - 1.0)))


# --- gradient-boosted trees, exported from scikit-learn as arrays ----------------------

def _export_gbm(est) -> dict[str, np.ndarray]:
    trees = [p[0].nodes for p in est._predictors]
    sizes = np.array([len(t) for t in trees], np.int64)
    cat = np.concatenate(trees)
    return {"tree_sizes": sizes, "value": cat["value"].astype(np.float64),
            "feature": cat["feature_idx"].astype(np.int64),
            "threshold": cat["num_threshold"].astype(np.float64),
            "left": cat["left"].astype(np.int64), "right": cat["right"].astype(np.int64),
            "leaf": cat["is_leaf"].astype(bool),
            "missing_left": cat["missing_go_to_left"].astype(bool),
            "baseline": np.atleast_1d(np.asarray(est._baseline_prediction,
                                                 np.float64).ravel()[0:1])}


def _predict_gbm(a: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    out = np.full(len(x), float(a["baseline"][0]))
    offset = 0
    rows = np.arange(len(x))
    for size in a["tree_sizes"]:
        node = np.zeros(len(x), np.int64)
        while True:
            g = node + offset
            active = ~a["leaf"][g]
            if not active.any():
                break
            ga = g[active]
            v = x[rows[active], a["feature"][ga]]
            go_left = np.where(np.isnan(v), a["missing_left"][ga], v <= a["threshold"][ga])
            node[active] = np.where(go_left, a["left"][ga], a["right"][ga])
        out += a["value"][node + offset]
        offset += int(size)
    return out


# --- a small MLP on standardized log features, trained with torch --------------------

def _fit_mlp(x: np.ndarray, y: np.ndarray, seed: int, epochs: int = 200) -> dict:
    import torch

    # One thread: a tiny network gains nothing from more, and OpenMP threads that wait
    # for a busy core stall each step for a whole scheduler slice.
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train_mlp(torch, x, y, seed, epochs)
    finally:
        torch.set_num_threads(old)


def _train_mlp(torch, x, y, seed, epochs) -> dict:
    """Full-batch L-BFGS: the data sets are small (hundreds to thousands of kernels)."""
    torch.manual_seed(seed)
    mu, sd = x.mean(0), x.std(0) + 1e-6
    ym, ys = y.mean(), y.std() + 1e-6
    xt = torch.tensor((x - mu) / sd, dtype=torch.float32)
    yt = torch.tensor((y - ym) / ys, dtype=torch.float32)[:, None]
    net = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 64), torch.nn.ReLU(),
                              torch.nn.Linear(64, 64), torch.nn.ReLU(),
                              torch.nn.Linear(64, 1))
    opt = torch.optim.LBFGS(net.parameters(), lr=0.5, max_iter=epochs,
                            history_size=20, line_search_fn="strong_wolfe")
    params = list(net.parameters())

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(net(xt), yt)
        loss = loss + 1e-5 * sum((p * p).sum() for p in params)  # weight decay
        loss.backward()
        return loss

    opt.step(closure)
    w = [p.detach().numpy().astype(np.float64) for p in net.parameters()]
    return {"mu": mu, "sd": sd, "ym": np.array([ym]), "ys": np.array([ys]),
            "w0": w[0], "b0": w[1], "w1": w[2], "b1": w[3], "w2": w[4], "b2": w[5]}


def _predict_mlp(a: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    h = (x - a["mu"]) / a["sd"]
    h = np.maximum(h @ a["w0"].T + a["b0"], 0)
    h = np.maximum(h @ a["w1"].T + a["b1"], 0)
    return (h @ a["w2"].T + a["b2"])[:, 0] * a["ys"][0] + a["ym"][0]


class LearnedKernelModel:
    """Kernel time of one op class: log(ms) predicted from :func:`featurize` features."""

    type_name = "learned"

    def __init__(self, op_class: str, kind: str, names: list[str], device: DeviceSpec,
                 arrays: dict[str, np.ndarray], metrics: dict | None = None,
                 features: int = FEATURES_VERSION):
        self.op_class, self.kind, self.names = op_class, kind, list(names)
        self.device, self.arrays, self.metrics = device, arrays, dict(metrics or {})
        self.features = features

    def _raw(self, x: np.ndarray) -> np.ndarray:
        a = self.arrays
        wants = a["w0"].shape[1] if self.kind == "mlp" else (
            int(a["feature"][~a["leaf"].astype(bool)].max(initial=-1)) + 1)
        if (x.shape[1] != wants) if self.kind == "mlp" else (x.shape[1] < wants):
            raise ProfileError(f"kernel model {self.op_class!r} was fitted on {wants} "
                               f"features; feature set {self.features} gives {x.shape[1]}")
        return _predict_mlp(a, x) if self.kind == "mlp" else _predict_gbm(a, x)

    def predict_ms(self, nodes: list[dict]) -> np.ndarray:
        out = np.full(len(nodes), np.nan)
        idx = [i for i, n in enumerate(nodes) if model_class(n) == self.op_class]
        if idx:
            x = np.stack([featurize(nodes[i], self.op_class, self.device, self.names,
                                    self.features) for i in idx])
            out[idx] = np.exp(self._raw(x))
        return out

    def to_json(self):
        meta = {"type": self.type_name, "op_class": self.op_class, "kind": self.kind,
                "names": self.names, "metrics": self.metrics, "features": self.features}
        return meta, self.arrays

    @classmethod
    def from_json(cls, meta: dict, arrays: dict, device: DeviceSpec | None = None):
        # Profiles written before feature versions existed used version 1.
        features = int(meta.get("features", 1))
        if features > FEATURES_VERSION:
            raise ProfileError(f"kernel model {meta.get('op_class')!r} uses feature set "
                               f"{features}; this version reads up to {FEATURES_VERSION}")
        _check_arrays(meta["op_class"], meta["kind"], arrays, len(meta["names"]))
        return cls(meta["op_class"], meta["kind"], meta["names"], device, arrays,
                   meta.get("metrics"), features)


_GBM_KEYS = ("tree_sizes", "value", "feature", "threshold", "left", "right", "leaf",
             "missing_left", "baseline")
_MLP_KEYS = ("mu", "sd", "ym", "ys", "w0", "b0", "w1", "b1", "w2", "b2")


def _check_arrays(op_class: str, kind: str, a: dict, n_features: int) -> None:
    """The arrays a model of ``kind`` walks, complete and consistent: a tree whose child
    points back up would loop forever, a short array fails mid-prediction."""
    where = f"kernel model {op_class!r} ({kind})"
    keys = _GBM_KEYS if kind == "gbm" else _MLP_KEYS if kind == "mlp" else None
    if keys is None:
        raise ProfileError(f"{where}: unknown kind")
    missing = [k for k in keys if k not in a]
    if missing:
        raise ProfileError(f"{where}: arrays missing: {', '.join(missing)}")
    if kind == "mlp":
        w0, w1, w2 = a["w0"], a["w1"], a["w2"]
        if not (w0.ndim == w1.ndim == w2.ndim == 2 and a["mu"].shape == a["sd"].shape
                == (w0.shape[1],) and a["b0"].shape == (w0.shape[0],)
                and w1.shape[1] == w0.shape[0] and a["b1"].shape == (w1.shape[0],)
                and w2.shape == (1, w1.shape[0]) and a["b2"].shape == (1,)
                and a["ym"].size == a["ys"].size == 1):
            raise ProfileError(f"{where}: layer shapes do not fit together")
        return
    if len(a["baseline"]) < 1:
        raise ProfileError(f"{where}: no baseline")
    sizes = a["tree_sizes"].astype(np.int64)
    n = int(sizes.sum())
    if (sizes < 1).any() or any(len(a[k]) != n for k in _GBM_KEYS[1:-1]):
        raise ProfileError(f"{where}: tree arrays of different lengths")
    local = np.arange(n) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    size_of = np.repeat(sizes, sizes)
    inner = ~a["leaf"].astype(bool)
    for side in ("left", "right"):
        child = a[side].astype(np.int64)[inner]
        if ((child <= local[inner]) | (child >= size_of[inner])).any():
            raise ProfileError(f"{where}: a tree's {side} child is not below its node")
    if (a["feature"][inner] < 0).any():
        raise ProfileError(f"{where}: a split on a negative feature index")


KERNEL_MODEL_TYPES[LearnedKernelModel.type_name] = LearnedKernelModel


def fit_class_model(op_class: str, nodes: list[dict], durations_ms: np.ndarray,
                    device: DeviceSpec, seed: int = 0, holdout: float = 0.2,
                    kinds=("mlp", "gbm"),
                    features: int = FEATURES_VERSION) -> LearnedKernelModel:
    """Fit both kinds on a random split, keep the better on the held-out part, then refit
    the winner on everything.  ``metrics`` records both kinds' held-out figures."""
    from sklearn.ensemble import HistGradientBoostingRegressor
    from threadpoolctl import threadpool_limits

    names = sorted({n["name"] for n in nodes})
    x = np.stack([featurize(n, op_class, device, names, features) for n in nodes])
    y = np.log(np.asarray(durations_ms, np.float64))
    rng = np.random.default_rng(seed)
    test = rng.random(len(x)) < holdout
    if test.sum() < 3 or (~test).sum() < 5:
        test = np.zeros(len(x), bool)

    def fit(kind, xs, ys):
        if kind == "mlp":
            return _fit_mlp(xs, ys, seed)
        # One OpenMP thread: on a busy machine a second one waits whole scheduler slices
        # at every barrier (300 s instead of 1 s, measured here).
        with threadpool_limits(limits=1):
            est = HistGradientBoostingRegressor(
                max_iter=300, learning_rate=0.08,
                min_samples_leaf=max(2, min(20, len(xs) // 20)),
                random_state=seed).fit(xs, ys)
        return _export_gbm(est)

    iso = np.array([bool(n.get("isolated")) for n in nodes])
    metrics = {"samples": int(len(x)), "held_out": int(test.sum()),
               "held_out_isolated": int((test & iso).sum())}
    best, best_err = kinds[0], math.inf
    if test.any():
        for kind in kinds:
            model = LearnedKernelModel(op_class, kind, names, device, fit(kind, x[~test],
                                                                          y[~test]),
                                       features=features)
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
    return LearnedKernelModel(op_class, best, names, device, fit(best, x, y), metrics,
                              features)
