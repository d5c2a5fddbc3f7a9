"""Microbenchmarks of single kernels (GEMM, EmbeddingBag forward/backward, sparse updates).

Samples are marked ``isolated``: a kernel alone runs with warmer caches than inside a
training step, and the learned models take that as a feature.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable, Iterator

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

from ..model.embedding_blocks import bag_input as _bag_input
from .profiling import RECOVERY_STEPS
from .samples import tiny_transformer

__all__ = ["profiler_overhead_us", "gemm_cases", "embedding_cases", "run_case",
           "FreshInputs", "page_fault_ns", "stream_bw", "sort_ns"]


def _tiny_step():
    """A tiny transformer LM's training step: almost all of its time is dispatch, so the
    profiler's share of it is large and its event mix is a real step's."""
    from ..model.workload import (  # deferred: imports torch
        build_workload,
        training_step,
    )

    workload = build_workload(tiny_transformer(), device="cpu", fast_init=True)
    batch, optimizer = workload.make_batch(0), workload.optimizer()
    return lambda: training_step(workload.module, batch, optimizer)


def _event_count(prof) -> int:
    try:
        return len(prof.profiler.kineto_results.events())
    except AttributeError:
        return len(prof.events())


def profiler_overhead_us(pairs: int = 40) -> float:
    """The profiler's cost per recorded event (any event, aten or not): a tiny training
    step timed without and with the profiler, in ``pairs`` interleaved pairs (both halves
    see the same machine state); the median difference over the events one profiled step
    records.  Two to six seconds."""
    step = _tiny_step()
    for _ in range(5):
        step()

    diffs, events = [], 0
    for k in range(pairs):
        for _ in range(RECOVERY_STEPS if k else 0):  # the profiled step's slow wake
            step()
        t0 = time.perf_counter()
        step()
        plain = time.perf_counter() - t0
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            step()
            profiled = time.perf_counter() - t0
        events = _event_count(prof)
        diffs.append((profiled - plain) * 1e6)
    return max(0.0, statistics.median(diffs) / max(1, events))


def _node(name, ins, outs, dtype="float32", nnz=None, lookup=None) -> dict:
    return {"name": name, "input_shapes": [tuple(s) for s in ins],
            "input_dtypes": [d if isinstance(d, str) else dtype for d in
                             ([dtype] * len(ins))],
            "input_nnz": nnz or [None] * len(ins),
            "output_shapes": [tuple(s) for s in outs], "output_dtypes": [dtype] * len(outs),
            "output_nnz": [None] * len(outs), "phase": "forward", "thread": "main",
            "lookup": lookup, "isolated": True}


def _log_sizes(rng, lo, hi, n):
    """Log-spaced sizes, each jittered by up to ±3 (mostly odd tails of tiles and vectors)
    and, from 8 up, also rounded to a multiple of 8-64: a GEMM's speed depends on its
    rows' alignment as much as on its size (``features._alignment``)."""
    base = np.unique(np.round(np.geomspace(lo, hi, n)).astype(int))
    odd = np.clip(base + rng.integers(-3, 4, size=len(base)), lo, hi)
    step = 2 ** rng.integers(3, 7, size=len(base))
    aligned = (np.round(base / step) * step).astype(int)
    return np.unique(np.concatenate([odd, np.clip(aligned[aligned >= 8], lo, hi)]))


class FreshInputs:
    """A microbenchmark whose inputs can be allocated anew (:meth:`renew`).

    A GEMM shape's time depends on where its inputs were allocated too (alignment, pages;
    measured here: two allocations' medians differ by 10 % where two measurements of one
    allocation differ by 6.5 %).  The calibration repeats a case on fresh inputs, so
    that its noise floor includes what the shape alone cannot predict."""

    def __init__(self, make: Callable[[], Callable]):
        self._make = make
        self._fn = make()

    def renew(self) -> None:
        self._fn = None  # free the old inputs first
        self._fn = self._make()

    def __call__(self):
        return self._fn()


def _addmm(m, n, k):
    a, w, bias = torch.randn(m, k), torch.randn(n, k), torch.randn(n)
    wt = w.t()  # Linear's layout: a transposed weight
    return lambda: torch.addmm(bias, a, wt)


def _mm(m, n, k):
    a, c = torch.randn(m, k), torch.randn(k, n)
    return lambda: torch.mm(a, c)


def _bmm(b, m, n, k):
    a, c = torch.randn(b, m, k), torch.randn(b, k, n)
    return lambda: torch.bmm(a, c)


def gemm_cases(rng: np.random.Generator, max_flops: float = 4e9) -> Iterator[tuple]:
    """(node, callable) for addmm, mm and bmm over a log-spaced sweep of shapes; each
    callable is a :class:`FreshInputs`."""
    sizes = _log_sizes(rng, 1, 4096, 24)
    while True:
        m, n, k = (int(rng.choice(sizes)) for _ in range(3))
        op = rng.choice(["addmm", "mm", "bmm"])
        b = int(rng.choice([2, 4, 8, 12, 16, 32])) if op == "bmm" else 1
        if 2.0 * b * m * n * k > max_flops:
            continue
        if op == "addmm":
            yield (_node("aten::addmm", [(n,), (m, k), (k, n)], [(m, n)]),
                   FreshInputs(lambda m=m, n=n, k=k: _addmm(m, n, k)))
        elif op == "mm":
            yield (_node("aten::mm", [(m, k), (k, n)], [(m, n)]),
                   FreshInputs(lambda m=m, n=n, k=k: _mm(m, n, k)))
        else:
            yield (_node("aten::bmm", [(b, m, k), (b, k, n)], [(b, m, n)]),
                   FreshInputs(lambda b=b, m=m, n=n, k=k: _bmm(b, m, n, k)))


def page_fault_ns(mib: int = 64, reps: int = 9) -> float:
    """What the first write to a freshly mapped allocation costs, in ns per 4-KiB page:
    a ``fill_`` of a new ``mib``-MiB tensor (above glibc's mmap threshold: mapped anew
    each time, faulting on every page) less a ``fill_`` of one already touched, the median
    over ``reps`` interleaved pairs.  Under a second."""
    n = mib * 2 ** 20 // 4
    warm = torch.empty(n)
    warm.fill_(0.0)
    diffs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        warm.fill_(1.0)
        t1 = time.perf_counter()
        torch.empty(n).fill_(1.0)
        t2 = time.perf_counter()
        diffs.append((t2 - t1) - (t1 - t0))
    return max(0.0, statistics.median(diffs) / (mib * 2 ** 20 / 4096) * 1e9)


def stream_bw(mib: int = 128, reps: int = 5) -> float:
    """DRAM bandwidth beyond the caches, bytes/s: ``a.add_(b)`` over two ``mib``-MiB
    tensors (the roofline counts 3x one tensor: ``a`` read and written, ``b`` read), the
    median of ``reps``.  Under a second."""
    n = mib * 2 ** 20 // 4
    a, b = torch.ones(n), torch.ones(n)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        a.add_(b)
        times.append(time.perf_counter() - t0)
    return 3 * n * 4 / statistics.median(times)


def sort_ns(seed: int = 0, reps: int = 5) -> float:
    """What an ``EmbeddingBag`` backward with a dense gradient (a data-parallel table)
    spends beyond the sparse one, in ns per n·log2(n) of its n indices (it sorts them
    first): the median over a few bags of 2k-64k indices, uniform and Zipf."""
    gen = torch.Generator().manual_seed(seed)
    per = []
    for rows, batch, pooling, dist in ((20_000, 512, 4, {"kind": "uniform"}),
                                       (5_000, 512, 48, {"kind": "zipf", "alpha": 1.1}),
                                       (200_000, 1024, 16, {"kind": "uniform"}),
                                       (50_000, 2048, 32, {"kind": "zipf", "alpha": 1.0})):
        table = {"rows": rows, "dim": 16, "pooling": pooling, "distribution": dist}
        idx, off = _bag_input(table, batch, "cpu", gen)
        out = torch.ops.aten._embedding_bag(torch.zeros(rows, 16), idx, off)
        grad = torch.randn(batch, 16, generator=gen)

        def best(sparse: bool) -> float:
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                torch.ops.aten._embedding_bag_backward(grad, idx, off, out[1], out[2], out[3],
                                                       rows, False, 0, sparse, None)
                times.append(time.perf_counter() - t0)
            return min(times)

        n = idx.numel()
        per.append(max(0.0, best(False) - best(True)) * 1e9 / (n * np.log2(n)))
    return float(statistics.median(per))


def embedding_cases(rng: np.random.Generator) -> Iterator[tuple]:
    """(node, callable) for EmbeddingBag forward and backward: rows, dim, batch, pooling
    and the index distribution (uniform and Zipf at several alphas) vary."""
    while True:
        rows = int(10 ** rng.uniform(3, 6))
        dim = int(rng.choice([8, 16, 32, 64, 128]))
        batch = int(rng.choice([64, 128, 256, 512, 1024, 2048]))
        pooling = int(rng.integers(1, 64))
        dist = ({"kind": "uniform"} if rng.random() < 0.4 else
                {"kind": "zipf", "alpha": float(rng.choice([0.8, 1.0, 1.05, 1.2, 1.5]))})
        table = {"rows": rows, "dim": dim, "pooling": pooling, "distribution": dist}
        gen = torch.Generator().manual_seed(int(rng.integers(1 << 30)))
        idx, off = _bag_input(table, batch, "cpu", gen)
        weight = torch.full((rows, dim), 0.01)  # values do not change the time
        lookup = dict(table)
        n = batch * pooling
        fwd = _node("aten::_embedding_bag", [(rows, dim), (n,), (batch,)],
                    [(batch, dim), (n,), (batch,), (batch,)], lookup=lookup)
        yield fwd, lambda w=weight, i=idx, o=off: torch.ops.aten._embedding_bag(w, i, o)
        out = torch.ops.aten._embedding_bag(weight, idx, off)
        grad = torch.randn(batch, dim)
        bwd = _node("aten::_embedding_bag_backward",
                    [(batch, dim), (n,), (batch,), (n,), (batch,), (batch,)], [(rows, dim)],
                    lookup=lookup)
        bwd["output_nnz"] = [n]
        backward = (lambda g=grad, i=idx, o=off, r=out, rows=rows:
                    torch.ops.aten._embedding_bag_backward(g, i, o, r[1], r[2], r[3], rows,
                                                           False, 0, True, None))
        yield bwd, backward
        # SGD's sparse update of the table: weight.add_(grad, alpha=-lr)
        sparse = backward()
        upd = _node("aten::add_", [(rows, dim), (rows, dim)], [(rows, dim)],
                    nnz=[None, n], lookup=lookup)
        upd["phase"] = "optimizer"
        yield upd, lambda w=weight, s=sparse: w.add_(s, alpha=-0.01)


def run_case(fn: Callable, reps: int = 5) -> float:
    """Median wall time (us) of ``fn`` over ``reps`` calls, after one warm-up call.

    Wall-clock timing, not the profiler: subtracting the profiler's per-event cost from
    ops with dozens of nested events (sparse backward) turns its noise into large errors.
    More calls per case were tried and do not help here: this VM's speed drifts between
    rounds of tens of milliseconds, not between calls (docs/models/calibration.md).
    """
    fn()  # warm: first-touch pages, one-time dispatch set-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    return max(0.05, statistics.median(times))
