"""A quick check of this host's speed, so that a bundled CPU profile can be scaled to it
(:func:`predictors.profiles.scaled_to_host`), whether it was calibrated on another CPU
or on another machine of this CPU model.

Three figures, the same for every host, in a few seconds: the GEMM and streaming-add
rates of the calibration's own speed probe (:func:`.speed.probe`, whose median every
profile keeps as ``speed_reference``), and the cost of dispatching one tiny aten op from
Python (a loop of them, timed without the profiler).  The check is taken once per CPU
signature, torch version and thread count and cached
(:func:`predictors.profiles.host_check_path`).
"""
from __future__ import annotations

import datetime
import statistics
import time

import torch

from ..profiles import default_profile, read_host_check, write_host_check
from .speed import combine, probe

__all__ = ["host_check", "measure_host", "dispatch_us", "needs_host_check", "ensure_host_check"]

DISPATCH_OPS = 400  # tiny ops per timed batch (3 op kinds, ~1-3 us each here)


def dispatch_us(batches: int = 15) -> float:
    """The median cost, in microseconds, of one tiny aten op (an add, a mul and a relu of
    eight floats) called from Python: dispatcher, allocator and interpreter, no kernel
    work to speak of."""
    x = torch.ones(8)
    add, mul, relu = torch.add, torch.mul, torch.relu
    for _ in range(50):
        relu(mul(add(x, x), x))
    per_op = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(DISPATCH_OPS // 3):
            relu(mul(add(x, x), x))
        per_op.append((time.perf_counter() - t0) / (DISPATCH_OPS // 3 * 3) * 1e6)
    return statistics.median(per_op)


def measure_host(threads: int = 1, rounds: int = 8, probe_s: float = 0.25) -> dict:
    """This host's figures with ``threads`` intra-op threads: ``gemm_gflops`` and
    ``stream_gbps`` (medians of ``rounds`` probes of ``probe_s`` each, with the GEMM's
    10th-90th percentiles) and ``dispatch_us`` (median over the rounds); about 3 s.
    Probes and dispatch loops alternate so that both see the same spells of a shared
    machine's speed."""
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    try:
        probes, dispatch = [], []
        for _ in range(rounds):
            probes.append(probe(probe_s, threads))
            dispatch.append(dispatch_us(batches=5))
    finally:
        torch.set_num_threads(old)
    speed = combine(probes)
    return {"gemm_gflops": speed["gemm_gflops"], "stream_gbps": speed["stream_gbps"],
            "gemm_gflops_p10": speed["gemm_gflops_p10"],
            "gemm_gflops_p90": speed["gemm_gflops_p90"],
            "dispatch_us": round(statistics.median(dispatch), 4),
            "seconds": round(time.perf_counter() - t0, 1)}


def host_check(threads: int = 1, refresh: bool = False, measure=None) -> dict:
    """This host's check for ``threads`` threads: the cached one, or ``measure(threads)``
    (default :func:`measure_host`)
    taken and cached when there is none for this CPU signature, torch version and thread
    count, or when ``refresh`` asks for a new one.  Returns the cached document
    (``figures``, ``date``, ``host``)."""
    if not refresh:
        cached = read_host_check(threads)
        if cached is not None:
            return cached
    figures = (measure or measure_host)(threads)
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return write_host_check(figures, threads, date)


def needs_host_check(threads: int = 1) -> bool:
    """Whether a bundled CPU profile would price a ``threads``-thread scenario and no
    check of this host is cached to scale it by."""
    profile = default_profile("cpu", "cpu", threads)
    return profile is not None and profile.device.kind == "cpu" \
        and read_host_check(threads) is None


def ensure_host_check(threads: int = 1, measure=None) -> bool:
    """Take and cache this host's check when :func:`needs_host_check` (a few seconds,
    once); True when it was taken now."""
    if not needs_host_check(threads):
        return False
    host_check(threads, measure=measure)
    return True
