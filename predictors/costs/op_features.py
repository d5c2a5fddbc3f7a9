"""Features of captured ops for the learned kernel models (log-scaled sizes, as the papers).

Every op belongs to one model class; each class has a fixed feature vector built from the
op's shapes, its roofline FLOPs and bytes, and (embeddings) the index distribution.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ..hardware.specs import DeviceSpec
from ..model.op_classes import classify
from .convolution import conv_pass
from .roofline import _gemm_flops, kernel_cost

__all__ = ["MODEL_CLASSES", "FEATURES_VERSION", "model_class", "featurize",
           "unique_fraction"]

# 1: sizes, roofline figures, names.  2: + the alignment of GEMM dimensions.  3: + the
# innermost dimension, broadcasting and the phase of elementwise ops, reductions and
# copies.  4: + their first input's layout and age.  5: + the age for embedding lookups,
# their backwards and sparse updates.  A model keeps the version it was fitted with, so
# older profiles predict unchanged.
FEATURES_VERSION = 5
_PHASES = ("forward", "backward", "optimizer")

MODEL_CLASSES = ("gemm", "embedding_fwd", "embedding_bwd", "sparse_update", "elementwise",
                 "reduction", "memcpy")


def model_class(node: dict) -> str | None:
    """The learned-model class of a captured op, or None for views and convolutions."""
    cat = classify(node["name"])
    if cat == "view" or conv_pass(node["name"]) is not None:
        return None  # convolutions: no CPU samples, the roofline prices them
    if cat == "embedding":
        return "embedding_bwd" if "backward" in node["name"] else "embedding_fwd"
    if any(n is not None for n in node.get("input_nnz", ())):
        return "sparse_update"
    return cat


def _log(x: float) -> float:
    return math.log2(1.0 + max(0.0, float(x)))


@lru_cache(maxsize=4096)
def _unique_fraction(rows: int, lookups: int, kind: str, alpha: float) -> float:
    if lookups <= 0:
        return 1.0
    if kind == "uniform":
        return rows * (1.0 - (1.0 - 1.0 / rows) ** lookups) / lookups
    # Zipf truncated to ``rows``: expected distinct ranks, sum_k 1 - (1 - p_k)^L, with
    # the head summed exactly and the tail (p_k * L << 1) by its integral.
    head = min(rows, 200_000)
    k = np.arange(1, head + 1, dtype=np.float64)
    w = k ** -alpha
    if rows > head:  # integral of x^-alpha from head+0.5 to rows+0.5
        a, b = head + 0.5, rows + 0.5
        tail_w = (math.log(b / a) if abs(alpha - 1) < 1e-9
                  else (b ** (1 - alpha) - a ** (1 - alpha)) / (1 - alpha))
    else:
        tail_w = 0.0
    total = w.sum() + tail_w
    p = w / total
    distinct = float((-np.expm1(lookups * np.log1p(-np.minimum(p, 1 - 1e-15)))).sum())
    distinct += min(rows - head, lookups * tail_w / total) if rows > head else 0.0
    return min(1.0, distinct / lookups)


def unique_fraction(rows: int, lookups: int, distribution: dict | None) -> float:
    """Expected fraction of distinct rows among ``lookups`` indices (1 = no reuse)."""
    dist = distribution or {"kind": "uniform"}
    return _unique_fraction(int(rows), int(lookups), dist["kind"],
                            float(dist.get("alpha", 0.0)))


def _alignment(x: float) -> float:
    """Trailing zero bits of a dimension, capped at 4 (a multiple of 16).

    On this CPU an ``mm``/``addmm`` whose output rows are not a multiple of 8 floats takes
    ~1.5x the time of an aligned one of the same size (320x2049x512: 31 GFLOP/s,
    320x2056x512: 52); log sizes cannot tell the two apart."""
    x = int(x)
    return float(min((x & -x).bit_length() - 1, 4)) if x > 0 else 0.0


def _layout_features(node: dict) -> list[float]:
    """What sizes alone miss for elementwise ops, reductions and copies.

    - The innermost dimension (length and alignment) and the number of rows: a softmax
      over rows of 95 floats runs its vector loop with a scalar tail on every row.
    - The second input's size and whether it is smaller than the output (a broadcast
      bias or scalar tensor; one piece of a ``cat``).
    - The phase: optimizer updates read weights and gradients that the backward pass
      has evicted from the caches; forward ops mostly read what the op before wrote.
    Held-out GMAE on the bundled profile's samples, v2 -> v3 (``benchmarks/feature_ab.py``):
    elementwise 14.6 -> 11.6 %, reductions 13.9 -> 12.9 %, copies 20.1 -> 16.2 %."""
    ins = node["input_shapes"]
    first = tuple(ins[0]) if ins and ins[0] else (1,)
    second = math.prod(ins[1]) if len(ins) > 1 and ins[1] else 1
    out = (math.prod(node["output_shapes"][0]) if node["output_shapes"]
           and node["output_shapes"][0] else 1)
    phase = node.get("phase")
    return ([_log(first[-1]), _alignment(first[-1]), _log(math.prod(first[:-1]))] +
            [_log(second), float(second < out)] + [float(phase == p) for p in _PHASES])


def _age(node: dict) -> float:
    """The first input's age in bytes written since (log KiB; 0: just written, or a
    microbenchmark's warm input).  For a table's lookup or sparse update the first input
    is the weight, which no op of the step writes: its age is everything the step wrote
    before, how far the caches have moved on since the table's rows were last read; for
    a lookup's backward, the incoming gradient's (feature version 5: without it, the
    sparse update of a 2-ms DLRM step runs at half the time its larger steps' updates
    teach the model)."""
    return _log(float(node.get("input_age_bytes") or 0) / 1024.0)


def _input_features(node: dict) -> list[float]:
    """The first input's layout and age (feature version 4): whether it is contiguous,
    the stride of its innermost dimension, how far from the end its unit-stride dimension
    sits, and the bytes the step wrote since that input was written (its reuse distance:
    whether it is still in a cache).  Two clones of the same shape and layout in every
    attention backward take 2-3x apart, the first reading a gradient written long
    before.  Nodes without them (traces, microbenchmarks) count as
    contiguous and just written."""
    age = [_age(node)]
    ins = node["input_shapes"]
    shape = tuple(ins[0]) if ins and ins[0] else ()
    stride = node.get("input_stride")
    if not shape or not stride or len(stride) != len(shape):
        return [1.0, _log(1), 0.0] + age
    expected, contiguous = 1, True
    for size, st in zip(reversed(shape), reversed(stride)):
        if size != 1 and st != expected:
            contiguous = False
        expected *= size
    unit = next((i for i, (size, st) in enumerate(zip(reversed(shape), reversed(stride)))
                 if st == 1 and size != 1), len(shape))
    return [float(contiguous), _log(max(stride[-1], 1)), float(unit)] + age


def _gemm_dims(node: dict) -> tuple[float, float, float, float]:
    op = node["name"].split("::")[-1]
    ins = node["input_shapes"]
    if op in ("mm", "matmul"):
        (m, k), (_, n) = ins[0][-2:], ins[1][-2:]
        return 1, m, n, k
    if op == "addmm":
        (m, k), (_, n) = ins[1], ins[2]
        return 1, m, n, k
    a, b = (ins[0], ins[1]) if op == "bmm" else (ins[1], ins[2])
    return a[0], a[1], b[2], a[2]


def featurize(node: dict, cls: str, device: DeviceSpec, names: list[str],
              version: int = FEATURES_VERSION) -> np.ndarray:
    """The feature vector of ``node`` for model class ``cls``.

    ``names`` lists the op names the class model knows (one-hot; unknown names get none);
    ``version`` is the feature set (:data:`FEATURES_VERSION`) the model was fitted with.
    """
    cost = kernel_cost(node, device)
    out_numel = sum(math.prod(s) if s else 1 for s in node["output_shapes"])
    in0 = math.prod(node["input_shapes"][0]) if node["input_shapes"] else 1
    # ``isolated``: a microbenchmark sample (warm caches) rather than an op measured
    # inside a training step; predictions are always in context (0).
    base = [_log(cost.flops), _log(cost.bytes), _log(out_numel), _log(in0),
            _log(cost.seconds * 1e9), float(bool(node.get("isolated")))]
    if cls == "gemm":
        b, m, n, k = _gemm_dims(node)
        extra = [_log(b), _log(m), _log(n), _log(k), _log(_gemm_flops(
            node["name"].split("::")[-1], node["input_shapes"])),
            float(node["name"].endswith("addmm"))]
        if version >= 2:
            extra += [_alignment(m), _alignment(n), _alignment(k)]
    elif cls in ("embedding_fwd", "embedding_bwd"):
        lookup = node.get("lookup") or {}
        ins = node["input_shapes"]
        if cls == "embedding_fwd":
            rows, dim = ins[0][0], ins[0][1]
            lookups, batch = math.prod(ins[1]), (ins[2][0] if len(ins) > 2 else ins[1][0])
        else:
            rows = lookup.get("rows", node["output_shapes"][0][0] if node["output_shapes"]
                              else 1)
            dim, lookups = ins[0][-1], math.prod(ins[1])
            batch = ins[0][0]
        uf = unique_fraction(rows, lookups, lookup.get("distribution"))
        extra = [_log(rows), _log(dim), _log(lookups), _log(batch),
                 _log(lookups / max(batch, 1)), uf, _log(uf * lookups * dim * 4),
                 _log(rows * dim * 4)]
        if version >= 5:
            extra.append(_age(node))
    elif cls == "sparse_update":
        shape, nnz = next((s, n) for s, n in zip(node["input_shapes"], node["input_nnz"])
                          if n is not None)
        lookup = node.get("lookup") or {}
        uf = unique_fraction(shape[0], nnz, lookup.get("distribution"))
        extra = [_log(nnz), _log(math.prod(shape[1:])), _log(shape[0]), uf,
                 _log(uf * nnz), _log(lookup.get("pooling", 1))]
        if version >= 5:
            extra.append(_age(node))
    else:
        extra = [_log(len(node["input_shapes"])), float(node["name"].endswith("_"))]
        if version >= 3:
            extra += _layout_features(node)
        if version >= 4:
            extra += _input_features(node)
    onehot = [float(node["name"] == n) for n in names]
    return np.asarray(base + extra + onehot, dtype=np.float64)
