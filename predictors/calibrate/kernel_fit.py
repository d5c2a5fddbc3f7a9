"""Fit and validate the bundled ``bmm`` and convolution models on the public NeuSight
kernel measurements (``../shared/data/microbench/neusight-kernels``).

The ``bmm`` model also trains on the NeuSight ``linear`` GEMMs of the same GPUs
(``neusight-gemm``, as single products ``(B*M) x N x K``): they reach larger matrices than
the ``bmm`` set (M, N, K up to 1024).  Only ``bmm`` rows are scored.

Errors are on the measured latency, as for the GEMM model (:mod:`.gemm_fit`): the
predicted kernel time plus the GPU's measurement overhead (NeuSight times whole ops: launch
and synchronisation included).  Two checks of extrapolation:

- **by shape range**: fit on small and medium shapes, score the shapes outside them
  (:func:`shape_range_split`: the largest 10 % by FLOPs, tall-skinny ones, tiny matrices
  in large batches; for convolutions, the largest 10 %, lopsided channel counts, large
  images and tiny ones);
- **leave one GPU out**: fit on the other GPUs, predict the one left out from its datasheet
  figures, with the others' median measurement overhead.
"""
from __future__ import annotations

import csv
import gzip
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..costs.batched_gemm import (
    DEVICE_COLUMNS,
    BatchedGemmModel,
    bmm_features,
    roofline_ms,
)
from ..costs.conv_kernels import ConvKernelModel, conv_features, conv_structured_ms
from ..costs.gemm_features import GpuFigures, figures_from_neusight_config
from ..costs.kernel_artifacts import KERNEL_MODEL_DIR, save_kernel_model
from ..costs.regressors import PooledRegressor, fit_gbm
from ..utils.metrics import summarize
from .public_data import (
    FLOOR_KERNEL_MS,
    load_neusight,
    microbench_dir,
    neusight_dir,
    overhead_from_latencies,
)

__all__ = [
    "HYPERPARAMETERS",
    "OPS",
    "KernelSet",
    "build_kernel_models",
    "fit_pooled",
    "kernels_dir",
    "leave_one_gpu_out",
    "load_kernel_set",
    "score",
    "shape_range_split",
    "shape_range_validation",
]

OPS = ("bmm", "conv")
_COLUMNS = {"bmm": ("B", "M", "N", "K"),
            "conv": ("B", "Input_Channel", "Output_Channel", "Input_Size", "Kernel_Szie",
                     "Stride", "Padding")}
# Chosen on the shape-range split and leave-one-GPU-out of the bmm data (benchmarks/
# gpu_kernels.py); the same for convolutions.
HYPERPARAMETERS = {"max_iter": 200, "learning_rate": 0.1, "max_leaf_nodes": 31,
                   "min_samples_leaf": 20}
# The share of the prediction (in log space) from a regressor that sees the absolute device
# figures; the rest comes from one that does not.  The lowest worst GPU left out in bmm of
# 0.5, 0.75 and 1; convolutions barely move with it (docs/models/kernels.md).
DEVICE_WEIGHT = 0.75


def kernels_dir() -> Path | None:
    return microbench_dir("neusight-kernels")


@dataclass
class KernelSet:
    """Measured kernels of one op on several GPUs: shapes, features, targets."""

    op: str
    dims: np.ndarray  # one row per kernel, columns _COLUMNS[op]
    X: np.ndarray
    y: np.ndarray  # log(kernel / base), base: the model's roofline or structured time
    base_ms: np.ndarray
    latency_ms: np.ndarray
    overhead_ms: np.ndarray  # the GPU's, per row
    gpu: np.ndarray  # index into names
    names: list[str]
    figures: list[GpuFigures]
    aux: np.ndarray | None = None  # rows that only train (the linear GEMMs of a bmm set)

    def __post_init__(self):
        if self.aux is None:
            self.aux = np.zeros(len(self.y), bool)


def _features(op: str, dims: np.ndarray, fig: GpuFigures):
    if op == "bmm":
        B, M, N, K = dims.T
        return bmm_features(B, M, N, K, fig), roofline_ms(B, M, N, K, fig)
    n, cin, cout, size, k, s, p = dims.T
    return (conv_features(n, cin, cout, size, size, k, s, p, fig),
            conv_structured_ms(n, cin, cout, size, size, k, s, p, fig)[0])


def load_kernel_set(op: str, folder: str | Path | None = None,
                    configs: str | Path | None = None, *, linear: bool = True) -> KernelSet:
    """Every GPU's measurements of ``op`` (``bmm`` or ``conv``), with the GPU's figures
    from NeuSight's ``device_configs``; for ``bmm`` with ``linear``, the same GPUs'
    ``linear`` GEMMs too (marked ``aux``)."""
    folder = Path(folder) if folder else (kernels_dir() / op if kernels_dir() else None)
    if folder is None or not folder.is_dir():
        raise FileNotFoundError(f"the NeuSight {op} measurements are not there "
                                f"(../shared/data/microbench/neusight-kernels/{op})")
    configs = Path(configs) if configs else folder.parents[1] / "neusight-gemm" / "device_configs"
    parts = []
    for path in sorted(folder.glob("*.csv.gz")):
        with gzip.open(path, "rt", newline="") as f:
            rows = [r for r in csv.DictReader(f) if r.get("OPName") == op]
        if not rows:
            continue
        fig = figures_from_neusight_config(configs / (rows[0]["Device"].replace(" ", "_")
                                                      + ".json"))
        dims = np.array([[float(r[c]) for c in _COLUMNS[op]] for r in rows])
        latency = np.array([float(r["Latency"]) for r in rows])
        overhead = overhead_from_latencies(latency)
        kernel = np.maximum(latency - overhead, FLOOR_KERNEL_MS / 2)
        X, struct = _features(op, dims, fig)
        parts.append((fig, dims, X, np.log(kernel / struct), struct, latency,
                      np.full(len(latency), overhead)))
    if not parts:
        raise FileNotFoundError(f"{folder}: no {op} measurements")
    names = [p[0].name for p in parts]
    gpu = [np.full(len(p[1]), i) for i, p in enumerate(parts)]
    aux = [np.zeros(len(p[1]), bool) for p in parts]
    if op == "bmm" and linear and neusight_dir() is not None:
        for m in load_neusight():
            if m.name not in names:
                continue
            g = names.index(m.name)
            dims = np.column_stack([np.ones_like(m.M), m.B * m.M, m.N, m.K])
            X, roof = _features(op, dims, parts[g][0])
            parts.append((m.figures, dims, X, np.log(m.kernel_ms() / roof), roof, m.latency_ms,
                          np.full(len(roof), m.overhead_ms)))
            gpu.append(np.full(len(roof), g))
            aux.append(np.ones(len(roof), bool))
    cat = [np.concatenate([p[j] for p in parts]) for j in range(1, 7)]
    return KernelSet(op, *cat, np.concatenate(gpu), names, [p[0] for p in parts[:len(names)]],
                     np.concatenate(aux))


def shape_range_split(ks: KernelSet) -> dict[str, np.ndarray]:
    """Masks of the test shapes, by kind; the rest is the training range.

    ``bmm``: ``large`` (top 10 % of FLOPs), ``tall_skinny`` (largest over smallest of M, N,
    K at least 48), ``tiny_batched`` (M x N at most 48 x 48 in batches of 256 or more).
    ``conv``: ``large`` (top 10 % of FLOPs), ``lopsided`` (channels in over out, or out over
    in, at least 32, or images of 128 pixels square and more), ``tiny`` (batch x pixels at
    most 64).
    """
    d, own = ks.dims, ~ks.aux
    if ks.op == "bmm":
        B, M, N, K = d.T
        flops = B * M * N * K
        lo = np.minimum(np.minimum(M, N), K)
        hi = np.maximum(np.maximum(M, N), K)
        masks = {"large": flops >= np.percentile(flops[own], 90), "tall_skinny": hi / lo >= 48,
                 "tiny_batched": (M * N <= 48 * 48) & (B >= 256)}
    else:
        n, cin, cout, size = d[:, 0], d[:, 1], d[:, 2], d[:, 3]
        flops = n * cin * cout * size ** 2 * d[:, 4] ** 2
        masks = {"large": flops >= np.percentile(flops[own], 90),
                 "lopsided": (np.maximum(cin, cout) / np.minimum(cin, cout) >= 32)
                 | (size >= 128), "tiny": n * size ** 2 <= 64}
    return {k: m & own for k, m in masks.items()}


def fit_pooled(X: np.ndarray, y: np.ndarray, seed: int = 0, *,
               device_weight: float = DEVICE_WEIGHT, threads: int | None = 1):
    """Boosted trees on every feature, pooled with boosted trees on all but the absolute
    device figures (the last :data:`DEVICE_COLUMNS`), as :func:`.gemm_fit.fit_regressor`."""
    if device_weight >= 1:
        return fit_gbm(X, y, seed=seed, threads=threads, **HYPERPARAMETERS)
    agnostic = np.arange(X.shape[1] - DEVICE_COLUMNS)
    part = fit_gbm(X[:, agnostic], y, seed=seed, threads=threads, **HYPERPARAMETERS)
    if device_weight <= 0:
        return PooledRegressor([(part, agnostic, 1.0)])
    full = fit_gbm(X, y, seed=seed, threads=threads, **HYPERPARAMETERS)
    return PooledRegressor([(full, np.arange(X.shape[1]), device_weight),
                            (part, agnostic, 1.0 - device_weight)])


def _model(ks: KernelSet, regressor, g: int, info: dict | None = None):
    cls = BatchedGemmModel if ks.op == "bmm" else ConvKernelModel
    return cls(ks.figures[g], regressor, info=info)


def _predict_kernel_ms(ks: KernelSet, regressor, rows: np.ndarray) -> np.ndarray:
    """The models' kernel ms for ``rows`` (each on its own GPU's figures)."""
    out = np.empty(len(rows))
    for g in np.unique(ks.gpu[rows]):
        sel = ks.gpu[rows] == g
        model = _model(ks, regressor, g)
        d = ks.dims[rows[sel]]
        if ks.op == "bmm":
            out[sel] = model.predict_shapes(*d.T)
        else:
            n, cin, cout, size, k, s, p = d.T
            out[sel] = model.predict_conv(n, cin, cout, size, size, k, s, p)
    return out


def score(ks: KernelSet, regressor, rows: np.ndarray, overhead_ms=None) -> dict:
    """Per GPU and over all: :func:`summarize` of predicted latency / measured - 1."""
    rows = np.asarray(rows)
    over = ks.overhead_ms[rows] if overhead_ms is None else overhead_ms
    pred = _predict_kernel_ms(ks, regressor, rows) + over
    err = pred / ks.latency_ms[rows] - 1.0
    out = {name: summarize(err[ks.gpu[rows] == g]) for g, name in enumerate(ks.names)
           if (ks.gpu[rows] == g).any()}
    out["all"] = summarize(err)
    return out


def leave_one_gpu_out(ks: KernelSet, seed: int = 0) -> dict:
    """For each GPU: fit on the others, predict all its shapes from its figures, with the
    others' median measurement overhead."""
    out = {}
    for g, name in enumerate(ks.names):
        train = ks.gpu != g
        reg = fit_pooled(ks.X[train], ks.y[train], seed)
        others = float(np.median([ks.overhead_ms[(ks.gpu == h) & ~ks.aux][0]
                                  for h in range(len(ks.names)) if h != g]))
        out[name] = score(ks, reg, np.flatnonzero(~train & ~ks.aux), others)[name]
    return out


def shape_range_validation(ks: KernelSet, seed: int = 0) -> dict:
    """Fit on the training range of :func:`shape_range_split`, score the rest: per GPU,
    and per kind of test shape over all GPUs."""
    masks = shape_range_split(ks)
    test = np.logical_or.reduce(list(masks.values()))
    reg = fit_pooled(ks.X[~test], ks.y[~test], seed)  # the linear GEMMs all train
    out = score(ks, reg, np.flatnonzero(test))
    for kind, mask in masks.items():
        out[f"kind:{kind}"] = score(ks, reg, np.flatnonzero(mask))["all"]
    return out


def _json(summaries: dict) -> dict:
    return {k: {m: round(v, 4) if isinstance(v, float) else v
                for m, v in s.to_json().items()} for k, s in summaries.items()}


def build_kernel_models(out_dir: str | Path = KERNEL_MODEL_DIR, *, ops=OPS, seed: int = 0,
                        validate: bool = True, log=print) -> list[Path]:
    """Fit each op's model on every GPU's measurements and write it, with its validation
    figures, to ``out_dir/gpu-OP.json``."""
    paths = []
    for op in ops:
        ks = load_kernel_set(op)
        info = {"data": f"../shared/data/microbench/neusight-kernels/{op} (sitar-lab/NeuSight, "
                        "MIT; fp32, PyTorch 2.1)" + (" and neusight-gemm (linear GEMMs)"
                                                     if ks.aux.any() else ""),
                "trained_on": ks.names, "kernels": int((~ks.aux).sum()),
                "trained_figures": [f.to_json() for f in ks.figures],
                "linear_gemms": int(ks.aux.sum()), "seed": seed, "hyperparameters": HYPERPARAMETERS,
                "device_weight": DEVICE_WEIGHT,
                "metric": "|predicted / measured latency - 1|, latency = kernel + the GPU's "
                          "measurement overhead (1st-percentile latency - 4 us)",
                "built_by": "python benchmarks/gpu_kernels.py --write"}
        if validate:
            info["shape_range"] = _json(shape_range_validation(ks, seed))
            info["leave_one_gpu_out"] = _json(leave_one_gpu_out(ks, seed))
            log(f"{op}: " + json.dumps(info["leave_one_gpu_out"]))
        reg = fit_pooled(ks.X, ks.y, seed)
        paths.append(save_kernel_model(_model(ks, reg, 0, info), Path(out_dir) / f"gpu-{op}.json"))
        log(f"wrote {paths[-1]}")
    return paths


MEMORY_BOUND_OPS = {"ln": "aten::native_layer_norm", "softmax": "aten::_softmax",
                    "add": "aten::add", "gelu": "aten::gelu", "relu": "aten::relu"}


def _row_node(op: str, b: int, h: int) -> dict:
    x = [b, h]
    ins = {"ln": [x, [h], [h], [h]], "add": [x, x]}.get(op, [x])
    outs = [x, [b, 1], [b, 1]] if op == "ln" else [x]
    return {"name": MEMORY_BOUND_OPS[op], "input_shapes": ins,
            "input_dtypes": ["float32"] * len(ins), "input_nnz": [None] * len(ins),
            "output_shapes": outs, "output_dtypes": ["float32"] * len(outs),
            "output_nnz": [None] * len(outs), "scalars": [], "phase": "forward",
            "thread": "main", "lookup": None}


def memory_bound_check(ops=tuple(MEMORY_BOUND_OPS), folder: str | Path | None = None,
                       long_ms: float = 0.05) -> dict[str, list[dict]]:
    """Each GPU profile's measured roofline against NeuSight's layer norm, softmax and
    elementwise kernels (``B x H`` fp32 rows): per op, one dict per GPU with ``error``
    (:func:`summarize` of the latency), ``ratio`` (median predicted / measured kernel of
    those over ``long_ms``), ``share`` (median share of the profile's DRAM bandwidth they
    stream their roofline bytes at), ``peaks`` (``measured`` or ``estimated``)."""
    from ..costs.op_costs import kernel_seconds  # deferred: imports torch
    from ..costs.roofline import kernel_cost
    from .gpu_profiles import profile_for_device

    base = Path(folder) if folder else kernels_dir()
    out: dict[str, list[dict]] = {}
    for op in ops:
        for path in sorted((base / op).glob("*.csv.gz")):
            with gzip.open(path, "rt", newline="") as f:
                rows = list(csv.DictReader(f))
            profile = profile_for_device(rows[0]["Device"])
            roof = profile.kernel_models["other"]
            B, H, lat = (np.array([float(r[c]) for r in rows]) for c in ("B", "H", "Latency"))
            over = overhead_from_latencies(lat)
            nodes = [_row_node(op, int(b), int(h)) for b, h in zip(B, H)]
            pred = np.array(kernel_seconds(nodes, profile.device, profile)[1]) * 1e3
            kernel = lat - over
            long = kernel > long_ms
            nbytes = np.array([kernel_cost(n, profile.device).bytes for n in nodes])
            share = nbytes / roof.peaks.dram_bw / ((kernel - roof.floor_ms) * 1e-3)
            out.setdefault(op, []).append({
                "gpu": profile.name, "kind": profile.kind,
                "peaks": "estimated" if roof.peaks.source.startswith("estimated") else "measured",
                "error": summarize((pred + over) / lat - 1),
                "ratio": float(np.median(pred[long] / kernel[long])),
                "share": float(np.median(share[long])), "long": int(long.sum())})
    return out
