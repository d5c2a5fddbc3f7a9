"""Run a scenario for real and time its training iterations (the ground truth)."""
from __future__ import annotations

import gzip
import json
import os
import statistics
import tempfile
import time

import torch

from ..hardware.platforms import resolve_platform
from ..hardware.specs import cpu_signature
from ..model.workload import build_workload, training_step
from ..traces.recording import UNPROFILED_KEY
from ..utils.fileio import atomic_write_bytes

__all__ = ["measure"]


def measure(doc: dict, device: str = "cpu", iters: int = 20, warmup: int = 5,
            trace: str | os.PathLike | None = None, seed: int = 0,
            fast_init: bool = False, trace_steps: int = 1, memory: bool = False,
            trace_memory: bool | None = None, et: str | os.PathLike | None = None) -> dict:
    """Time ``iters`` training steps of a validated scenario on ``device``.

    ``warmup`` untimed steps come first: besides one-time set-up, glibc only raises its
    mmap threshold after large blocks are freed, so early steps pay page faults that a
    long training run does not.

    The scenario's platform ``threads`` sets torch's intra-op threads on the CPU.  With
    ``trace``, ``trace_steps`` more steps are recorded with torch.profiler (Kineto JSON,
    gzipped when the name ends in ``.gz``; one ``ProfilerStep#k`` span per step; with
    ``trace_memory``, by default ``memory``, its ``[memory]`` events too: they cost CPU
    time in the traced steps, which a calibration of overheads does not want).  ``et``
    (with ``trace``): the same steps' PyTorch execution trace, linked to the Kineto
    events by their record-function ids (gzipped for ``.gz``).
    Returns the median, the spread and every sample (ms); with ``memory``, also the
    step's peak of allocated tensor memory (``peak_memory_bytes``, see
    :func:`peak_memory`).
    """
    if et and not trace:
        raise ValueError("an execution trace is recorded with the Kineto trace: "
                         "give trace= too")
    platform = resolve_platform(doc["platform"])
    old_threads = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(platform.threads)
    try:
        workload = build_workload(doc, device=device, fast_init=fast_init)
        batch = workload.make_batch(seed)
        optimizer = workload.optimizer()
        sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
        for _ in range(warmup):
            training_step(workload.module, batch, optimizer)
        sync()
        samples = []
        for _ in range(iters):
            t0 = time.perf_counter()
            training_step(workload.module, batch, optimizer)
            sync()
            samples.append((time.perf_counter() - t0) * 1e3)
        peak = peak_memory(workload, batch, optimizer, device) if memory else None
        samples.sort()
        median = statistics.median(samples)
        q = lambda f: samples[min(len(samples) - 1, int(f * len(samples)))]
        result = {"scenario": doc["name"], "device": device, "threads": platform.threads,
                  "iterations": iters, "iteration_ms": median, "min_ms": samples[0],
                  "p10_ms": q(0.1), "p90_ms": q(0.9),
                  "spread_pct": 100.0 * (q(0.9) - q(0.1)) / median, "samples_ms": samples,
                  "torch": torch.__version__,
                  **({"peak_memory_bytes": peak} if memory else {})}
        if trace:
            # The untraced steps' figures travel with the trace: the profiler slows the
            # step it records, and a comparison wants the step as it runs (traces.compare)
            unprofiled = {k: result[k] for k in ("scenario", "device", "threads",
                                                 "iterations", "iteration_ms", "p10_ms",
                                                 "p90_ms", "torch")}
            unprofiled["cpu"] = cpu_signature()  # the host that ran it
            _record_trace(workload, batch, optimizer, os.fspath(trace), device, sync,
                          trace_steps, memory if trace_memory is None else trace_memory,
                          unprofiled, os.fspath(et) if et else None)
    finally:
        torch.set_num_threads(old_threads)
    return result


def peak_memory(workload, batch, optimizer, device: str) -> int:
    """The high-water mark of allocated tensor bytes over one steady-state step,
    parameters and inputs included: ``max_memory_allocated`` on CUDA; on the CPU, the
    tensors alive at the step's start plus the peak of what the step allocates, as
    torch.profiler's memory events count it (the CPU allocator has no peak counter)."""
    optimizer.zero_grad(set_to_none=True)   # the last step's gradients: freed first
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        training_step(workload.module, batch, optimizer)
        torch.cuda.synchronize()
        return int(torch.cuda.max_memory_allocated())

    from torch.profiler import ProfilerActivity, profile  # deferred: torch
    from torch.utils._pytree import tree_flatten  # deferred: torch

    from ..model.memory import tensor_bytes  # deferred: imports torch

    state = [v for s in optimizer.state.values() for v in s.values()
             if isinstance(v, torch.Tensor)]
    resident = tensor_bytes([*workload.module.parameters(), *state,
                             *(t for t in tree_flatten(batch)[0]
                               if isinstance(t, torch.Tensor))])
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        training_step(workload.module, batch, optimizer)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "memory.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    # The allocator's counter carries what earlier profiling sessions left behind: the
    # step's own allocations are measured from the value before its first event.
    marks = [e["args"] for e in events if e.get("name") == "[memory]"]
    if not marks:
        return resident
    start = marks[0]["Total Allocated"] - marks[0]["Bytes"]
    allocated = [m["Total Allocated"] - start for m in marks]
    return resident + max(0, max(allocated))


def _record_trace(workload, batch, optimizer, path: str, device: str, sync=lambda: None,
                  steps: int = 1, memory: bool = False, unprofiled: dict | None = None,
                  et_path: str | None = None) -> None:
    """Record ``steps`` steps with torch.profiler to ``path`` (gzipped for ``.gz``);
    ``unprofiled`` (the untraced steps' figures) goes in as the top-level key
    :data:`UNPROFILED_KEY`, which Perfetto and chrome://tracing ignore.  ``et_path``:
    the same steps' execution trace (``ExecutionTraceObserver``)."""

    from torch.profiler import (
        ExecutionTraceObserver,
        ProfilerActivity,
        profile,
        record_function,
    )  # deferred: torch


    activities = [ProfilerActivity.CPU]
    if device.startswith("cuda"):
        activities.append(ProfilerActivity.CUDA)
    with tempfile.TemporaryDirectory() as tmp:
        observer = (ExecutionTraceObserver().register_callback(os.path.join(tmp, "et.json"))
                    if et_path else None)
        try:
            with profile(activities=activities, record_shapes=True, profile_memory=memory,
                         execution_trace_observer=observer) as prof:
                for k in range(max(1, steps)):
                    # Mark the steps ourselves: without a schedule, prof.step() writes no
                    # span.
                    with record_function(f"ProfilerStep#{k}"):
                        training_step(workload.module, batch, optimizer)
                    sync()  # as the timed steps: each starts with the GPU idle
        finally:
            if observer is not None:
                observer.unregister_callback()
        raw = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(raw)
        outputs = [(path, raw, unprofiled)]
        if et_path:
            outputs.append((et_path, os.path.join(tmp, "et.json"), None))
        for out, src, extra in outputs:
            with open(src, "rb") as f:
                data = f.read()
            if extra is not None:
                doc = json.loads(data)
                doc[UNPROFILED_KEY] = extra
                data = json.dumps(doc).encode()
            atomic_write_bytes(out, gzip.compress(data) if out.endswith(".gz") else data)
