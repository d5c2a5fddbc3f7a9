"""CPU ops larger than what a calibration measured: what a learned model cannot know.

Two mechanisms, both seen op by op in the step of a transformer LM with a 30,000-token
vocabulary (docs/models/calibration.md, "Large tensors"):

- **First touch.**  glibc serves an allocation above its largest mmap threshold (32 MiB
  on 64-bit Linux) with a fresh ``mmap`` and returns it with ``munmap`` when it is freed,
  so every step's 123-MB logits (batch 8 x seq 128 x 30k floats) fault on every 4-KiB
  page when the op first writes them; the kernel zeroes each page.  On the project's
  Xeon VM that is ~1.2 us a page, 0.3 ms a MB: 55 ms of a ``zero_`` that writes 123 MB,
  59 ms of the bias copy that starts an ``addmm``.  Below the threshold the allocator
  recycles its heap and the calibration's steps measure whatever faults remain.
  :func:`first_touch_s` prices the fresh outputs above the threshold at the device's
  ``page_fault_ns`` (``calibrate`` measures it: ``microbench.page_fault_ns``).
- **Beyond the calibrated range.**  A learned model predicts in log space from sizes it
  saw; far above its largest sample (a GEMM of 31 GFLOP against samples up to 4) it
  extrapolates to throughputs no core reaches (the LM head's three GEMMs: 82, 45 and
  65 ms predicted, 266-312 ms measured).  A GEMM above the range is priced at the
  throughput the model predicts for the same shape cut, along its longest dimension, to
  the largest FLOPs it was fitted on (its throughput has saturated there), and never
  faster than the fastest of its largest samples (``top_flops_per_s``); a memory-bound
  op above the range streams its bytes at the DRAM bandwidth the calibration measured
  beyond the caches (``stream_bytes_per_s``), where the models extrapolate either way (the
  30k-vocabulary step: ``_log_softmax_backward_data`` 151 ms predicted, 68 measured;
  the embedding's SGD update 2.4 ms predicted, 8.7 measured).
"""
from __future__ import annotations

import math

from ..hardware.specs import DeviceSpec
from ..model.op_classes import ITEMSIZE, classify, op_base

__all__ = [
    "DEFAULT_PAGE_FAULT_NS",
    "GEMM_MAX_FLOPS_DEFAULT",
    "MMAP_THRESHOLD_BYTES",
    "PAGE_BYTES",
    "first_touch_s",
    "fresh_bytes",
    "gemm_flops_of",
    "shrunk_gemm",
    "stream_floor_s",
]

MMAP_THRESHOLD_BYTES = 32 * 2 ** 20   # glibc's DEFAULT_MMAP_THRESHOLD_MAX (64-bit)
PAGE_BYTES = 4096
# ns per 4-KiB page without a measurement (``microbench.page_fault_ns`` measured
# 1,000-1,500 on the project's 2-vCPU Xeon VM, medians of 64-256 MiB fills)
DEFAULT_PAGE_FAULT_NS = 1200.0
# The largest GEMM ``microbench.gemm_cases`` measures: profiles that do not record their
# range were calibrated with it.
GEMM_MAX_FLOPS_DEFAULT = 4e9
# Allocations that no op writes yet (the in-place op that fills them is not priced)
_UNTOUCHED = frozenset(("empty", "empty_like", "empty_strided", "new_empty"))


def fresh_bytes(node: dict) -> float:
    """Bytes of the op's new outputs that the allocator maps afresh (each at least
    :data:`MMAP_THRESHOLD_BYTES`; a sparse output's values); 0 for views and in-place
    ops, which write into memory that exists."""
    op = op_base(node["name"])
    if op.endswith("_") or op in _UNTOUCHED or classify(node["name"]) == "view":
        return 0.0
    total = 0.0
    for shape, dtype, nnz in zip(node.get("output_shapes") or [],
                                 node.get("output_dtypes") or [],
                                 node.get("output_nnz") or [None] * 64):
        if shape is None:
            continue
        # a sparse output (an embedding's gradient) holds its values as a fresh
        # [nnz, dim] block: a bag of many lookups writes tens of MB of it every step
        elements = nnz * math.prod(shape[1:]) if nnz is not None else math.prod(shape)
        size = elements * ITEMSIZE.get(dtype, 4) if shape else 0
        if size >= MMAP_THRESHOLD_BYTES:
            total += size
    return float(total)


def first_touch_s(node: dict, device: DeviceSpec) -> float:
    """Seconds the op's first writes to its freshly mapped outputs spend in page faults
    (CPU only)."""
    if device.kind != "cpu":
        return 0.0
    fresh = fresh_bytes(node)
    if not fresh:
        return 0.0
    ns = getattr(device, "page_fault_ns", 0.0) or DEFAULT_PAGE_FAULT_NS
    return fresh / PAGE_BYTES * ns * 1e-9


def _dims(node: dict):
    """``(b, m, n, k)`` of an mm / addmm / bmm node, or None."""
    op, ins = op_base(node["name"]), node.get("input_shapes") or []
    try:
        if op == "mm":
            (m, k), (_, n) = ins[0][-2:], ins[1][-2:]
            return 1, m, n, k
        if op == "addmm":
            (m, k), (_, n) = ins[1], ins[2]
            return 1, m, n, k
        if op == "bmm":
            (b, m, k), (_, _, n) = ins[0], ins[1]
            return b, m, n, k
    except (IndexError, TypeError, ValueError):
        return None
    return None


def gemm_flops_of(node: dict) -> float:
    d = _dims(node)
    return 2.0 * math.prod(d) if d else 0.0


def shrunk_gemm(node: dict, max_flops: float) -> tuple[dict, float] | None:
    """``(node, factor)``: the GEMM with its longest dimension cut so that its FLOPs are
    ``max_flops`` (kept a multiple of the same power of two, up to 16, as the original:
    alignment sets a GEMM's speed too), and the FLOPs ratio of the original to it; None
    for ops that are not mm / addmm / bmm or that lie within ``max_flops``."""
    d = _dims(node)
    if d is None or 2.0 * math.prod(d) <= max_flops:
        return None
    b, m, n, k = d
    dims = {"b": b, "m": m, "n": n, "k": k}
    longest = max(dims, key=dims.get)
    rest = 2.0 * math.prod(v for key, v in dims.items() if key != longest)
    x = dims[longest]
    align = min(x & -x, 16)
    cut = max(align, int(max_flops / rest) // align * align)
    if cut >= x:
        return None
    dims[longest] = cut
    b, m, n, k = dims["b"], dims["m"], dims["n"], dims["k"]
    op = op_base(node["name"])
    new = dict(node)
    if op == "mm":
        new["input_shapes"] = [(m, k), (k, n)]
    elif op == "addmm":
        bias = node["input_shapes"][0]
        new["input_shapes"] = [(n,) if len(bias) == 1 else (m, n), (m, k), (k, n)]
    else:
        new["input_shapes"] = [(b, m, k), (b, k, n)]
    new["output_shapes"] = [(b, m, n)] if op == "bmm" else [(m, n)]
    return new, 2.0 * math.prod(d) / (2.0 * b * m * n * k)


def stream_floor_s(nbytes: float, device: DeviceSpec) -> float:
    """The time an op moving ``nbytes`` through DRAM takes: at the bandwidth the
    calibration measured beyond the caches, else the spec's achievable bandwidth."""
    from .roofline import (
        MEMORY_EFFICIENCY,  # deferred: roofline imports nothing of ours
    )

    bw = getattr(device, "stream_bytes_per_s", 0.0) or device.mem_bw * MEMORY_EFFICIENCY
    return nbytes / bw if bw > 0 else 0.0
