"""Measure a CUDA GPU for a calibrated profile and for validation: its peaks, GEMMs on
given shapes, single kernels, and whole training steps with their Kineto traces.

Everything lands in one folder: ``measurements.json`` (device, peaks, GEMM and kernel
timings, each scenario's measured iteration) and one gzipped Kineto trace per traced
scenario plus one for the kernel sweep.  Nothing is fitted here: the measurements are
the raw material that ``calibrate`` and the validation benchmarks read, and a folder
measured once on a rented GPU can be refitted anywhere.

Kernel times come from CUDA-graph replays (a graph of ``reps`` back-to-back calls, timed
with CUDA events: no launch gaps between the kernels), so they are kernel times, not
launch-bound Python loops.  Where a graph cannot be captured the timing falls back to an
event-timed loop and says so (``method``).
"""
from __future__ import annotations

import gzip
import json
import os
import platform as _platform
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from ..hardware.platforms import PLATFORM_PRESETS
from ..hardware.specs import cpu_model
from ..model.embedding_blocks import bag_input as _bag_input
from ..utils.fileio import atomic_write_bytes
from ..utils.progress import Cancelled, check_cancelled
from .host_check import measure_host
from .measure import measure
from .samples import _doc, random_scenarios

__all__ = ["time_kernel", "device_info", "measure_peaks", "gemm_sweep", "kernel_sweep",
           "scenario_runs", "collect", "gpu_scenarios", "single_gpu_preset",
           "calibration_gemm_shapes"]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_kernel(fn: Callable, device: torch.device, target_ms: float = 2.0,
                max_reps: int = 200, rounds: int = 5, graph: bool = True) -> tuple[float, str]:
    """Milliseconds per call of ``fn`` and the method: ``graph`` (a CUDA graph of
    back-to-back calls), ``events`` (an event-timed loop: launch gaps included; also
    with ``graph=False``, for autograd and host-synchronising ops) or ``wall`` (no CUDA)."""
    fn()
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    est_ms = max(1e-3, (time.perf_counter() - t0) * 1e3)
    reps = int(min(max_reps, max(3, target_ms / est_ms)))
    if device.type != "cuda":
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            times.append((time.perf_counter() - t0) * 1e3 / reps)
        return statistics.median(times), "wall"
    try:
        if not graph:
            raise RuntimeError("graph capture not wanted")
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream(device).wait_stream(side)
        captured = torch.cuda.CUDAGraph()
        with torch.cuda.graph(captured):
            for _ in range(reps):
                fn()
        captured.replay()
        run, method = captured.replay, "graph"
    except Exception:  # noqa: BLE001 - ops that sync or allocate on the host cannot be captured
        torch.cuda.synchronize(device)

        def run():
            for _ in range(reps):
                fn()
        method = "events"
    _sync(device)
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / reps)
    return statistics.median(times), method


def device_info(device: torch.device) -> dict:
    info = {"host": socket.gethostname(), "python": _platform.python_version(),
            "torch": torch.__version__, "cpu_model": cpu_model(),
            "cpu_count": os.cpu_count(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        info.update({"name": p.name, "sms": p.multi_processor_count,
                     "memory_bytes": p.total_memory,
                     "l2_bytes": getattr(p, "L2_cache_size", None),
                     "capability": f"{p.major}.{p.minor}", "cuda": torch.version.cuda})
    else:
        info["name"] = info["cpu_model"]
    return info


def measure_peaks(device: torch.device, scale: int = 1) -> dict:
    """Device-to-device copy bandwidth (DRAM and an L2-resident buffer), a streaming
    elementwise kernel's bandwidth, GEMM rates in
    fp32 (CUDA cores, TF32 off), TF32 and bf16, each from the median of graph replays."""
    out = {}
    big = (256 << 20) // scale  # 1 GiB of floats: far beyond L2
    a = torch.empty(big, device=device).uniform_()
    b = torch.empty_like(a)
    ms, method = time_kernel(lambda a=a, b=b: b.copy_(a), device, target_ms=20)
    out["dram_copy_gbps"] = 2 * 4 * big / (ms * 1e-3) / 1e9
    # What kernels stream: an elementwise add reads two tensors and writes one.  On the
    # H200 this reaches 1.56x the copy above (cudaMemcpy's device-to-device path).
    c = torch.empty_like(a)
    ms, _ = time_kernel(lambda a=a, b=b, c=c: torch.add(a, b, out=c), device, target_ms=20)
    out["dram_stream_gbps"] = 3 * 4 * big / (ms * 1e-3) / 1e9
    del a, b, c
    small = (2 << 20) // scale  # 8 MiB read + 8 MiB written: L2-resident on a 50+ MB L2
    a = torch.empty(small, device=device).uniform_()
    b = torch.empty_like(a)
    ms, _ = time_kernel(lambda a=a, b=b: b.copy_(a), device, target_ms=5)
    out["l2_copy_gbps"] = 2 * 4 * small / (ms * 1e-3) / 1e9
    del a, b
    n = 8192 // scale
    old = torch.backends.cuda.matmul.allow_tf32
    for label, dtype, tf32 in (("fp32", torch.float32, False), ("tf32", torch.float32, True),
                               ("bf16", torch.bfloat16, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            x = torch.randn(n, n, device=device, dtype=dtype)
            y = torch.randn(n, n, device=device, dtype=dtype)
            c = torch.empty(n, n, device=device, dtype=dtype)
            ms, _ = time_kernel(lambda: torch.mm(x, y, out=c), device, target_ms=30)
            out[f"gemm_{label}_tflops"] = 2 * n ** 3 / (ms * 1e-3) / 1e12
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
    # The launch path: Python -> aten -> cudaLaunchKernel for a one-element add.
    x = torch.zeros(1, device=device)
    for _ in range(100):
        x.add_(1)
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(2000):
        x.add_(1)
    out["launch_us_per_op"] = (time.perf_counter() - t0) * 1e6 / 2000
    _sync(device)
    ms, _ = time_kernel(lambda: x.add_(1), device, target_ms=1)
    out["tiny_kernel_us"] = ms * 1e3
    out["method"] = method
    return out


_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def gemm_sweep(shapes: list[dict], device: torch.device, deadline: float,
               check: Callable[[], None] | None = None) -> list[dict]:
    """Time each ``{"op": "linear"|"bmm", "b", "m", "n", "k", "dtype"}``.

    ``linear`` is NeuSight's op: ``(b, m, k)`` inputs times a ``(n, k)`` weight, i.e. one
    ``mm`` of ``(b*m, k) x (k, n)`` with the weight transposed; ``bmm`` is ``b`` separate
    products.  TF32 stays off (torch's default), so fp32 runs on the CUDA cores."""
    rows = []
    for s in shapes:
        if time.perf_counter() > deadline:
            break
        if check is not None:
            check()
        b, m, n, k = (int(s[key]) for key in ("b", "m", "n", "k"))
        dt = _DTYPES[s.get("dtype", "float32")]
        try:
            if s["op"] == "bmm":
                x = torch.randn(b, m, k, device=device, dtype=dt)
                y = torch.randn(b, k, n, device=device, dtype=dt)
                c = torch.empty(b, m, n, device=device, dtype=dt)
                fn = lambda x=x, y=y, c=c: torch.bmm(x, y, out=c)  # noqa: E731
            else:
                x = torch.randn(b * m, k, device=device, dtype=dt)
                w = torch.randn(n, k, device=device, dtype=dt)
                c = torch.empty(b * m, n, device=device, dtype=dt)
                fn = lambda x=x, w=w, c=c: torch.mm(x, w.t(), out=c)  # noqa: E731
            ms, method = time_kernel(fn, device)
            rows.append({**s, "ms": ms, "method": method})
        except torch.cuda.OutOfMemoryError:
            rows.append({**s, "ms": None, "method": "out of memory"})
        finally:
            x = y = w = c = fn = None  # noqa: F841 - free before the next shape
    return rows


def _kernel_cases(device: torch.device, scale: int = 1):
    """(label, node-like description, callable) for elementwise ops, reductions,
    normalisations, copies, losses, dense and sparse SGD updates and EmbeddingBag
    forward/backward with uniform and Zipf indices."""
    import torch.nn.functional as F  # deferred: torch


    gen = torch.Generator(device=device).manual_seed(0)
    for numel in np.unique(np.geomspace(1 << 10, (1 << 28) // scale, 12).astype(int)):
        numel = int(numel)
        x = torch.randn(numel, device=device)
        y = torch.randn(numel, device=device)
        out = torch.empty_like(x)
        yield "add", {"numel": numel}, lambda x=x, y=y, o=out: torch.add(x, y, out=o)
        yield "mul", {"numel": numel}, lambda x=x, y=y, o=out: torch.mul(x, y, out=o)
        yield "relu", {"numel": numel}, lambda x=x, o=out: torch.clamp_min(x, 0, out=o)
        yield "sigmoid", {"numel": numel}, lambda x=x, o=out: torch.sigmoid(x, out=o)
        yield "sgd_dense", {"numel": numel}, lambda x=x, y=y: x.add_(y, alpha=-0.01)
        cols = 1024 if numel >= 1024 else numel
        rows_ = numel // cols
        x2 = x[: rows_ * cols].view(rows_, cols)
        yield "sum_lastdim", {"rows": rows_, "cols": cols}, lambda x2=x2: x2.sum(-1)
        yield "softmax", {"rows": rows_, "cols": cols}, lambda x2=x2: torch.softmax(x2, -1)
        yield "log_softmax", {"rows": rows_, "cols": cols}, \
            lambda x2=x2: torch.log_softmax(x2, -1)
        w_ln, b_ln = torch.ones(cols, device=device), torch.zeros(cols, device=device)
        yield "layer_norm", {"rows": rows_, "cols": cols}, \
            lambda x2=x2, w=w_ln, b=b_ln: F.layer_norm(x2, (x2.shape[-1],), w, b)
        yield "transpose_copy", {"rows": rows_, "cols": cols}, \
            lambda x2=x2: x2.t().contiguous()
        yield "cat", {"numel": numel}, lambda x=x, y=y: torch.cat([x, y])
    rng = np.random.default_rng(0)
    for _ in range(36):
        rows = int(10 ** rng.uniform(4, 7))
        dim = int(rng.choice([16, 32, 64, 128, 256]))
        batch = int(rng.choice([256, 1024, 4096, 16384, 65536]))
        pooling = int(rng.integers(1, 80))
        dist = ({"kind": "uniform"} if rng.random() < 0.4 else
                {"kind": "zipf", "alpha": float(rng.choice([0.8, 1.05, 1.2, 1.5]))})
        if batch * pooling > (1 << 24) // scale:
            continue
        table = {"rows": rows, "dim": dim, "pooling": pooling, "distribution": dist}
        idx, off = _bag_input(table, batch, device, gen)
        bag = torch.nn.EmbeddingBag(rows, dim, mode="sum", sparse=True).to(device)
        desc = {**table, "batch": batch}
        yield "embedding_bag_fwd", desc, lambda bag=bag, i=idx, o=off: bag(i, o)
        grad = torch.randn(batch, dim, device=device)

        def fwd_bwd(bag=bag, i=idx, o=off, g=grad):
            bag.weight.grad = None
            bag(i, o).backward(g)
        yield "embedding_bag_fwd_bwd", desc, fwd_bwd
    for rows, classes in ((256, 1000), (1024, 8000), (4096, 32000), (16384, 32000)):
        logits = torch.randn(rows, classes, device=device, requires_grad=True)
        target = torch.randint(0, classes, (rows,), device=device)
        yield "cross_entropy_fwd", {"rows": rows, "cols": classes}, \
            lambda lg=logits, t=target: F.cross_entropy(lg, t)


# Autograd's backward allocates and frees on the host side: time it in a plain loop.
_NO_GRAPH = {"embedding_bag_fwd_bwd"}


def kernel_sweep(device: torch.device, deadline: float, trace: str | None = None,
                 scale: int = 1) -> list[dict]:
    """Time every case of :func:`_kernel_cases`; with ``trace``, also record three calls
    of each under torch.profiler (inside a ``case#i`` range), whose kernel events give
    the per-kernel durations that a graph replay sums."""
    rows, cases = [], []
    for label, desc, fn in _kernel_cases(device, scale):
        if time.perf_counter() > deadline:
            break
        try:
            ms, method = time_kernel(fn, device, max_reps=100,
                                     graph=label not in _NO_GRAPH)
        except Exception as exc:  # noqa: BLE001 - keep the sweep going; say what failed
            rows.append({"op": label, **desc, "ms": None, "method": f"failed: {exc}"})
            continue
        rows.append({"op": label, **desc, "ms": ms, "method": method, "case": len(cases)})
        cases.append(fn)
    if trace and cases and device.type == "cuda":
        from torch.profiler import (  # deferred: torch
            ProfilerActivity,
            profile,
            record_function,
        )
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                     record_shapes=True) as prof:
            for i, fn in enumerate(cases):
                with record_function(f"case#{i}"):
                    for _ in range(3):
                        fn()
                torch.cuda.synchronize(device)
        _export(prof, trace)
    return rows


def _export(prof, path: str) -> None:
    """The profile's Chrome trace at ``path`` (gzipped for ``.gz``), written atomically; the
    raw trace goes through a temporary folder, never beside ``path``."""
    with tempfile.TemporaryDirectory(prefix="ml-dse-trace-") as tmp:
        raw = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(raw)
        with open(raw, "rb") as f:
            data = f.read()
    atomic_write_bytes(path, gzip.compress(data) if path.endswith(".gz") else data)


# Traced steps per scenario: the calibration takes each op's median over them.  A single
# traced step carries one-offs, such as cuBLAS's first call under the profiler (2.8 ms),
# and would be the noise floor of the launch-bound predictions.
TRACED_STEPS = 3


def scenario_runs(docs: list[dict], device: torch.device, folder: Path, deadline: float,
                  iters: int = 30, warmup: int = 10, trace_every: int = 1,
                  check: Callable[[int, str], None] | None = None) -> list[dict]:
    """Measure each scenario's training iteration (:func:`predictors.calibrate.measure.measure`)
    and record :data:`TRACED_STEPS` traced steps of every ``trace_every``-th; ``check(i, name)`` is called
    before each (progress, and a cancel that raises)."""

    rows = []
    for i, doc in enumerate(docs):
        if time.perf_counter() > deadline:
            break
        if check is not None:
            check(i, doc["name"])
        trace = str(folder / f"scenario{i:02d}.json.gz") if i % trace_every == 0 else None
        try:
            # the step's peak memory too (one more step; the traces stay without memory
            # events, which would slow the CPU side that the overheads are measured on)
            result = measure(doc, device=str(device), iters=iters, warmup=warmup,
                             trace=trace, fast_init=True, trace_steps=TRACED_STEPS,
                             memory=True, trace_memory=False)
            rows.append({"index": i, "doc": doc, "measure": result,
                         "trace": os.path.basename(trace) if trace else None})
        except Exception as exc:  # noqa: BLE001 - one scenario's failure is a finding
            rows.append({"index": i, "doc": doc, "error": f"{type(exc).__name__}: {exc}"})
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def calibration_gemm_shapes(seed: int = 0, n: int = 600, n_fp32: int = 200) -> list[dict]:
    """``n`` fp16/bf16 GEMMs and ``n_fp32`` fp32 ones (3 in 4 ``linear``, the rest
    ``bmm``) with log-uniform sizes from 16 to 16384, half of them with N and K rounded to
    a multiple of 8-128: alignment decides a tensor-core GEMM's speed
    (``gpu/tensor_core_gemm.py``).  fp32 products stay under 1e12 FLOPs (20 ms at an
    H200's sgemm rate)."""

    rng = np.random.default_rng(seed)
    shapes: list[dict] = []
    while len(shapes) < n + n_fp32:
        m, nn, k = (int(np.exp(rng.uniform(np.log(16), np.log(16384)))) for _ in range(3))
        op = "bmm" if rng.random() < 0.25 else "linear"
        b = int(rng.choice([4, 8, 16, 32, 64])) if op == "bmm" else 1
        if rng.random() < 0.5:
            step = int(2 ** rng.integers(3, 8))
            nn, k = max(step, round(nn / step) * step), max(step, round(k / step) * step)
            if rng.random() < 0.5:
                m = max(8, round(m / 8) * 8)
        fp32 = len(shapes) >= n
        if not 1e5 <= 2.0 * b * m * nn * k <= (1e12 if fp32 else 2e12):
            continue
        dtype = "float32" if fp32 else ("bfloat16" if rng.random() < 0.7 else "float16")
        shapes.append({"op": op, "b": b, "m": m, "n": nn, "k": k, "dtype": dtype})
    return shapes


def single_gpu_preset(name: str) -> str:
    """The one-GPU platform preset of the GPU called ``name`` (the H100's for GPUs without
    one: a prediction takes the device from its profile, the platform only says one GPU)."""

    for preset in PLATFORM_PRESETS.values():
        if preset.device == name and preset.gpus == 1 and preset.nodes == 1:
            return preset.name
    return "h100-1"


def _gpu_sized(rng, preset: str, seed: int) -> list[dict]:
    """Scenarios that keep a GPU busy: three DLRMs with large batches and tables, three
    deeper LMs (fp32 and bf16).  Seed 0 gives the sizes of the bundled H200
    measurements; other seeds draw new ones."""

    if seed == 0:
        dlrms = ((2048, 8, 1_000_000, 64), (8192, 16, 2_000_000, 128),
                 (16384, 26, 500_000, 64))
        lms = ((4, 1024, 16, 512, 16, "float32"), (12, 768, 12, 512, 8, "float32"),
               (6, 2048, 16, 1024, 8, "bfloat16"))
    else:
        dlrms = tuple((int(rng.choice([2048, 4096, 8192, 16384])), int(rng.integers(8, 27)),
                       int(rng.choice([500_000, 1_000_000, 2_000_000])),
                       int(rng.choice([64, 128]))) for _ in range(3))
        lms = []
        for dtype in ("float32", "bfloat16", "bfloat16"):
            heads = int(rng.choice([8, 12, 16]))
            lms.append((int(rng.integers(2, 13)), heads * int(rng.choice([64, 128])), heads,
                        int(rng.choice([256, 512, 1024])), int(rng.choice([4, 8, 16])), dtype))
    docs = []
    for batch, tables, rows, dim in dlrms:
        t = [{"rows": rows, "dim": dim, "pooling": int(rng.integers(5, 40)),
              "distribution": {"kind": "zipf", "alpha": 1.05}} for _ in range(tables)]
        nodes = [
            {"id": "dense", "kind": "dense_input", "params": {"features": 13}},
            {"id": "bottom", "kind": "mlp", "params": {"layers": [512, 256, dim],
                                                       "final": "relu"}},
            {"id": "tables", "kind": "embedding_tables", "params": {"tables": t}},
            {"id": "interaction", "kind": "interaction", "params": {"op": "dot"}},
            {"id": "top", "kind": "mlp", "params": {"layers": [1024, 1024, 512, 256, 1],
                                                    "final": "sigmoid"}},
            {"id": "loss", "kind": "loss", "params": {"kind": "bce"}},
        ]
        edges = [("dense", "bottom"), ("bottom", "interaction"), ("tables", "interaction"),
                 ("interaction", "top"), ("top", "loss")]
        docs.append(_doc(f"GPU DLRM ({tables} tables of {rows}, dim {dim}, batch {batch})",
                         nodes, edges, batch, {"preset": preset}))
    for layers, hidden, heads, seq, batch, dtype in lms:
        nodes = [
            {"id": "tokens", "kind": "token_input",
             "params": {"vocab": 32000, "seq_len": seq}},
            {"id": "encoder", "kind": "transformer_layer",
             "params": {"hidden": hidden, "heads": heads, "ffn": 4 * hidden,
                        "count": layers, "dropout": 0.1}},
            {"id": "head", "kind": "lm_head", "params": {}},
            {"id": "loss", "kind": "loss", "params": {"kind": "cross_entropy"}},
        ]
        edges = [("tokens", "encoder"), ("encoder", "head"), ("head", "loss")]
        doc = _doc(f"GPU LM ({layers}x{hidden}, seq {seq}, batch {batch}, {dtype})", nodes,
                   edges, batch, {"preset": preset})
        doc["training"]["dtype"] = dtype
        docs.append(doc)
    return docs


def gpu_scenarios(name: str, seed: int = 0, n_random: int = 10) -> list[dict]:
    """What a GPU calibration measures: ``n_random`` DLRMs and LMs in the accuracy
    targets' ranges (launch-bound on a large GPU: their time is the host's overheads)
    and six GPU-sized ones, all on ``name``'s one-GPU platform."""


    preset = single_gpu_preset(name)
    docs = random_scenarios(n_random, seed)
    for doc in docs:
        doc["platform"] = {"preset": preset}
    return docs + _gpu_sized(np.random.default_rng(seed), preset, seed)


def collect(folder: str | os.PathLike, *, device: str = "cuda", gemm_shapes=(),
            scenarios=(), budget_s: float = 300.0, scale: int = 1, kernels: bool = True,
            log: Callable[[str], None] | None = print,
            progress: Callable[[float, str], None] | None = None,
            cancelled: Callable[[], bool] | None = None) -> dict:
    """Run every measurement within ``budget_s`` and write ``measurements.json`` (after
    each stage, so a stage that fails or runs out of time keeps what came before).
    ``progress(fraction, stage)`` follows the stages and scenarios; when ``cancelled()``
    answers True, :class:`~predictors.utils.progress.Cancelled` is raised."""

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    dev = torch.device(device)
    t0 = time.perf_counter()
    doc: dict = {"format": "ml-dse-measurements", "version": 1, "device": device_info(dev),
                 "budget_s": budget_s, "stages": {}}
    gemm_shapes, scenarios = list(gemm_shapes), list(scenarios)

    def save():
        atomic_write_bytes(folder / "measurements.json", json.dumps(doc, indent=1).encode())

    def check(fraction: float | None = None, stage: str = ""):
        check_cancelled(cancelled, stage)
        if progress is not None and fraction is not None:
            progress(min(0.99, fraction), stage)

    def scenario_check(i: int, name: str):
        check(0.55 + 0.4 * i / max(1, len(scenarios)),
              f"scenario {i + 1} of {len(scenarios)}: {name}")

    stages = [
        # the host's own CPU figures, no GPU involved (the host check a prediction on
        # another host takes): what a GPU step's CPU side is set against
        ("host", 0.02, lambda end: measure_host(threads=1)),
        ("peaks", 0.10, lambda end: measure_peaks(dev, scale)),
        ("gemm", 0.40, lambda end: gemm_sweep(gemm_shapes, dev, end, check=check)),
        ("kernels", 0.55, lambda end: kernel_sweep(dev, end, str(folder / "kernels.json.gz"),
                                                    scale) if kernels else []),
        ("scenarios", 0.97, lambda end: scenario_runs(scenarios, dev, folder, end,
                                                      check=scenario_check)),
    ]
    starts = {"host": 0.0, "peaks": 0.02, "gemm": 0.05, "kernels": 0.4, "scenarios": 0.55}
    for name, until, run in stages:
        start = time.perf_counter()
        check(starts[name], name)
        if log is not None:
            log(f"[{start - t0:6.1f} s] {name}")
        try:
            doc[name] = run(t0 + until * budget_s)
        except Cancelled:
            raise
        except Exception as exc:  # noqa: BLE001 - record it and go on to the next stage
            import traceback  # local: optional
            doc[name] = None
            doc["stages"][f"{name}_error"] = traceback.format_exc()
            if log is not None:
                log(f"  {name} failed: {exc}")
        doc["stages"][name] = round(time.perf_counter() - start, 2)
        save()
    return doc
