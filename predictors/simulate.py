"""Simulate one rank's training step: CPU threads issue ops, a stream runs the kernels.

The walk follows issue order, which is the order the real threads issue ops in:
the main thread runs forward and the optimizer and blocks in ``backward()`` while the
autograd thread issues the backward ops.  On a GPU a kernel starts at
``max(launch end + launch latency, stream free, inputs ready)``; on the CPU device the
kernel runs inline on the issuing thread (launch latency zero), as design.md requires.
"""
from __future__ import annotations

from typing import Callable

from .devices.costs import CostedGraph
from .timeline import Timeline, TimelineBuilder

__all__ = ["simulate_rank"]

_US = 1e6


def simulate_rank(costed: CostedGraph, rank: int = 0, title: str = "",
                  cancelled: Callable[[], bool] | None = None) -> Timeline:
    """Walk ``costed`` and return the rank's Timeline (microseconds from 0)."""
    from .predict import Cancelled  # the pipeline's cancellation type

    dev, oh = costed.device, costed.overheads
    on_gpu = dev.kind != "cpu"
    tl = TimelineBuilder(title)
    cpu_lanes = {"main": tl.lane(rank, "cpu", "CPU main thread"),
                 "autograd": tl.lane(rank, "cpu", "CPU autograd thread")}
    stream = tl.lane(rank, "stream", "stream 0 (compute)") if on_gpu else None
    cpu_t = 0.0  # one clock: the main thread blocks while the autograd thread works
    if oh.step_s > 0:  # the training loop's own Python time (zero_grad, step() set-up)
        tl.add(cpu_lanes["main"], 0.0, oh.step_s * _US, "cpu_overhead", "training loop",
               "per-iteration CPU time outside aten ops (measured)")
        cpu_t = oh.step_s
    stream_free = 0.0
    done: dict[int, float] = {}  # op index -> time its result is ready
    kernels = 0
    for n, op in enumerate(costed.ops):
        if cancelled is not None and n % 2000 == 0 and cancelled():
            raise Cancelled("simulating")
        o = op.overheads
        gap = o.t1 + (oh.autograd_t1 if op.thread == "autograd" else 0.0)
        start = cpu_t + gap
        lane = cpu_lanes[op.thread]
        if op.kernel_s <= 0.0:
            end = start + o.t5
            tl.add(lane, start * _US, (end - start) * _US, "view", op.name, op.detail)
            done[op.index] = end if not on_gpu else max(
                [end] + [done.get(d, 0.0) for d in op.deps])
            cpu_t = end
            continue
        kernels += 1
        if on_gpu:
            launch = start + o.t2
            launch_end = launch + o.t4
            ready = max((done.get(d, 0.0) for d in op.deps), default=0.0)
            k_start = max(launch_end + dev.launch_latency_s, stream_free, ready)
            k_end = k_start + op.kernel_s
            stream_free = k_end
            end = launch_end + o.t3
            tl.add(lane, start * _US, (end - start) * _US, "cpu_op", op.name, op.detail)
            tl.add(stream, k_start * _US, op.kernel_s * _US, op.category, op.name,
                   f"{op.detail} | {op.model}")
            done[op.index] = k_end
        else:
            end = start + o.t2 + op.kernel_s + o.t3
            tl.add(lane, start * _US, (end - start) * _US, op.category, op.name,
                   f"{op.detail} | {op.model}")
            done[op.index] = end
        cpu_t = end
    return tl.build(device=dev.name, kernels=kernels, ops=len(costed.ops),
                    overheads=oh.source)
