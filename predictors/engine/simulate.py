"""A predicted training step through the simulator: every rank's costed graph becomes
CPU items, runtime calls and kernels (:mod:`.simulator`), and their times a Timeline.

Each rank's ops run in issue order, the order the real threads issue them: the main
thread runs forward and the optimizer and blocks in ``backward()`` while the autograd
thread issues the backward ops (one clock: each op starts after the one before it; on the
CPU device the main thread runs the backward itself, one lane).  On a GPU an op is a
launch call (T2 before it, T4 long, T3 after) whose kernel may start T4 plus the launch
latency after the call begins; on the CPU device the kernel runs inline on the issuing
thread, as design.md requires.

A collective goes on the rank's communication stream, after the compute queued before it
(ProcessGroupNCCL makes its stream wait), and the simulator's rendezvous times it: its
kernel ends a collective-model duration after the *last* rank got there.  When the timer
knows the platform's links (``timer.link_loads``), each link a collective crosses gets a
bar over the collective's run on its lane of the links group (:data:`LINKS_RANK`), with the
bytes it carries and its utilisation.
"""
from __future__ import annotations

import weakref
from typing import Callable

from ..costs.op_costs import CostedGraph, CostedOp
from ..model.comm_ops import COLLECTIVE_OPS, HOST_WAITS, INPUT_DIST_OPS, PROFILER_NAMES
from ..model.input_pipeline import DIST_BLOCK, SIDE_STREAMS
from ..utils.formatting import format_bytes
from .simulator import Call, CollectiveMismatch, Item, Kernel, critical_path, simulate
from .timeline import LINKS_RANK, Timeline, TimelineBuilder

__all__ = ["simulate_rank", "simulate_ranks", "rank_spans_ms", "CollectiveTimer",
           "CollectiveMismatch"]

_US = 1e6
MEMORY_COUNTER = "memory allocated"
COMPUTE, COMM = "compute", "communication"
SIDE_LANES = {name: f"stream {2 + i} ({name})" for i, name in enumerate(sorted(SIDE_STREAMS))}

CollectiveTimer = Callable[[list[CostedOp]], tuple[float, str]]


def rank_items(costed: CostedGraph) -> list[Item]:
    """The simulator's items for one rank: the training loop's own time, then one item per
    op (each after the one before it: one clock)."""
    dev, oh = costed.device, costed.overheads
    on_gpu = dev.kind != "cpu"
    lat = dev.launch_latency_s * _US
    items = [Item("main", t5_us=oh.step_s * _US, start_at=0.0)]
    at = {}  # op index -> item position
    in_flight = set()  # a CPU rank's all-reduces, which its thread does not wait for
    for op in costed.ops:
        o = op.overheads
        n = len(items)
        deps = tuple(at[d] for d in op.deps if d in at)
        thread = op.thread if on_gpu else "main"
        gap = (o.t1 + (oh.autograd_t1 if op.thread == "autograd" else 0.0)) * _US
        if op.category == "communication":
            # ProcessGroupNCCL's stream waits for the issuing stream: the input
            # distribution's, or the compute stream
            behind = (() if not on_gpu else (DIST_BLOCK,) if op.name in INPUT_DIST_OPS
                      else (COMPUTE,))
            k = Kernel(COMM, delay_us=(o.t4 * _US) + lat, wait_streams=behind,
                       collective=True, payload=op)
            # on a CPU rank the calling thread waits for a collective (gloo) to end, except
            # for DDP's all-reduces: gloo's threads reduce them while backward goes on;
            # on a GPU it waits for those whose result it reads (HOST_WAITS)
            blocking = (op.name in HOST_WAITS
                        or (not on_gpu and COLLECTIVE_OPS[op.name] != "all_reduce"))
            if not on_gpu and not blocking:
                in_flight.add(op.index)
            call = Call(o.t4 * _US, (k,), returns_before_us=0.0 if blocking else None)
            item = Item(thread, gap, o.t2 * _US, 0.0, o.t3 * _US, (call,),
                        waits_for=n - 1, after_items=deps, payload=op)
        elif op.kernel_s <= 0.0:
            item = Item(thread, gap, t5_us=o.t5 * _US, waits_for=n - 1,
                        done_waits_inputs=on_gpu, after_items=deps, payload=op)
            if in_flight.intersection(op.deps):   # a view of an all-reduce's buffer
                in_flight.add(op.index)
        elif on_gpu:
            # the TorchRec pipeline's copy and input distribution have streams of their own
            k = Kernel(op.block if op.block in SIDE_STREAMS else COMPUTE, op.kernel_s * _US,
                       (o.t4 * _US) + lat, payload=op)
            item = Item(thread, gap, o.t2 * _US, 0.0, o.t3 * _US, (Call(o.t4 * _US, (k,)),),
                        waits_for=n - 1, after_items=deps, payload=op)
        else:
            calls = (Call(op.kernel_s * _US),)
            if in_flight.intersection(op.deps):   # it reads an all-reduce's result
                calls = (Call(0.0, sync=COMM),) + calls
            item = Item(thread, gap, o.t2 * _US, 0.0, o.t3 * _US, calls, waits_for=n - 1,
                        payload=op)
        at[op.index] = n
        items.append(item)
    return items


def _items(costed: CostedGraph) -> list[Item]:
    """The graph's items, built once per costed graph (a search simulates one graph under
    many plans)."""
    hit = _ITEMS.get(id(costed))
    if hit is None or hit[0]() is not costed:
        hit = _ITEMS[id(costed)] = (weakref.ref(costed, lambda _, k=id(costed):
                                                _ITEMS.pop(k, None)), rank_items(costed))
    return hit[1]


_ITEMS: dict[int, tuple[weakref.ref, list[Item]]] = {}


def _run(costed: list[CostedGraph], timer: CollectiveTimer | None, cancelled,
         collectives: list | None = None, starts_us=None):
    """``(programs, results, meetings, details)`` of every rank walked together, each
    starting at ``starts_us`` (default: together); ``collectives`` gets each meeting's ops
    (one per rank)."""
    programs = [_items(c) for c in costed]
    # When every rank runs the same graph (data parallel) from the same start, the ranks
    # arrive at every collective together, so one walk times them all.
    alike = (len(costed) > 1 and all(c is costed[0] for c in costed)
             and not any(starts_us or ()))
    walked = programs[:1] if alike else programs
    details: list[str] = []

    def collective_time(q: int, kernels: list[Kernel]) -> float:
        ops = [k.payload for k in kernels] * (len(costed) if alike else 1)
        if len({op.name for op in ops}) > 1:
            raise CollectiveMismatch(f"ranks disagree on the next collective: "
                                     f"{sorted({op.name for op in ops})}")
        seconds, detail = timer(ops) if timer is not None else (0.0, "no collective model")
        details.append(detail)
        if collectives is not None:
            collectives.append(ops)
        return seconds * _US

    results, meetings = simulate(walked, collective_time, starts_us if not alike else None,
                                 cancelled=cancelled)
    if alike:
        results = results * len(costed)
    return programs, results, meetings, details


def simulate_ranks(costed: list[CostedGraph], timer: CollectiveTimer | None = None,
                   title: str = "", cancelled: Callable[[], bool] | None = None,
                   starts_us=None) -> Timeline:
    """Simulate every rank's ``costed`` graph (rank = its position) together and return
    one Timeline (microseconds from the first rank's start).  ``timer(ops)`` gets the
    ranks' twin collective ops and answers ``(seconds, detail)``; without one a
    collective takes no time.
    ``starts_us``: when each rank starts its step (a late rank; default: together); a
    rank's iteration runs from its own start."""
    starts = list(starts_us) if starts_us is not None else [0.0] * len(costed)
    collectives: list = []
    programs, results, meetings, details = _run(costed, timer, cancelled, collectives,
                                                starts)
    path = critical_path(results, meetings, starts)
    tl = TimelineBuilder(title)
    kernels, bars = 0, {}
    for rank, (c, items, res) in enumerate(zip(costed, programs, results)):
        wanted = {(kind, i) for r, kind, i in path if r == rank}
        kernels += _draw(tl, rank, c, items, res, meetings, details, wanted, bars,
                         starts[rank])
    loads_of = getattr(timer, "link_loads", None)
    if loads_of is not None and len(costed) > 1:
        _draw_links(tl, meetings, [loads_of(ops) for ops in collectives],
                    [PROFILER_NAMES.get(ops[0].name, ops[0].name) for ops in collectives])
    dev = costed[0].device if costed else None
    out = tl.build(device=dev.name if dev else "", kernels=kernels,
                   ops=sum(len(c.ops) for c in costed), ranks=len(costed),
                   overheads=costed[0].overheads.source if costed else "",
                   critical_path=sorted(bars[e] for e in path if e in bars))
    _shift_ranks(out, starts)
    return out


def _shift_ranks(tl: Timeline, starts_us) -> None:
    """Move each rank's bars and counters from its own clock onto the Timeline's (the
    links' bars are on it already: a collective's rendezvous is)."""
    for lane, info in enumerate(tl.lanes):
        if info.rank == LINKS_RANK or not starts_us[info.rank]:
            continue
        tl.start_us[tl.lane == lane] += starts_us[info.rank]
        if lane in tl.counters:
            t, v = tl.counters[lane]
            tl.counters[lane] = (t + starts_us[info.rank], v)


def rank_spans_ms(costed: list[CostedGraph], timer: CollectiveTimer | None = None,
                  cancelled: Callable[[], bool] | None = None) -> list[float]:
    """Each rank's iteration (ms), as :func:`simulate_ranks`' Timeline spans it, without
    drawing the Timeline: what a search over plans needs."""
    _, results, _, _ = _run(costed, timer, cancelled)
    out = []
    for c, res in zip(costed, results):
        # the training loop's bar is drawn only when it lasts
        first = 0 if c.overheads.step_s > 0 else 1
        starts = res.item_start[first:] + [s for s, _ in res.kernels]
        ends = res.item_end[first:] + [e for _, e in res.kernels]
        out.append((max(ends) - min(starts)) / 1e3 if starts else 0.0)
    return out


def _draw(tl: TimelineBuilder, rank: int, costed: CostedGraph, items: list[Item], res,
          meetings, details, wanted: set, bars: dict, start_us: float = 0.0) -> int:
    """One rank's bars (on its own clock, which starts at ``start_us``) and its memory
    curve; the number of kernels it ran.  ``bars`` gets the bar drawn for each
    ``("item" | "kernel", index)`` of ``wanted``, keyed ``(rank, kind, index)``."""
    items_wanted = {i for kind, i in wanted if kind == "item"}
    kernels_wanted = {i for kind, i in wanted if kind == "kernel"}
    on_gpu = costed.device.kind != "cpu"
    main = tl.lane(rank, "cpu", "CPU main thread")
    cpu_lanes = {"main": main,
                 "autograd": tl.lane(rank, "cpu", "CPU autograd thread") if on_gpu else main}
    stream = tl.lane(rank, "stream", "stream 0 (compute)") if on_gpu else None
    comm = None
    if any(op.category == "communication" for op in costed.ops):   # before the side streams
        comm = tl.lane(rank, "stream", "stream 1 (communication)")
    if costed.overheads.step_s > 0:   # drawn whenever it lasts, as rank_spans_ms counts it
        if 0 in items_wanted:
            bars[(rank, "item", 0)] = len(tl)
        tl.add(main, 0.0, res.item_end[0], "cpu_overhead", "training loop",
               "per-iteration CPU time outside aten ops (measured)")
    kernels, k, q = 0, 0, 0
    for n in range(1, len(items)):
        op: CostedOp = items[n].payload
        start, end = res.item_start[n], res.item_end[n]
        lane = cpu_lanes[op.thread]
        if n in items_wanted:
            bars[(rank, "item", n)] = len(tl)
        if k in kernels_wanted and (op.category == "communication"
                                    or (on_gpu and op.kernel_s > 0.0)):
            bars[(rank, "kernel", k)] = len(tl) + 1  # drawn right after its CPU bar
        if op.category == "communication":
            name = PROFILER_NAMES.get(op.name, op.name)
            tl.add(lane, start, end - start, "cpu_op", name, f"{op.phase}: {op.detail}")
            k_start, k_end = res.kernels[k]
            meet = meetings[q]
            wait = meet.start_us - (k_start + start_us)
            why = details[q] + (f"; waited {wait:.1f} us for rank {meet.last_rank}"
                                if wait > 0 else "")
            tl.add(comm, k_start, k_end - k_start, "communication", name,
                   f"{op.phase}: {op.detail} | {why}")
            k, q, kernels = k + 1, q + 1, kernels + 1
        elif op.kernel_s <= 0.0:
            tl.add(lane, start, end - start, "view", op.name, op.detail)
        elif on_gpu:
            tl.add(lane, start, end - start, "cpu_op", op.name, op.detail)
            k_start, k_end = res.kernels[k]
            on = stream
            if op.block in SIDE_STREAMS:   # numbered after the communication stream
                on = tl.lane(rank, "stream", SIDE_LANES[op.block])
            tl.add(on, k_start, k_end - k_start, op.category, op.name,
                   f"{op.detail} | {op.model}")
            k, kernels = k + 1, kernels + 1
        else:
            tl.add(lane, start, end - start, op.category, op.name, f"{op.detail} | {op.model}")
            kernels += 1
    memory = costed.memory
    if memory is not None and len(memory.curve) == len(items) - 1:
        # allocations happen when the CPU calls the op (the caching allocator is
        # host-side), not when its kernel runs
        tl.counter(rank, MEMORY_COUNTER, [0.0] + res.item_start[1:],
                   [memory.resident_total] + memory.curve.tolist())
    return kernels


def _draw_links(tl: TimelineBuilder, meetings, loads: list, names: list[str]) -> None:
    """One lane per link that some collective crosses (in the network's order) and a bar
    per collective on it: the bytes it carries and its utilisation, ``bytes / (duration x
    link bandwidth)``.  ``loads``: per meeting, ``(what ran, [(link, bytes), ...])``."""
    used = sorted({link for _, per in loads for link, _ in per}, key=lambda link: link.order)
    lanes = {link: tl.lane(LINKS_RANK, "link", link.name) for link in used}
    for meet, (how, per), name in zip(meetings, loads, names):
        if meet.dur_us <= 0:
            continue
        for link, nbytes in per:
            busy = nbytes / (meet.dur_us * 1e-6 * link.bw) if link.bw > 0 else 0.0
            tl.add(lanes[link], meet.start_us, meet.dur_us, "communication", name,
                   f"{format_bytes(nbytes)} over {link.name}, {busy:.1%} of its "
                   f"{link.bw / 1e9:,.0f} GB/s each way ({link.kind}) | {how}")


def simulate_rank(costed: CostedGraph, title: str = "",
                  cancelled: Callable[[], bool] | None = None) -> Timeline:
    """Walk one rank alone (rank 0) and return its Timeline (microseconds from 0)."""
    return simulate_ranks([costed], title=title, cancelled=cancelled)
