"""Embedding-bag kernels on a GPU with an L2 hit-rate model that knows the index
distribution (after the HiPC 2022 DLRM performance model, extended to Zipf indices).

A lookup reads one table row through L2; rows that are already in L2 cost L2 bandwidth
only, the rest also cost DRAM bandwidth.  DRAM rows = the distinct rows of the L2-resident
hot set that the batch touches (compulsory misses) + every lookup outside that hot set.
The hot set is the ``X`` most popular rows that fit in the L2 share (all rows are equally
popular for uniform indices; rank ``i`` has probability ``~ i**-alpha`` for Zipf).

Examples
--------
>>> from predictors.gpu.peaks import MeasuredPeaks
>>> pk = MeasuredPeaks(15e12, 1.39e12, 2.27e12, 40e6, 108, "")
>>> small = l2_hit_model(1000, 64, 100000, {"kind": "uniform"}, pk.l2_bytes)
>>> round(small["hit_rate"], 2)   # a 256 KB table stays in L2
0.99
"""
from __future__ import annotations

import math

import numpy as np

from ..profiles import KERNEL_MODEL_TYPES
from .peaks import MeasuredPeaks

__all__ = ["l2_hit_model", "embedding_bag_ms", "EmbeddingLookupModel", "FORWARD_OPS",
           "BACKWARD_OPS"]

FORWARD_OPS = ("embedding_bag", "_embedding_bag", "_embedding_bag_forward_only", "embedding")
BACKWARD_OPS = ("_embedding_bag_backward", "_embedding_bag_sparse_backward",
                "_embedding_bag_dense_backward", "embedding_dense_backward",
                "embedding_backward")
# The sparse backward is one gather kernel (PyTorch 2.x on CUDA: the uncoalesced lookups
# become the gradient's rows, no sort).  It is latency-bound per row, not bandwidth-bound:
# the 9 GPU-sized DLRMs of the H200 traces (sessions 5-6: 44k-419k lookups per table,
# dim 64 and 128, tables of 0.5-2 M rows) all took 0.61-0.64 ns per gathered row whatever
# the row's size (a share of the copy bandwidth, the model before, ranged 0.15-0.48 with
# the dim).  So a row costs this long on one SM, rows spread over all SMs (0.6 ns on the
# H200's 132); the bytes at the copy bandwidth bound it for wide rows.
GATHER_NS_PER_ROW_PER_SM = 80.0
SECTOR = 32  # bytes per DRAM/L2 sector: a row read rounds up to whole sectors
L2_SHARE = 0.5  # of L2 that holds table rows (indices, outputs and set conflicts take the rest)
_BUCKETS = 1500


def _sector_bytes(dim: int, itemsize: int) -> int:
    return int(math.ceil(dim * itemsize / SECTOR) * SECTOR)


def _zipf_buckets(rows: int, alpha: float):
    """Rank buckets (count, probability per row) of a Zipf(alpha) truncated to ``rows``."""
    edges = np.unique(np.round(np.geomspace(1, rows + 1, _BUCKETS)).astype(np.int64))
    lo, hi = edges[:-1], edges[1:]
    count = (hi - lo).astype(np.float64)
    # mean of i**-alpha over [lo, hi), by the integral for wide buckets
    if abs(alpha - 1.0) < 1e-9:
        mass = np.log(hi / lo)
    else:
        mass = (hi ** (1 - alpha) - lo ** (1 - alpha)) / (1 - alpha)
    mass = np.where(count == 1, lo ** -alpha, mass)
    p = mass / count
    p /= float(np.sum(p * count))
    return count, p


def l2_hit_model(rows: int, dim: int, lookups: int, distribution: dict | None,
                 l2_bytes: float, itemsize: int = 4) -> dict:
    """Fraction of ``lookups`` that hit in L2 for one table, and the DRAM rows read.

    Parameters
    ----------
    rows, dim : table shape; lookups : indices in the batch (batch x pooling);
    distribution : ``{"kind": "uniform"}`` or ``{"kind": "zipf", "alpha": a}`` (rank-1 is
        the row index, truncated to ``rows``); None means uniform.
    l2_bytes : the device's L2 size.

    Returns
    -------
    dict with ``hit_rate``, ``dram_rows``, ``unique_rows``, ``hot_rows``.
    """
    dist = distribution or {"kind": "uniform"}
    kind = dist.get("kind", "uniform")
    rows, lookups = max(int(rows), 1), max(int(lookups), 0)
    row_bytes = _sector_bytes(dim, itemsize)
    hot = int(min(rows, max(L2_SHARE * l2_bytes // row_bytes, 1)))
    if lookups == 0:
        return {"hit_rate": 0.0, "dram_rows": 0.0, "unique_rows": 0.0, "hot_rows": hot}
    if kind == "uniform":
        touched = 1.0 - math.exp(lookups * math.log1p(-1.0 / rows)) if rows > 1 else 1.0
        unique = rows * touched
        unique_hot = hot * touched
        hot_mass = hot / rows
    elif kind == "zipf":
        alpha = float(dist.get("alpha", 1.0))
        count, p = _zipf_buckets(rows, alpha)
        touched = 1.0 - np.exp(lookups * np.log1p(-np.minimum(p, 1 - 1e-12)))
        unique = float(np.sum(count * touched))
        first = np.cumsum(count)
        in_hot = np.clip(hot - (first - count), 0, count)  # rows of each bucket in the hot set
        unique_hot = float(np.sum(in_hot * touched))
        hot_mass = float(np.sum(in_hot * p))
    else:
        raise ValueError(f"distribution.kind: expected 'uniform' or 'zipf', got {kind!r}")
    dram_rows = min(unique_hot + lookups * (1.0 - hot_mass), float(lookups))
    return {"hit_rate": 1.0 - dram_rows / lookups, "dram_rows": dram_rows,
            "unique_rows": unique, "hot_rows": hot}


def embedding_bag_ms(rows: int, dim: int, batch: int, pooling: float,
                     distribution: dict | None, peaks: MeasuredPeaks, *,
                     backward: bool = False, sparse_grad: bool = True, itemsize: int = 4,
                     kernel_floor_ms: float = 0.003) -> float:
    """Predicted kernel time (ms) of one table's EmbeddingBag (sum) forward or backward.

    Forward: read indices and offsets, gather ``batch x pooling`` rows through L2 (DRAM
    for misses), write ``batch`` pooled rows.  Backward with sparse gradients (what SGD
    on ``sparse=True`` tables runs): one gather writes a gradient row per lookup from the
    (L2-resident) output gradient, :data:`GATHER_NS_PER_ROW_PER_SM` per row and SM (or
    its bytes at the copy bandwidth, if longer); no table rows are read.  Dense backward: scatter-add every lookup into the table (read
    + write of the touched rows, through L2).
    """
    lookups = int(round(batch * pooling))
    row = _sector_bytes(dim, itemsize)
    out = batch * row
    idx_bytes = lookups * 8 + batch * 8
    if not backward:
        hit = l2_hit_model(rows, dim, lookups, distribution, peaks.l2_bytes, itemsize)
        dram = hit["dram_rows"] * row + idx_bytes + out
        l2 = lookups * row + idx_bytes + out
    elif sparse_grad:
        dram = out + idx_bytes + lookups * row
        gather_s = lookups * GATHER_NS_PER_ROW_PER_SM * 1e-9 / peaks.sms
        return kernel_floor_ms + 1e3 * max(gather_s, dram / peaks.dram_bw)
    else:
        hit = l2_hit_model(rows, dim, lookups, distribution, peaks.l2_bytes, itemsize)
        dram = 2 * hit["dram_rows"] * row + idx_bytes + out + lookups * 16 * 8
        l2 = 2 * lookups * row + idx_bytes + out
    seconds = max(dram / peaks.dram_bw, l2 / peaks.l2_bw)
    # small kernels cannot keep enough bytes in flight: one DRAM latency (~0.6 us) more
    return kernel_floor_ms + 1e3 * seconds + 6e-4 * min(1.0, dram / (peaks.sms * 65536))


def _numel(shape) -> int:
    return int(np.prod(shape)) if shape else 1


class EmbeddingLookupModel:
    """Embedding(-bag) forward and backward kernels of captured ops on one GPU.

    Captured ops do not carry the index distribution, so ``predict_ms`` assumes
    ``default_distribution`` (uniform unless set); :func:`embedding_bag_ms` takes it
    explicitly.
    """

    op_class = "embedding"
    type_name = "gpu-embedding-l2"

    def __init__(self, peaks: MeasuredPeaks, *, default_distribution: dict | None = None,
                 kernel_floor_ms: float = 0.003):
        self.peaks = peaks
        self.default_distribution = default_distribution or {"kind": "uniform"}
        self.kernel_floor_ms = float(kernel_floor_ms)

    def _one(self, node: dict) -> float:
        op = node["name"].split("::")[-1]
        ins = node.get("input_shapes") or []
        dtypes = node.get("input_dtypes") or []
        size = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}.get(
            dtypes[0] if dtypes else "float32", 4)
        dist = self.default_distribution
        if op in FORWARD_OPS:
            if len(ins) < 2 or len(ins[0]) != 2:
                return math.nan
            rows, dim = ins[0]
            lookups = _numel(ins[1])
            batch = ins[2][0] if op != "embedding" and len(ins) > 2 and ins[2] else lookups
            if op == "embedding":
                batch = lookups  # no pooling: one output row per index
            return embedding_bag_ms(rows, dim, batch, lookups / max(batch, 1), dist,
                                    self.peaks, itemsize=size,
                                    kernel_floor_ms=self.kernel_floor_ms)
        if op in BACKWARD_OPS:
            if len(ins) < 2 or not ins[0]:
                return math.nan
            grad, lookups = ins[0], _numel(ins[1])
            dim = grad[-1]
            batch = _numel(grad[:-1])
            outs = node.get("output_shapes") or []
            rows = outs[0][0] if outs and outs[0] else lookups
            nnz = (node.get("output_nnz") or [None])[0]
            sparse = nnz is not None or "sparse" in op
            return embedding_bag_ms(rows, dim, batch, lookups / max(batch, 1), dist,
                                    self.peaks, backward=True, sparse_grad=sparse,
                                    itemsize=size, kernel_floor_ms=self.kernel_floor_ms)
        return math.nan

    def predict_ms(self, nodes: list[dict]) -> np.ndarray:
        out = np.full(len(nodes), np.nan)
        for i, node in enumerate(nodes):
            try:
                out[i] = self._one(node)
            except (IndexError, TypeError, ValueError):
                out[i] = np.nan
        return out

    def to_json(self) -> tuple[dict, dict[str, np.ndarray]]:
        return ({"type": self.type_name, "op_class": self.op_class,
                 "peaks": self.peaks.to_json(), "l2_share": L2_SHARE,
                 "default_distribution": self.default_distribution,
                 "kernel_floor_ms": self.kernel_floor_ms,
                 "method": "HiPC 2022 L2 hit-rate traffic model, Zipf-aware hot set"}, {})

    @classmethod
    def from_json(cls, meta: dict, arrays: dict) -> "EmbeddingLookupModel":
        return cls(MeasuredPeaks.from_json(meta["peaks"]),
                   default_distribution=meta.get("default_distribution"),
                   kernel_floor_ms=meta.get("kernel_floor_ms", 0.003))


KERNEL_MODEL_TYPES[EmbeddingLookupModel.type_name] = EmbeddingLookupModel
