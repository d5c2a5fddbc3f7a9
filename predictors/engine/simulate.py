"""Simulate a training step: CPU threads issue ops, streams run the kernels, ranks meet
in collectives.

Each rank's walk follows issue order, which is the order the real threads issue ops in:
the main thread runs forward and the optimizer and blocks in ``backward()`` while the
autograd thread issues the backward ops (on the CPU device the main thread runs them
itself: one lane).  On a GPU a kernel starts at
``max(launch end + launch latency, stream free, inputs ready)``; on the CPU device the
kernel runs inline on the issuing thread (launch latency zero), as design.md requires.

A collective goes on the rank's communication stream.  Its kernel starts when the rank
gets there (launched, stream free, inputs ready) and ends a collective-model duration
after the *last* rank got there: an early rank's kernel waits for its peers, as NCCL's
kernels do in a profiler trace.  Every rank issues the same collectives in the same order,
so the ranks are walked together, one collective at a time.
"""
from __future__ import annotations

from typing import Callable, Generator

from ..costs.op_costs import CostedGraph, CostedOp
from ..model.comm_ops import PROFILER_NAMES
from ..utils.progress import Cancelled
from .timeline import Timeline, TimelineBuilder

__all__ = ["simulate_rank", "simulate_ranks", "CollectiveTimer", "CollectiveMismatch"]

_US = 1e6
MEMORY_COUNTER = "memory allocated"

class CollectiveMismatch(Exception):
    """The ranks' graphs issue different collectives: a bug in how they were built."""


# (op, its arrival in s) out of a rank's walk; (start, end, detail) back into it
Walk = Generator[tuple[CostedOp, float], tuple[float, float, str], int]
CollectiveTimer = Callable[[list[CostedOp]], tuple[float, str]]


def _walk(costed: CostedGraph, rank: int, tl: TimelineBuilder,
          cancelled: Callable[[], bool] | None) -> Walk:
    """One rank's ops onto ``tl``; yields at each collective.  Returns the kernel count."""

    dev, oh = costed.device, costed.overheads
    on_gpu = dev.kind != "cpu"
    main = tl.lane(rank, "cpu", "CPU main thread")
    # On the CPU device the autograd engine runs the backward on the thread that called
    # backward() (its ready queue has no worker thread): one lane, as a recording shows
    cpu_lanes = {"main": main,
                 "autograd": tl.lane(rank, "cpu", "CPU autograd thread") if on_gpu else main}
    stream = tl.lane(rank, "stream", "stream 0 (compute)") if on_gpu else None
    comm = None
    cpu_t = 0.0  # one clock: the main thread blocks while the autograd thread works
    if oh.step_s > 0:  # the training loop's own Python time (zero_grad, step() set-up)
        tl.add(cpu_lanes["main"], 0.0, oh.step_s * _US, "cpu_overhead", "training loop",
               "per-iteration CPU time outside aten ops (measured)")
        cpu_t = oh.step_s
    stream_free = comm_free = 0.0
    done: dict[int, float] = {}  # op index -> time its result is ready
    issued: list[float] = []     # per op: when its thread calls it (its memory is taken)
    kernels = 0
    for n, op in enumerate(costed.ops):
        if cancelled is not None and n % 2000 == 0 and cancelled():
            raise Cancelled("simulating")
        o = op.overheads
        gap = o.t1 + (oh.autograd_t1 if op.thread == "autograd" else 0.0)
        start = cpu_t + gap
        issued.append(start)
        lane = cpu_lanes[op.thread]
        ready = max((done.get(d, 0.0) for d in op.deps), default=0.0)
        if op.category == "communication":
            name = PROFILER_NAMES.get(op.name, op.name)
            launch_end = start + o.t2 + o.t4
            end = launch_end + o.t3
            tl.add(lane, start * _US, (end - start) * _US, "cpu_op", name,
                   f"{op.phase}: {op.detail}")
            # ProcessGroupNCCL makes its stream wait for the compute queued before it
            arrival = max(launch_end + dev.launch_latency_s, comm_free, ready,
                          stream_free if on_gpu else 0.0)
            k_start, k_end, why = yield op, arrival
            if comm is None:
                comm = tl.lane(rank, "stream", "stream 1 (communication)")
            tl.add(comm, k_start * _US, (k_end - k_start) * _US, "communication", name,
                   f"{op.phase}: {op.detail} | {why}")
            comm_free = done[op.index] = k_end
            cpu_t = end
            kernels += 1
            continue
        if op.kernel_s <= 0.0:
            end = start + o.t5
            tl.add(lane, start * _US, (end - start) * _US, "view", op.name, op.detail)
            done[op.index] = end if not on_gpu else max(end, ready)
            cpu_t = end
            continue
        kernels += 1
        if on_gpu:
            launch_end = start + o.t2 + o.t4
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
    memory = costed.memory
    if memory is not None and len(memory.curve) == len(issued):
        # allocations happen when the CPU calls the op (the caching allocator is
        # host-side), not when its kernel runs
        tl.counter(rank, MEMORY_COUNTER, [0.0] + [t * _US for t in issued],
                   [memory.resident_total] + memory.curve.tolist())
    return kernels


def simulate_ranks(costed: list[CostedGraph], timer: CollectiveTimer | None = None,
                   title: str = "", cancelled: Callable[[], bool] | None = None) -> Timeline:
    """Walk every rank's ``costed`` graph (rank = its position) together and return one
    Timeline (microseconds from 0).  ``timer(ops)`` gets the ranks' twin collective ops
    and answers ``(seconds, detail)``; without one a collective takes no time."""
    tl = TimelineBuilder(title)
    walks = [_walk(c, r, tl, cancelled) for r, c in enumerate(costed)]
    kernels = [0] * len(walks)
    pending: list[tuple[CostedOp, float] | None] = []
    for r, w in enumerate(walks):
        pending.append(_advance(w, None, kernels, r))
    while any(p is not None for p in pending):
        if any(p is None for p in pending):
            done = [r for r, p in enumerate(pending) if p is None]
            raise CollectiveMismatch(f"rank(s) {done} finished while others wait in "
                               f"{next(p for p in pending if p)[0].name}: the ranks' "
                               "collectives differ")
        ops = [p[0] for p in pending]
        if len({op.name for op in ops}) > 1:
            raise CollectiveMismatch(f"ranks disagree on the next collective: "
                               f"{sorted({op.name for op in ops})}")
        seconds, detail = timer(ops) if timer is not None else (0.0, "no collective model")
        last = max(range(len(ops)), key=lambda r: pending[r][1])
        start = pending[last][1]
        end = start + seconds
        for r, w in enumerate(walks):
            arrival = pending[r][1]
            wait = start - arrival
            why = detail + (f"; waited {wait * 1e6:.1f} us for rank {last}" if wait > 0
                            else "")
            pending[r] = _advance(w, (arrival, end, why), kernels, r)
    dev = costed[0].device if costed else None
    return tl.build(device=dev.name if dev else "", kernels=sum(kernels),
                    ops=sum(len(c.ops) for c in costed), ranks=len(costed),
                    overheads=costed[0].overheads.source if costed else "")


def _advance(walk: Walk, answer, kernels: list[int], rank: int):
    """Run ``walk`` to its next collective (None when it finished)."""
    try:
        return walk.send(answer) if answer is not None else next(walk)
    except StopIteration as stop:
        kernels[rank] = stop.value or 0
        return None


def simulate_rank(costed: CostedGraph, title: str = "",
                  cancelled: Callable[[], bool] | None = None) -> Timeline:
    """Walk one rank alone (rank 0) and return its Timeline (microseconds from 0)."""
    return simulate_ranks([costed], title=title, cancelled=cancelled)
