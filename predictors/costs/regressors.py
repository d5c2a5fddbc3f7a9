"""Fitted regressors stored as plain arrays (never pickle), evaluated with numpy.

``TreeEnsemble`` holds the trees of a fitted scikit-learn ``HistGradientBoostingRegressor``
(its predictor nodes: value, feature_idx, num_threshold, left, right, is_leaf,
missing_go_to_left) plus the baseline; ``MlpRegressor`` holds the layers of a small MLP
(standardized inputs, ReLU hidden layers, linear output).  Both predict ``y`` for a feature
matrix with no dependency beyond numpy; fitting needs scikit-learn or torch.
``PooledRegressor`` is a weighted sum of such regressors, each on its own feature columns.
"""
from __future__ import annotations

import numpy as np

__all__ = ["TreeEnsemble", "MlpRegressor", "PooledRegressor", "fit_gbm", "fit_mlp",
           "regressor_from_arrays"]


class TreeEnsemble:
    """Sum of regression trees plus a baseline (gradient boosting, squared error)."""

    kind = "gbm"

    def __init__(self, baseline: float, tree_start: np.ndarray, value: np.ndarray,
                 feature_idx: np.ndarray, num_threshold: np.ndarray, left: np.ndarray,
                 right: np.ndarray, is_leaf: np.ndarray, missing_go_to_left: np.ndarray):
        self.baseline = float(baseline)
        self.tree_start = np.asarray(tree_start, dtype=np.int64)  # root of each tree
        self.value = np.asarray(value, dtype=np.float64)
        self.feature_idx = np.asarray(feature_idx, dtype=np.int64)
        self.num_threshold = np.asarray(num_threshold, dtype=np.float64)
        # children as global node indices
        self.left = np.asarray(left, dtype=np.int64)
        self.right = np.asarray(right, dtype=np.int64)
        self.is_leaf = np.asarray(is_leaf, dtype=bool)
        self.missing_go_to_left = np.asarray(missing_go_to_left, dtype=bool)

    @classmethod
    def from_sklearn(cls, model) -> "TreeEnsemble":
        """Export a fitted ``HistGradientBoostingRegressor`` (numerical features only)."""
        starts, parts = [], []
        offset = 0
        for (tree,) in model._predictors:
            nodes = tree.nodes
            if np.any(nodes["is_categorical"]):
                raise ValueError("categorical splits are not supported")
            starts.append(offset)
            leaf = nodes["is_leaf"].astype(bool)
            parts.append((nodes["value"], nodes["feature_idx"], nodes["num_threshold"],
                          np.where(leaf, 0, nodes["left"] + offset),
                          np.where(leaf, 0, nodes["right"] + offset), leaf,
                          nodes["missing_go_to_left"].astype(bool)))
            offset += len(nodes)
        cols = [np.concatenate([p[i] for p in parts]) for i in range(7)]
        baseline = float(np.ravel(model._baseline_prediction)[0])
        return cls(baseline, np.array(starts), *cols)

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        n = X.shape[0]
        node = np.broadcast_to(self.tree_start, (n, len(self.tree_start))).copy()
        rows = np.arange(n)[:, None]
        for _ in range(64):  # deeper than any tree we fit
            leaf = self.is_leaf[node]
            if leaf.all():
                break
            x = X[rows, self.feature_idx[node]]
            go_left = np.where(np.isnan(x), self.missing_go_to_left[node],
                               x <= self.num_threshold[node])
            node = np.where(leaf, node, np.where(go_left, self.left[node], self.right[node]))
        return self.baseline + self.value[node].sum(axis=1)

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"baseline": np.array([self.baseline]), "tree_start": self.tree_start,
                "value": self.value, "feature_idx": self.feature_idx.astype(np.int32),
                "num_threshold": self.num_threshold, "left": self.left.astype(np.int32),
                "right": self.right.astype(np.int32), "is_leaf": self.is_leaf,
                "missing_go_to_left": self.missing_go_to_left}

    @classmethod
    def from_arrays(cls, a: dict[str, np.ndarray]) -> "TreeEnsemble":
        nodes = ("value", "feature_idx", "num_threshold", "left", "right", "is_leaf",
                 "missing_go_to_left")
        n = len(a["value"])
        if any(len(a[k]) != n for k in nodes):
            raise ValueError("tree arrays of different lengths")
        inner = ~a["is_leaf"].astype(bool)
        node = np.flatnonzero(inner)
        for key in ("left", "right"):
            child = np.asarray(a[key]).astype(np.int64)[inner]
            if ((child < 0) | (child >= n)).any():
                raise ValueError(f"a tree's {key} child is outside the tree arrays")
            if (child <= node).any():  # a walk that never ends
                raise ValueError(f"a tree's {key} child is not below its node")
        if (np.asarray(a["feature_idx"])[inner] < 0).any():
            raise ValueError("a split on a negative feature index")
        if ((a["tree_start"] < 0) | (a["tree_start"] >= n)).any():
            raise ValueError("a tree starts outside the tree arrays")
        return cls(float(a["baseline"][0]), a["tree_start"], a["value"], a["feature_idx"],
                   a["num_threshold"], a["left"], a["right"], a["is_leaf"],
                   a["missing_go_to_left"])


class MlpRegressor:
    """``y = W_L relu(... relu(W_1 (x - mean) / std + b_1) ...) + b_L``."""

    kind = "mlp"

    def __init__(self, mean: np.ndarray, std: np.ndarray, weights: list[np.ndarray],
                 biases: list[np.ndarray]):
        self.mean = np.asarray(mean, dtype=np.float64)
        self.std = np.asarray(std, dtype=np.float64)
        self.weights = [np.asarray(w, dtype=np.float64) for w in weights]
        self.biases = [np.asarray(b, dtype=np.float64) for b in biases]

    def predict(self, X: np.ndarray) -> np.ndarray:
        h = (np.asarray(X, dtype=np.float64) - self.mean) / self.std
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = h @ w.T + b
            if i < len(self.weights) - 1:
                h = np.maximum(h, 0.0)
        return h[:, 0]

    def to_arrays(self) -> dict[str, np.ndarray]:
        out = {"mean": self.mean, "std": self.std}
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            out[f"w{i}"], out[f"b{i}"] = w, b
        return out

    @classmethod
    def from_arrays(cls, a: dict[str, np.ndarray]) -> "MlpRegressor":
        n = sum(1 for k in a if k.startswith("w") and k[1:].isdigit())
        return cls(a["mean"], a["std"], [a[f"w{i}"] for i in range(n)],
                   [a[f"b{i}"] for i in range(n)])


class PooledRegressor:
    """``y = sum_i weight_i * regressor_i(X[:, columns_i])`` (weights sum to 1).

    The GEMM model pools a regressor that sees every feature with one that sees only the
    device-agnostic ones (train.py): the GPU-specific part of the prediction is shrunk
    toward what holds across GPUs, which is what an unseen GPU can expect.
    Stored as ``weights``, ``kinds`` and per component ``c{i}.columns`` and
    ``c{i}.<array>`` (the component's own arrays).
    """

    kind = "pooled"

    def __init__(self, components: list[tuple[object, np.ndarray, float]]):
        if not components:
            raise ValueError("pooled regressor: no components")
        self.components = [(reg, np.asarray(cols, dtype=np.int64), float(w))
                           for reg, cols, w in components]

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        return sum(w * reg.predict(X[:, cols]) for reg, cols, w in self.components)

    def to_arrays(self) -> dict[str, np.ndarray]:
        out = {"weights": np.array([w for _, _, w in self.components]),
               "kinds": np.array([reg.kind for reg, _, _ in self.components])}
        for i, (reg, cols, _) in enumerate(self.components):
            out[f"c{i}.columns"] = cols.astype(np.int32)
            out.update({f"c{i}.{k}": v for k, v in reg.to_arrays().items()})
        return out

    @classmethod
    def from_arrays(cls, a: dict[str, np.ndarray]) -> "PooledRegressor":
        comps = []
        for i, (kind, w) in enumerate(zip(a["kinds"], a["weights"])):
            if str(kind) == cls.kind:
                raise ValueError("pooled regressor: nested pooling")
            prefix = f"c{i}."
            sub = {k[len(prefix):]: v for k, v in a.items() if k.startswith(prefix)}
            comps.append((regressor_from_arrays(str(kind), sub), sub["columns"], float(w)))
        return cls(comps)


def regressor_from_arrays(kind: str, arrays: dict[str, np.ndarray]):
    if kind == "gbm":
        return TreeEnsemble.from_arrays(arrays)
    if kind == "mlp":
        return MlpRegressor.from_arrays(arrays)
    if kind == "pooled":
        return PooledRegressor.from_arrays(arrays)
    raise ValueError(f"unknown regressor kind {kind!r}")


def fit_gbm(X: np.ndarray, y: np.ndarray, *, seed: int = 0, threads: int | None = None,
            **params) -> TreeEnsemble:
    """Fit scikit-learn's histogram gradient boosting and export its trees.  ``params``
    override the defaults (200 trees of up to 31 leaves, rate 0.1, L2 1.0, no early
    stopping); ``threads`` caps its OpenMP threads (1 on a busy machine: a second thread
    waits whole scheduler slices at every barrier)."""
    from sklearn.ensemble import HistGradientBoostingRegressor  # deferred: scikit-learn
    from threadpoolctl import threadpool_limits  # deferred: scikit-learn's thread pools

    settings = dict(max_iter=200, learning_rate=0.1, max_leaf_nodes=31, min_samples_leaf=20,
                    l2_regularization=1.0, early_stopping=False)
    settings.update(params)
    with threadpool_limits(limits=threads):
        model = HistGradientBoostingRegressor(**settings, random_state=seed).fit(X, y)
    return TreeEnsemble.from_sklearn(model)


def fit_mlp(X: np.ndarray, y: np.ndarray, *, hidden: tuple[int, ...] = (128, 128, 128),
            solver: str = "adam", epochs: int = 60, batch: int = 256, lr: float = 2e-3,
            seed: int = 0, threads: int = 2) -> MlpRegressor:
    """Fit an MLP (ReLU hidden layers) on standardized, already log-scaled features, with
    mean squared error, as the DLRM performance-model papers do.

    ``solver="adam"``: mini-batches, a cosine learning-rate schedule, ``epochs`` passes
    (large training sets: the GEMM models).  ``solver="lbfgs"``: full-batch L-BFGS with a
    standardized target and a little weight decay, at most ``epochs`` iterations (small
    sets: hundreds to thousands of kernels of one op class)."""
    import torch  # deferred: torch

    torch.manual_seed(seed)
    prev_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        if solver == "lbfgs":
            mean, std = X.mean(axis=0), X.std(axis=0) + 1e-6
            ym, ys = float(y.mean()), float(y.std()) + 1e-6
        elif solver == "adam":
            mean, std = X.mean(axis=0), X.std(axis=0)
            std = np.where(std > 1e-9, std, 1.0)
            ym, ys = 0.0, 1.0
        else:
            raise ValueError(f"unknown solver {solver!r}")
        xt = torch.tensor((X - mean) / std, dtype=torch.float32)
        yt = torch.tensor((y - ym) / ys, dtype=torch.float32)[:, None]
        sizes = (X.shape[1],) + tuple(hidden) + (1,)
        layers: list = []
        for i in range(len(sizes) - 1):
            layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
            if i < len(sizes) - 2:
                layers.append(torch.nn.ReLU())
        net = torch.nn.Sequential(*layers)
        if solver == "lbfgs":
            _lbfgs(torch, net, xt, yt, epochs)
        else:
            _adam(torch, net, xt, yt, epochs, batch, lr, seed)
        linears = [m for m in net if isinstance(m, torch.nn.Linear)]
        weights = [m.weight.detach().numpy().astype(np.float64) for m in linears]
        biases = [m.bias.detach().numpy().astype(np.float64) for m in linears]
        # the target's scale folds into the output layer
        weights[-1], biases[-1] = weights[-1] * ys, biases[-1] * ys + ym
        return MlpRegressor(mean, std, weights, biases)
    finally:
        torch.set_num_threads(prev_threads)


def _adam(torch, net, xt, yt, epochs: int, batch: int, lr: float, seed: int) -> None:
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        perm = torch.randperm(len(xt), generator=gen)
        for i in range(0, len(xt), batch):
            idx = perm[i:i + batch]
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(net(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
        sched.step()


def _lbfgs(torch, net, xt, yt, iterations: int) -> None:
    opt = torch.optim.LBFGS(net.parameters(), lr=0.5, max_iter=iterations, history_size=20,
                            line_search_fn="strong_wolfe")
    params = list(net.parameters())

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(net(xt), yt)
        loss = loss + 1e-5 * sum((p * p).sum() for p in params)  # weight decay
        loss.backward()
        return loss

    opt.step(closure)
