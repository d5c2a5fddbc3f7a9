"""Roofline kernel model: every captured aten op -> category, FLOPs, bytes and seconds.

``time = max(FLOPs / achievable FLOP/s, bytes / achievable bandwidth) + kernel floor``.
Learned models (``calibrate``) replace this for the op classes they cover; the roofline
remains the fallback, so every op always gets a duration.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..hardware.specs import DeviceSpec
from ..model.op_classes import (
    ATTENTION_OPS,
    CONV_OPS,
    ITEMSIZE,
    TWO_PASS_NORM_OPS,
    classify,
    op_base,
)
from .convolution import conv_flops

__all__ = ["KernelCost", "kernel_cost", "collective_bytes"]

# The kernels' own ops that take (B, S, H, D); the others take (B, H, S, D).
_BSHD_ATTENTION = ("_flash_attention", "_efficient_attention")
# Fused attention's fraction of the dtype's datasheet peak, measured on an H200
# (benchmarks/cuda_validation.py; seq 512-1024, head dim 64-128): fp32 memory-efficient
# attention 0.37 forward / 0.45 backward, bf16 cuDNN flash attention 0.25 / 0.37.  The
# published FlashAttention-2 figures for H100 (~35 % of peak forward) agree.
ATTENTION_EFFICIENCY = {("float32", False): 0.37, ("float32", True): 0.45,
                        ("half", False): 0.25, ("half", True): 0.37}
# In-place ops that overwrite their first argument without reading it.
OVERWRITE_OPS = frozenset(
    "fill_ zero_ copy_ normal_ uniform_ random_ bernoulli_ exponential_ geometric_".split())
# Ops that read only the elements their indices select, not the whole source tensor.
GATHER_OPS = frozenset("index_select index gather take".split())
# Ops that write (or accumulate) their last argument's values at indexed places.
SCATTER_OPS = frozenset(
    "index_put index_put_ _index_put_impl_ index_add index_add_ scatter scatter_ "
    "scatter_add scatter_add_ index_copy index_copy_".split())
# Elementwise ops that cost several FLOPs per element (transcendentals).
HEAVY_ELEMENTWISE = {"gelu": 20, "gelu_backward": 30, "sigmoid": 8, "sigmoid_backward": 4,
                     "tanh": 8, "tanh_backward": 4, "exp": 8, "log": 8, "bernoulli_": 10,
                     "native_dropout": 10, "erf": 10, "pow": 10, "sqrt": 4, "rsqrt": 4}

# Fraction of peak that real kernels reach on large problems (cuBLAS/oneDNN ~70-85% on
# GEMM, ~80% of DRAM bandwidth for streaming kernels); calibration replaces these.
GEMM_EFFICIENCY = 0.75
MEMORY_EFFICIENCY = 0.8


@dataclass(frozen=True)
class KernelCost:
    """The modelled kernel of one op (``seconds`` is 0 for ops that launch none)."""

    category: str
    flops: float
    bytes: float
    seconds: float
    model: str  # which model produced it



def _numel(shape) -> int:
    return math.prod(shape) if shape else 1


def _tensor_bytes(shape, dtype, nnz) -> float:
    size = ITEMSIZE.get(dtype, 4)
    if nnz is not None:  # sparse COO: values + int64 indices
        row = _numel(shape[1:]) if len(shape) > 1 else 1
        return nnz * (row * size + 8)
    return _numel(shape) * size


def _gemm_flops(op: str, ins: list) -> float:
    if op in ("mm", "matmul", "_scaled_mm"):
        (m, k), (_, n) = ins[0][-2:], ins[1][-2:]
        return 2.0 * m * n * k
    if op == "addmm":
        (m, k), (_, n) = ins[1], ins[2]
        return 2.0 * m * n * k + m * n
    if op in ("bmm", "baddbmm", "addbmm"):
        a, b = (ins[0], ins[1]) if op == "bmm" else (ins[1], ins[2])
        return 2.0 * a[0] * a[1] * a[2] * b[2]
    return 0.0


def attention_flops(op: str, ins: list) -> float:
    """FLOPs of a fused attention op: ``4 B H Sq Sk D`` forward (QK^T and PV), 2.5x that
    backward; the inputs start with q, k (after the output gradient, backward)."""
    if op not in ATTENTION_OPS or len(ins) < 2:
        return 0.0
    q = ins[1] if op.endswith("_backward") else ins[0]
    k = ins[2] if op.endswith("_backward") else ins[1]
    if len(q) != 4 or len(k) != 4:
        return 0.0
    if op.startswith(_BSHD_ATTENTION):
        fwd = 4.0 * q[0] * q[2] * q[1] * k[1] * q[3]
    else:
        fwd = 4.0 * q[0] * q[1] * q[2] * k[2] * q[3]
    return 2.5 * fwd if op.endswith("_backward") else fwd


def attention_efficiency(op: str, dtype: str) -> float | None:
    """The fraction of the dtype's datasheet peak a fused attention op reaches, or None
    for other ops."""
    if op not in ATTENTION_OPS:
        return None
    kind = "float32" if dtype == "float32" else "half"
    return ATTENTION_EFFICIENCY[(kind, op.endswith("_backward"))]


def _embedding_bytes(op: str, node: dict) -> float:
    """Gathered rows dominate: each lookup reads (or writes) one row of the table."""
    ins, dts = node["input_shapes"], node["input_dtypes"]
    size = ITEMSIZE.get(dts[0], 4)
    if op in ("_embedding_bag", "embedding_bag", "_embedding_bag_forward_only"):
        dim, lookups, batch = ins[0][1], _numel(ins[1]), ins[2][0]
        return lookups * (dim * size + 8) + batch * dim * size
    if op == "embedding":
        dim, lookups = ins[0][1], _numel(ins[1])
        return lookups * (dim * size * 2 + 8)
    if op.startswith("_embedding_bag") or op.startswith("embedding"):
        # backward: read the output gradient, write one gradient row per lookup
        grad, lookups = ins[0], _numel(ins[1])
        dim = grad[-1]
        out = sum(_tensor_bytes(s, d, n) for s, d, n in zip(
            node["output_shapes"], node["output_dtypes"], node["output_nnz"]))
        return _numel(grad) * size + lookups * (dim * size + 16) + min(
            out, lookups * dim * size * 2)
    return 0.0


def _sparse_update_bytes(node: dict) -> float | None:
    """A dense tensor updated by a sparse one touches only the nnz rows."""
    sparse = [(s, n) for s, n in zip(node["input_shapes"], node["input_nnz"]) if n is not None]
    if not sparse:
        return None
    shape, nnz = sparse[0]
    row = _numel(shape[1:]) * ITEMSIZE.get(node["input_dtypes"][0], 4)
    return nnz * (3 * row + 8)


def _gather_bytes(op: str, node: dict) -> float | None:
    """Index-driven reads: the indices, the selected elements and the output they fill.
    Without a recorded output (traces) its size follows from the indices: ``index_select``
    and ``index`` over leading dimensions, ``gather`` in the index's shape."""
    ins, dts = node["input_shapes"], node["input_dtypes"]
    if len(ins) < 2:
        return None
    size = ITEMSIZE.get(dts[0], 4)
    idx = sum(_tensor_bytes(s, d, None) for s, d in zip(ins[1:], dts[1:]))
    if node["output_shapes"]:
        out = sum(_numel(s) for s in node["output_shapes"]) * size
    elif op == "gather" or op == "take":
        out = _numel(ins[1]) * size
    else:
        lead = len(ins) - 1 if op == "index" else 1
        out = _numel(ins[1]) * _numel(ins[0][lead:]) * size
    return idx + 2 * out


def _dense_bytes(op: str, node: dict) -> float:
    """DRAM traffic of an op on dense tensors: its inputs read and its outputs written;
    an in-place op writes its first argument back (and ``fill_``-like ones never read it)."""
    reads = [_tensor_bytes(s, d, n) for s, d, n in zip(
        node["input_shapes"], node["input_dtypes"], node["input_nnz"])]
    if op in SCATTER_OPS and len(reads) >= 3:
        # indices and values read, the touched places read and written; an out-of-place
        # form first copies the whole destination
        copy = 0.0 if op.endswith("_") else 2 * reads[0]
        return sum(reads[1:-1]) + 3 * reads[-1] + copy
    if op.startswith("_foreach_") and op.endswith("_") and len(reads) >= 2:
        # in place over a list: the first list (``len(ins) / lists`` tensors) is read
        # and written, the others (gradients, scalars lists) read
        lists = 2 if len(reads) % 2 == 0 else 1
        dest = len(reads) // lists
        return 2 * sum(reads[:dest]) + sum(reads[dest:])
    if op.endswith("_") and reads:
        return sum(reads[1:]) + reads[0] * (1 if op in OVERWRITE_OPS else 2)
    if op in GATHER_OPS:
        gathered = _gather_bytes(op, node)
        if gathered is not None:
            return gathered
    extra = sum(reads[:TWO_PASS_NORM_OPS.get(op, 0)])
    return sum(reads) + extra + sum(_tensor_bytes(s, d, n) for s, d, n in zip(
        node["output_shapes"], node["output_dtypes"], node["output_nnz"]))


def collective_bytes(node: dict) -> float:
    """A recorded collective's message as NCCL counts it on this rank: the larger of
    what it sends and what it receives (all-to-all), the buffer (all-reduce)."""
    def total(shapes, dtypes):
        return float(sum(_numel(s) * ITEMSIZE.get(d, 4) for s, d in zip(shapes, dtypes)))
    return max(total(node["input_shapes"], node["input_dtypes"]),
               total(node["output_shapes"], node["output_dtypes"]))


def kernel_cost(node: dict, device: DeviceSpec) -> KernelCost:
    """The roofline cost of the kernel(s) that a captured op launches."""
    name = node["name"]
    op, category = op_base(name), classify(name)
    if category == "view":
        return KernelCost("view", 0.0, 0.0, 0.0, "none")
    if node.get("host"):   # CPU tensors of a GPU step (Adam's step count): no kernel
        return KernelCost("view", 0.0, 0.0, 0.0, "host op, no kernel")
    if category == "communication":  # timed by the collective model when ranks meet
        return KernelCost(category, 0.0, collective_bytes(node), 0.0, "collective model")
    dtype = (node["input_dtypes"] or node["output_dtypes"] or ["float32"])[0]
    nbytes = _sparse_update_bytes(node)
    if category == "embedding":
        nbytes = _embedding_bytes(op, node)
    if nbytes is None:
        nbytes = _dense_bytes(op, node)
    out_elems = sum(_numel(s) for s in node["output_shapes"]) or (
        _numel(node["input_shapes"][0]) if node["input_shapes"] else 1)
    if op.startswith("_foreach_") and not node["output_shapes"]:  # in place over a list
        ins = node["input_shapes"]
        out_elems = sum(_numel(s) for s in ins[:max(1, len(ins) // 2)])
    if category == "gemm":
        if op in ATTENTION_OPS:
            flops = attention_flops(op, node["input_shapes"])
            compute = flops / (device.flops(dtype) * attention_efficiency(op, dtype))
        else:
            flops = (conv_flops(node) if op in CONV_OPS
                     else _gemm_flops(op, node["input_shapes"]))
            compute = flops / (device.flops(dtype) * GEMM_EFFICIENCY)
    else:
        per = HEAVY_ELEMENTWISE.get(op.rstrip("_") if op not in HEAVY_ELEMENTWISE else op, 1)
        if category == "reduction":
            per = 5 if "softmax" in op or "norm" in op else 1
            out_elems = max(out_elems, sum(_numel(s) for s in node["input_shapes"][:1]))
        flops = float(per * out_elems)
        compute = flops / device.vector_flops
    memory = nbytes / (device.mem_bw * MEMORY_EFFICIENCY)
    seconds = max(compute, memory) + device.kernel_floor_s
    return KernelCost(category, flops, float(nbytes), seconds, "roofline")
