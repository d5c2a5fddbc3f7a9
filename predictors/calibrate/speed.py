"""How fast this machine runs now, against how fast it ran while it was calibrated.

On a shared VM the same GEMM runs at 45, 55 or 67 GFLOP/s from one second to the next,
and a whole validation can fall into a fast or a slow spell: two scenarios validated at
+32 % and +36 % can run within 4 % of their predictions when re-measured in-process ten
minutes later.  A fixed probe (a GEMM and a streaming add,
~0.1 s) is taken through every calibration and stored in the profile; ``validate``
probes again around each measurement and prints the drift beside the error, so that a
reader can tell a model error from a machine that changed speed.
"""
from __future__ import annotations

import statistics
import time

import torch

__all__ = ["probe", "combine", "relative_speed"]

GEMM_SHAPE = (320, 512, 2048)  # a transformer FFN GEMM: compute-bound, aligned
STREAM_NUMEL = 1 << 20  # 4 MiB per operand: beyond L2 (mostly L3-resident on an EPYC)


def probe(seconds: float = 0.1, threads: int = 1) -> dict:
    """Median GEMM GFLOP/s and streaming-add GB/s over about ``seconds``, with ``threads``
    intra-op threads (the profile's: two threads double the GEMM's rate)."""
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return _probe(seconds)
    finally:
        torch.set_num_threads(old)


def _probe(seconds: float) -> dict:
    m, k, n = GEMM_SHAPE
    a, b = torch.randn(m, k), torch.randn(k, n)
    x = torch.randn(STREAM_NUMEL)
    y = torch.empty_like(x)
    torch.mm(a, b)
    torch.add(x, x, out=y)
    gemm, stream = [], []
    end = time.perf_counter() + seconds
    while not gemm or time.perf_counter() < end:
        t0 = time.perf_counter()
        torch.mm(a, b)
        t1 = time.perf_counter()
        torch.add(x, x, out=y)
        t2 = time.perf_counter()
        gemm.append(2.0 * m * k * n / (t1 - t0) / 1e9)
        # Counted as two operands read and one written (x is read twice); only ratios
        # against the same probe are used, so the convention only has to stay fixed.
        stream.append(3 * 4 * STREAM_NUMEL / (t2 - t1) / 1e9)
    return {"gemm_gflops": statistics.median(gemm), "stream_gbps": statistics.median(stream)}


def combine(probes: list[dict]) -> dict:
    """Median of several probes, with the 10th-90th percentile spread of the GEMM."""
    if not probes:
        return {}
    g = sorted(p["gemm_gflops"] for p in probes)
    deciles = statistics.quantiles(g, n=10, method="inclusive") if len(g) > 1 else g * 9
    return {"gemm_gflops": round(statistics.median(g), 2),
            "stream_gbps": round(statistics.median(p["stream_gbps"] for p in probes), 2),
            "gemm_gflops_p10": round(deciles[0], 2), "gemm_gflops_p90": round(deciles[-1], 2),
            "probes": len(probes)}


def relative_speed(now: dict, reference: dict | None) -> float | None:
    """How much faster the machine runs ``now`` than at ``reference`` (0.2 = 20 %
    faster; the geometric mean of the GEMM and streaming ratios), or None without a
    reference (profiles calibrated before probes existed)."""
    keys = ("gemm_gflops", "stream_gbps")
    if not reference or not now or any(not reference.get(k) or not now.get(k) for k in keys):
        return None
    return (now[keys[0]] / reference[keys[0]] * now[keys[1]] / reference[keys[1]]) ** 0.5 - 1
