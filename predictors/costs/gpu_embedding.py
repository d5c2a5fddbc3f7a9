"""Embedding-bag kernels on a GPU with an L2 hit-rate model that knows the index
distribution (after the HiPC 2022 DLRM performance model, extended to Zipf indices).

A lookup reads one table row through L2; rows that are already in L2 cost L2 bandwidth
only, the rest also cost DRAM bandwidth.  DRAM rows = the distinct rows of the L2-resident
hot set that the batch touches (compulsory misses) + every lookup outside that hot set.
The hot set is the ``X`` most popular rows that fit in the L2 share (all rows are equally
popular for uniform indices; rank ``i`` has probability ``~ i**-alpha`` for Zipf).

Examples
--------
>>> from predictors.hardware.peaks import MeasuredPeaks
>>> pk = MeasuredPeaks(15e12, 1.39e12, 2.27e12, 40e6, 108, "")
>>> small = l2_hit_model(1000, 64, 100000, {"kind": "uniform"}, pk.l2_bytes)
>>> round(small["hit_rate"], 2)   # a 256 KB table stays in L2
0.99
"""
from __future__ import annotations

import math

import numpy as np

from ..hardware.peaks import MeasuredPeaks
from ..profiles import KERNEL_MODEL_TYPES

__all__ = ["l2_hit_model", "embedding_bag_ms", "bag_forward_ms", "reuse_warm_fraction",
           "dense_embedding_backward_ms",
           "EmbeddingLookupModel", "FORWARD_OPS", "BACKWARD_OPS", "BAG_FORWARD"]

FORWARD_OPS = ("embedding_bag", "_embedding_bag", "_embedding_bag_forward_only", "embedding")
BACKWARD_OPS = ("_embedding_bag_backward", "_embedding_bag_sparse_backward",
                "_embedding_bag_dense_backward", "embedding_dense_backward",
                "embedding_backward")
# The sparse backward is one gather kernel (PyTorch 2.x on CUDA: the uncoalesced lookups
# become the gradient's rows, no sort).  It is latency-bound per row, not bandwidth-bound:
# the 9 GPU-sized DLRMs of the H200 traces (resources/measurements: 44k-419k lookups per table,
# dim 64 and 128, tables of 0.5-2 M rows) all took 0.61-0.64 ns per gathered row whatever
# the row's size (a share of the copy bandwidth would range 0.15-0.48 with the dim).  So a row costs this long on one SM, rows spread over all SMs (0.6 ns on the
# H200's 132); the bytes at the copy bandwidth bound it for wide rows.
GATHER_NS_PER_ROW_PER_SM = 80.0
# PyTorch's CUDA EmbeddingBag forward (``EmbeddingBag_updateOutputKernel_sum_mean``) runs
# a grid of 1024 blocks of (32, 8) threads: one warp per 32 features of one bag, looping
# over the bag's indices (an index load, then the row's load).  The H200 traces record
# that grid and 75 % occupancy: 48 resident warps per SM.
BAG_GRID_WARPS = 1024 * 8
BAG_WARP_FEATURES = 32
BAG_RESIDENT_WARPS = 48
# Per warp-lookup on one SM: issue cycles (the loop's instructions) plus the load's
# latency shared by the SM's resident warps (Little's law), an L2 hit's or a DRAM miss's.
# Fitted (``python benchmarks/gpu_embedding.py --fit``: 10.5 cycles, 63.9 ns, 475 ns) on
# an H200's 72 microbenchmarks (36 shapes, two machine starts) and the 84 in-step
# forwards of its first start's eight DLRMs; the other starts' 262 are held out.
BAG_FORWARD = {"issue_cycles": 10.5, "l2_ns": 64.0, "dram_ns": 480.0,
               "clock_mhz": 1980.0,  # the H200's boost clock: cycles -> ns elsewhere
               "source": "fitted on H200 microbenchmarks and traced DLRM steps "
                         "(resources/measurements/nvidia-h200-2026-11-29*)"}
# The token embedding's backward (``embedding_dense_backward``, CUDA) takes one of two
# paths.  Up to 3072 indices: one kernel scans the indices per block of features, about
# 25 ns per index whatever the dim (15 H200 steps, 96-512 tokens: 1.4 us + 25.4 ns x
# tokens, within 8 %; 2.2 us fixed with the zeroing kernel's own).  Beyond: a 64-bit
# radix sort of the indices (8 single-block passes), ~25 small kernels and memsets
# (78 us on the H200 whatever the size), then two segmented
# passes over the gradient's values (``compute_grad_weight``, ``sum_and_scatter``: 7.2 ps
# per value each on the H200 = 31 bytes of DRAM bandwidth at 4.33 TB/s); both paths first
# zero the whole weight gradient.  (12 H200 steps, 4096-16384 tokens, dim 512-2048: the
# traffic model gave 0.06-0.10 of the recorded time.)
DENSE_BWD_DIRECT_MAX = 3072
DENSE_BWD_DIRECT_US = (2.2, 0.0254)  # fixed (both kernels), per index
DENSE_BWD_SORT_US = 78.0
DENSE_BWD_BYTES_PER_VALUE = 31.0
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
                 l2_bytes: float, itemsize: int = 4, *, warm: bool = False) -> dict:
    """Fraction of ``lookups`` that hit in L2 for one table, and the DRAM rows read.

    Cold (default): the batch's indices are new to L2, so the hot set's rows it touches
    miss once (compulsory misses).  ``warm``: the same indices ran just before (a kernel
    replayed, a step whose other traffic fits in L2): every touched row is still there
    if they all fit, else the lookups outside the hot set miss.

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
    if warm:
        fits = unique * row_bytes <= L2_SHARE * l2_bytes
        dram_rows = 0.0 if fits else lookups * (1.0 - hot_mass)
    else:
        dram_rows = min(unique_hot + lookups * (1.0 - hot_mass), float(lookups))
    return {"hit_rate": 1.0 - dram_rows / lookups, "dram_rows": dram_rows,
            "unique_rows": unique, "hot_rows": hot}


def reuse_warm_fraction(reuse_bytes: float, l2_bytes: float) -> float:
    """Share of a table's rows still in L2 when its next lookups start, after
    ``reuse_bytes`` of other tables' rows went through it (an exponential survival in the
    tables' share of L2; 1 when nothing else ran)."""
    if reuse_bytes <= 0:
        return 1.0
    return math.exp(-reuse_bytes / (L2_SHARE * l2_bytes))


def bag_forward_terms(rows: int, dim: int, batch: int, pooling: float,
                      distribution: dict | None, peaks: MeasuredPeaks, *, itemsize: int = 4,
                      clock_mhz: float | None = None, kernel_floor_ms: float = 0.003,
                      constants: dict | None = None) -> tuple[float, float, float, float, float]:
    """:func:`bag_forward_ms` as ``(floor, latency cold, latency warm, DRAM cold, DRAM
    warm)`` in ms: both bounds are linear in the warm fraction ``w`` of
    :func:`reuse_warm_fraction`, so the time at any reuse distance is
    ``floor + max(lc + (lw - lc) w, dc + (dw - dc) w)`` (:func:`bag_forward_at`)."""
    c = {**BAG_FORWARD, **(constants or {})}
    lookups = float(batch) * float(pooling)
    if lookups <= 0:
        return kernel_floor_ms, 0.0, 0.0, 0.0, 0.0
    warps = batch * math.ceil(dim / BAG_WARP_FEATURES)  # one per bag and 32 features
    active = min(warps, BAG_GRID_WARPS)
    blocks = math.ceil(active / 8)
    sms = min(peaks.sms, blocks)
    resident = min(math.ceil(blocks / peaks.sms) * 8, BAG_RESIDENT_WARPS)
    per_sm = warps * float(pooling) / sms  # warp-lookups each busy SM runs
    out = [kernel_floor_ms]
    for warm in (False, True):
        hit = l2_hit_model(rows, dim, int(round(lookups)), distribution, peaks.l2_bytes,
                           itemsize, warm=warm)["hit_rate"]
        ns = (c["issue_cycles"] * 1e3 / (clock_mhz or c["clock_mhz"])
              + (hit * c["l2_ns"] + (1.0 - hit) * c["dram_ns"]) / resident)
        dram = (1.0 - hit) * lookups * _sector_bytes(dim, itemsize) + lookups * 8 + batch * 8
        out += [per_sm * ns * 1e-6, 1e3 * dram / peaks.dram_bw]
    floor, lat_cold, dram_cold, lat_warm, dram_warm = out
    return floor, lat_cold, lat_warm, dram_cold, dram_warm


def bag_forward_at(terms, w):
    """A bag forward's time (ms) from its :func:`bag_forward_terms` at warm fraction ``w``
    (a number or an array)."""
    floor, lc, lw, dc, dw = terms
    return floor + np.maximum(lc + (lw - lc) * w, dc + (dw - dc) * w)


def bag_forward_ms(rows: int, dim: int, batch: int, pooling: float,
                   distribution: dict | None, peaks: MeasuredPeaks, *, itemsize: int = 4,
                   reuse_bytes: float = 0.0, clock_mhz: float | None = None,
                   kernel_floor_ms: float = 0.003, constants: dict | None = None) -> float:
    """Predicted time (ms) of PyTorch's CUDA EmbeddingBag forward (sum/mean) of one table.

    The kernel is latency-bound, not bandwidth-bound (the traffic model gave 0.3-0.9 of
    the H200's measured times): each SM runs its warps' lookups at :data:`BAG_FORWARD`'s
    issue cost plus the load latency over its resident warps.  Hits are blended between
    warm (``reuse_bytes`` = 0: a replayed kernel, a small step) and cold by
    :func:`reuse_warm_fraction`; DRAM bandwidth bounds the misses.  ``clock_mhz``: the
    device's clock (the issue cycles are in ns at the H200's without it).
    """
    terms = bag_forward_terms(rows, dim, batch, pooling, distribution, peaks,
                              itemsize=itemsize, clock_mhz=clock_mhz,
                              kernel_floor_ms=kernel_floor_ms, constants=constants)
    return float(bag_forward_at(terms, reuse_warm_fraction(reuse_bytes, peaks.l2_bytes)))


def dense_embedding_backward_ms(num_weights: int, dim: int, tokens: int, itemsize: int,
                                peaks: MeasuredPeaks) -> float:
    """Predicted time (ms) of ``embedding_dense_backward`` on CUDA: zero the (num_weights,
    dim) gradient, then the direct kernel or the sort path (see DENSE_BWD_*; their fixed
    costs include the kernels' own floors)."""
    zero_ms = 1e3 * num_weights * dim * itemsize / peaks.dram_bw
    if tokens <= DENSE_BWD_DIRECT_MAX:
        fixed, per_index = DENSE_BWD_DIRECT_US
        return zero_ms + 1e-3 * (fixed + per_index * tokens)
    segments = 2 * tokens * dim * DENSE_BWD_BYTES_PER_VALUE / peaks.dram_bw
    return zero_ms + 1e-3 * DENSE_BWD_SORT_US + 1e3 * segments


def _unique_bytes(rows: int, dim: int, lookups: int, distribution: dict | None,
                  l2_bytes: float, itemsize: int) -> float:
    hit = l2_hit_model(rows, dim, lookups, distribution, l2_bytes, itemsize)
    return hit["unique_rows"] * _sector_bytes(dim, itemsize)


def embedding_bag_ms(rows: int, dim: int, batch: int, pooling: float,
                     distribution: dict | None, peaks: MeasuredPeaks, *,
                     backward: bool = False, sparse_grad: bool = True, itemsize: int = 4,
                     kernel_floor_ms: float = 0.003, reuse_bytes: float = 0.0,
                     clock_mhz: float | None = None, bag: bool = True,
                     constants: dict | None = None) -> float:
    """Predicted kernel time (ms) of one table's EmbeddingBag (sum) forward or backward.

    Forward of a bag (``bag``): :func:`bag_forward_ms`.  Forward of a plain embedding
    (``bag=False``, a gather kernel): read indices, gather ``batch x pooling`` rows through
    L2 (DRAM for misses), write the rows.  Backward with sparse gradients (what SGD
    on ``sparse=True`` tables runs): one gather writes a gradient row per lookup from the
    (L2-resident) output gradient, :data:`GATHER_NS_PER_ROW_PER_SM` per row and SM (or
    its bytes at the DRAM bandwidth, if longer); no table rows are read.  Dense backward:
    scatter-add every lookup into the table (read + write of the touched rows, through
    L2).
    """
    lookups = int(round(batch * pooling))
    row = _sector_bytes(dim, itemsize)
    out = batch * row
    idx_bytes = lookups * 8 + batch * 8
    if not backward and bag:
        return bag_forward_ms(rows, dim, batch, pooling, distribution, peaks,
                              itemsize=itemsize, reuse_bytes=reuse_bytes,
                              clock_mhz=clock_mhz, kernel_floor_ms=kernel_floor_ms,
                              constants=constants)
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

    A captured op carries its table's index distribution (``lookup``, set by the capture);
    ops without one assume ``default_distribution`` (uniform unless set).  Given a whole
    step's ops, each bag forward's reuse distance is the other tables' touched rows
    (the step reuses its batch, so what else went through L2 decides what is still
    there); given one op alone, it is a replayed, warm kernel.
    """

    op_class = "embedding"
    type_name = "gpu-embedding-l2"

    def __init__(self, peaks: MeasuredPeaks, *, default_distribution: dict | None = None,
                 kernel_floor_ms: float = 0.003, clock_mhz: float | None = None,
                 bag_forward: dict | None = None):
        self.peaks = peaks
        self.bag_forward = {**BAG_FORWARD, **(bag_forward or {})}
        self.default_distribution = default_distribution or {"kind": "uniform"}
        self.kernel_floor_ms = float(kernel_floor_ms)
        self.clock_mhz = float(clock_mhz) if clock_mhz else None

    def distribution(self, node: dict) -> dict:
        """The index distribution of the table a captured op reads."""
        lookup = node.get("lookup") or {}
        return lookup.get("distribution") or self.default_distribution

    @staticmethod
    def itemsize(node: dict) -> int:
        """Bytes per value of the op's first input."""
        dtypes = node.get("input_dtypes") or []
        return {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}.get(
            dtypes[0] if dtypes else "float32", 4)

    def bag_shape(self, node: dict) -> tuple | None:
        """``(rows, dim, lookups, batch)`` of a bag forward, None for other ops."""
        op = node["name"].split("::")[-1]
        ins = node.get("input_shapes") or []
        if op not in FORWARD_OPS or op == "embedding" or len(ins) < 3 or len(ins[0]) != 2:
            return None
        lookups = _numel(ins[1])
        batch = ins[2][0] if ins[2] else lookups
        return ins[0][0], ins[0][1], lookups, batch

    def _one(self, node: dict, reuse_bytes: float = 0.0) -> float:
        op = node["name"].split("::")[-1]
        ins = node.get("input_shapes") or []
        size = self.itemsize(node)
        dist = self.distribution(node)
        if op in FORWARD_OPS:
            if len(ins) < 2 or len(ins[0]) != 2:
                return math.nan
            rows, dim = ins[0]
            lookups = _numel(ins[1])
            bag = self.bag_shape(node)
            batch = bag[3] if bag else lookups  # a plain embedding: one row per index
            return embedding_bag_ms(rows, dim, batch, lookups / max(batch, 1), dist,
                                    self.peaks, itemsize=size,
                                    kernel_floor_ms=self.kernel_floor_ms,
                                    reuse_bytes=reuse_bytes, clock_mhz=self.clock_mhz,
                                    bag=bag is not None, constants=self.bag_forward)
        if op in ("embedding_dense_backward", "embedding_backward"):
            if len(ins) < 2 or not ins[0]:
                return math.nan
            outs = node.get("output_shapes") or []
            ints = [a for a in node.get("scalars") or [] if type(a) is int]
            num_weights = outs[0][0] if outs and outs[0] else (ints[0] if ints else 0)
            return dense_embedding_backward_ms(num_weights, ins[0][-1], _numel(ins[1]),
                                               size, self.peaks)
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

    def forward_terms(self, node: dict) -> tuple | None:
        """A bag forward's :func:`bag_forward_terms` (its time at any reuse distance);
        None for other ops."""
        bag = self.bag_shape(node)
        if bag is None:
            return None
        rows, dim, lookups, batch = bag
        return bag_forward_terms(rows, dim, batch, lookups / max(batch, 1),
                                 self.distribution(node), self.peaks,
                                 itemsize=self.itemsize(node), clock_mhz=self.clock_mhz,
                                 kernel_floor_ms=self.kernel_floor_ms,
                                 constants=self.bag_forward)

    def touched_bytes(self, nodes: list[dict]) -> dict[int, float]:
        """Bytes of table rows each bag forward in ``nodes`` touches, by position."""
        out = {}
        for i, node in enumerate(nodes):
            try:
                bag = self.bag_shape(node)
                if bag is not None:
                    rows, dim, lookups, _ = bag
                    out[i] = _unique_bytes(rows, dim, lookups, self.distribution(node),
                                           self.peaks.l2_bytes, self.itemsize(node))
            except (IndexError, TypeError, ValueError):
                continue
        return out

    def predict_ms(self, nodes: list[dict]) -> np.ndarray:
        out = np.full(len(nodes), np.nan)
        touched = self.touched_bytes(nodes)
        total = sum(touched.values())
        for i, node in enumerate(nodes):
            try:
                out[i] = self._one(node, total - touched.get(i, total))
            except (IndexError, TypeError, ValueError):
                out[i] = np.nan
        return out

    def to_json(self) -> tuple[dict, dict[str, np.ndarray]]:
        return ({"type": self.type_name, "op_class": self.op_class,
                 "peaks": self.peaks.to_json(), "l2_share": L2_SHARE,
                 "default_distribution": self.default_distribution,
                 "kernel_floor_ms": self.kernel_floor_ms, "clock_mhz": self.clock_mhz,
                 "bag_forward": self.bag_forward,
                 "method": "HiPC 2022 L2 hit-rate traffic model, Zipf-aware hot set; bag "
                           "forwards latency-bound per warp-lookup"}, {})

    @classmethod
    def from_json(cls, meta: dict, arrays: dict) -> "EmbeddingLookupModel":
        return cls(MeasuredPeaks.from_json(meta["peaks"]),
                   default_distribution=meta.get("default_distribution"),
                   kernel_floor_ms=meta.get("kernel_floor_ms", 0.003),
                   clock_mhz=meta.get("clock_mhz"), bag_forward=meta.get("bag_forward"))


KERNEL_MODEL_TYPES[EmbeddingLookupModel.type_name] = EmbeddingLookupModel
