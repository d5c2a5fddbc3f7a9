"""The simulator: one discrete-event walk of a training step, for predicted and recorded
steps alike.

Prediction (:mod:`.simulate`) feeds it the captured graph with modeled durations; replay
(:mod:`predictors.traces.replay`) feeds it a recording with its recorded durations.  The
rules live here only.

**Resources.**  Each rank has CPU *threads* and device *streams*, named by any hashable
key.  A thread runs one item at a time; a stream runs its kernels in the order they are
queued.

**Tasks.**
- An :class:`Item` is a top-level CPU op on a thread.  It starts a gap (T1) after its
  thread's previous item ends, or after the item it waits for on another thread ends
  (``waits_for``), whichever is later; an item with neither starts at ``start_at``.  It
  then spends ``t2`` before its first runtime call, ``t5`` between calls, and ``t3``
  after the last (an item with no calls lasts ``t5``).
- A :class:`Call` is a runtime call inside an item (a kernel launch, a copy, a
  synchronization).  It lasts ``dur_us``; a synchronizing call also holds the thread until
  its stream (or every stream) drains; a copy through pageable memory holds it until its
  own kernels end (or a set time before: the last staged chunk still in flight).
- A :class:`Kernel` is device work that a call queues on a stream.  It starts at
  ``max(call start + delay, stream free, its dependencies)``, and runs ``dur_us``.

**Dependencies.**  A kernel waits for the items whose results its item reads
(``Item.after_items``: an item is done when its last kernel ends, or when its CPU part
ends), for other kernels
(``after``: a kernel's end plus a lag, as an event wait shows in a recording), and for
whatever is queued on other streams when it is issued (``wait_streams``).  Dependencies on
work not yet walked are ignored (the walk is in issue order).

**Collectives.**  A kernel with ``collective=True`` is the rank's next collective.  Every
rank issues the same collectives in the same order; the ranks are walked together, one
collective at a time.  A collective starts when the last rank gets there and runs for the
time that ``collective_time(q, kernels)`` answers; an early rank's kernel waits for its
peers, as NCCL's kernels do in a profiler trace.

Times are microseconds on each rank's own clock; ``offsets_us`` place the ranks' clocks
on one axis (a recording's files start at different times).

**Batches.**  :func:`simulate_batch` walks the same programs under many sets of durations
at once (a search over plans): any duration may be an array with one value per set, and
an item may be absent from some sets (it takes no time and launches nothing there).  It
applies the rules above to arrays and answers the times only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce
from math import inf
from typing import Callable, Hashable, Sequence

import numpy as np

from ..utils.progress import check_cancelled

__all__ = ["Kernel", "Call", "Item", "RankResult", "Rendezvous", "simulate", "critical_path",
           "simulate_batch", "BatchResult", "ALL_STREAMS", "CollectiveMismatch"]

ALL_STREAMS = "*"  # Call.sync: wait for every stream of the rank to drain


class CollectiveMismatch(Exception):
    """The ranks issue different collectives."""


@dataclass(slots=True)
class Kernel:
    """Device work a call queues on ``stream``."""

    stream: Hashable
    dur_us: float = 0.0
    delay_us: float = 0.0           # from the call's start to when the stream may run it
    after: tuple = ()               # ((kernel id, lag us), ...)
    wait_streams: tuple = ()        # streams whose queued work it waits for
    collective: bool = False
    id: int = -1                    # for ``after`` references (-1: none refer to it)
    payload: object = None          # the caller's (the op, the event index)


@dataclass(slots=True)
class Call:
    """A runtime call inside an item."""

    dur_us: float
    kernels: tuple = ()
    sync: Hashable | None = None    # a stream, or ALL_STREAMS, that it waits to drain
    returns_before_us: float | None = None  # waits for its kernels: returns this long
                                            # before they end (None: does not wait)
    payload: object = None


@dataclass(slots=True)
class Item:
    """A top-level CPU op on ``thread``."""

    thread: Hashable
    gap_us: float = 0.0
    t2_us: float = 0.0
    t5_us: float = 0.0
    t3_us: float = 0.0
    calls: tuple = ()
    waits_for: int = -1             # an item (index) of another thread it starts after
    start_at: float = 0.0           # start when nothing came before it
    after_items: tuple = ()         # items whose results its kernels read
    done_waits_inputs: bool = False  # with no kernels, done only when after_items are
    payload: object = None


@dataclass
class RankResult:
    """When everything of one rank ran (its own clock)."""

    item_start: list[float] = field(default_factory=list)
    item_end: list[float] = field(default_factory=list)
    calls: list[tuple[float, float]] = field(default_factory=list)    # per call, walk order
    kernels: list[tuple[float, float]] = field(default_factory=list)  # per kernel, walk order
    # What bound each time, as ("item", index), ("kernel", index) or ("collective", kernel
    # index: it waited for the last rank), None for a start nothing delayed:
    item_after: list = field(default_factory=list)    # an item's start
    item_held: list = field(default_factory=list)     # an item's end, when a kernel held it
    kernel_after: list = field(default_factory=list)  # a kernel's start
    collectives: list[int] = field(default_factory=list)  # kernel index of each, in order


def _walk(items: Sequence[Item], res: RankResult, cancelled):
    """One rank in issue order; at each collective it yields ``(arrival, kernel)`` and gets
    back the kernel's ``(start, end, waited)`` (its kernel starts on arrival and ends with
    the collective; ``waited``: another rank arrived later).  Beside the times it records what bound each
    start and end (``RankResult.item_after``, ``item_held``, ``kernel_after``)."""
    clock: dict = {}     # thread -> (end of its last item, that item)
    free: dict = {}      # stream -> (end of its last kernel, that kernel)
    kend: dict = {}      # kernel id -> (end, kernel index)
    done: list[float] = []
    done_ref: list = []  # per item: what its result waited for last
    starts, ends = res.item_start, res.item_end
    for n, it in enumerate(items):
        if n % 2000 == 0:
            check_cancelled(cancelled, "simulating")
        mine = clock.get(it.thread)
        w = it.waits_for
        waited = ends[w] if 0 <= w < n else None
        if mine is None and waited is None:
            start, after = it.start_at, None
        elif waited is None or (mine is not None and mine[0] >= waited):
            start, after = mine[0] + it.gap_us, ("item", mine[1])
        else:
            start, after = waited + it.gap_us, ("item", w)
        ready, ready_ref = -inf, None
        for d in it.after_items:
            if d < n and done[d] > ready:
                ready, ready_ref = done[d], done_ref[d]
        last_kernel = held = None
        if not it.calls:
            end = start + it.t5_us
        else:
            tc = start + it.t2_us
            for j, call in enumerate(it.calls):
                if j:
                    tc += it.t5_us
                copied, copied_ref = tc, None
                for k in call.kernels:
                    s, why = tc + k.delay_us, ("item", n)
                    f = free.get(k.stream)
                    if f is not None and f[0] > s:
                        s, why = f[0], ("kernel", f[1])
                    if ready > s:
                        s, why = ready, ready_ref
                    for st in k.wait_streams:
                        f = free.get(st)
                        if f is not None and f[0] > s:
                            s, why = f[0], ("kernel", f[1])
                    for kid, lag in k.after:
                        e = kend.get(kid)
                        if e is not None and e[0] + lag > s:
                            s, why = e[0] + lag, ("kernel", e[1])
                    index = len(res.kernels)
                    if k.collective:
                        res.collectives.append(index)
                        s, e, waited = yield s, k
                        if waited:  # for the last rank to arrive
                            why = ("collective", index)
                    else:
                        e = s + k.dur_us
                    free[k.stream] = (e, index)
                    if k.id >= 0:
                        kend[k.id] = (e, index)
                    res.kernels.append((s, e))
                    res.kernel_after.append(why)
                    last_kernel = (e, index)
                    if e > copied:
                        copied, copied_ref = e, index
                end_call = tc + call.dur_us
                if call.sync is not None:
                    f = (max(free.values(), default=None) if call.sync == ALL_STREAMS
                         else free.get(call.sync))
                    if f is not None and f[0] > end_call:
                        end_call, held = f[0], ("kernel", f[1])
                elif (call.returns_before_us is not None
                      and copied - call.returns_before_us > end_call):
                    end_call, held = copied - call.returns_before_us, ("kernel", copied_ref)
                res.calls.append((tc, end_call))
                tc = end_call
            end = tc + it.t3_us
        starts.append(start)
        ends.append(end)
        res.item_after.append(after)
        res.item_held.append(held)
        clock[it.thread] = (end, n)
        if last_kernel is not None:
            done.append(last_kernel[0])
            done_ref.append(("kernel", last_kernel[1]))
        elif it.done_waits_inputs and ready > end:
            done.append(ready)
            done_ref.append(ready_ref)
        else:
            done.append(end)
            done_ref.append(("item", n))


@dataclass(frozen=True)
class Rendezvous:
    """One collective on the common clock: when the last rank got there, which one, and
    how long it ran."""

    start_us: float
    dur_us: float
    last_rank: int


def simulate(ranks: Sequence[Sequence[Item]],
             collective_time: Callable[[int, list[Kernel]], float] | None = None,
             offsets_us: Sequence[float] | None = None,
             cancelled: Callable[[], bool] | None = None
             ) -> tuple[list[RankResult], list[Rendezvous]]:
    """Walk every rank's items together.  ``collective_time(q, kernels)`` answers the
    duration (us) of the q-th collective, given each rank's kernel (None: no time)."""
    offsets = list(offsets_us) if offsets_us is not None else [0.0] * len(ranks)
    results = [RankResult() for _ in ranks]
    walks = [_walk(items, res, cancelled) for items, res in zip(ranks, results)]
    meetings: list[Rendezvous] = []

    def meet(q: int, pending: list) -> list:
        dur = (collective_time(q, [p[1] for p in pending]) if collective_time is not None
               else 0.0)
        last = max(range(len(pending)), key=lambda r: pending[r][0] + offsets[r])
        start = pending[last][0] + offsets[last]
        meetings.append(Rendezvous(start, dur, last))
        return [(p[0], start + dur - off, start - off > p[0])
                for p, off in zip(pending, offsets)]

    _walk_together(walks, meet)
    return results, meetings


def _walk_together(walks: list, meet: Callable[[int, list], list]) -> None:
    """Run the ranks' walks collective by collective: each stops at its next collective
    with ``(arrival, kernel)``; ``meet(q, pending)`` answers every rank's reply to the
    q-th.  Ranks that run out of items while others wait have different collectives."""
    def advance(walk, answer):
        try:
            return walk.send(answer) if answer is not None else next(walk)
        except StopIteration:
            return None

    pending = [advance(w, None) for w in walks]
    q = 0
    while any(p is not None for p in pending):
        if any(p is None for p in pending):
            done = [r for r, p in enumerate(pending) if p is None]
            raise CollectiveMismatch(f"rank(s) {done} finished while others wait in "
                                     f"collective {q}: the ranks' collectives differ")
        pending = [advance(w, a) for w, a in zip(walks, meet(q, pending))]
        q += 1


@dataclass
class BatchResult:
    """One rank's times under every set of a batch: arrays of one value per set."""

    item_start: list = field(default_factory=list)
    item_end: list = field(default_factory=list)
    kernels: list = field(default_factory=list)   # (start, end) per kernel, walk order


def _walk_batch(items: Sequence[Item], absent: dict, res: BatchResult, cancelled):
    """:func:`_walk`'s rules on arrays (one value per set of durations), times only.
    ``absent[n]``: where item ``n`` does not run (True), it takes no time (its durations
    must be 0 there) and its kernels leave their streams as they were."""
    clock: dict = {}     # thread -> end of its last item
    free: dict = {}      # stream -> end of its last kernel
    kend: dict = {}      # kernel id -> end
    done: list = []
    starts, ends = res.item_start, res.item_end
    for n, it in enumerate(items):
        if n % 2000 == 0:
            check_cancelled(cancelled, "simulating")
        skip = absent.get(n)
        mine = clock.get(it.thread)
        w = it.waits_for
        waited = ends[w] if 0 <= w < n else None
        if mine is None and waited is None:
            start = it.start_at
        elif waited is None:
            start = mine + it.gap_us
        elif mine is None:
            start = waited + it.gap_us
        else:
            start = np.maximum(mine, waited) + it.gap_us
        ready = None
        for d in it.after_items:
            if d < n:
                ready = done[d] if ready is None else np.maximum(ready, done[d])
        last_kernel = None
        if not it.calls:
            end = start + it.t5_us
        else:
            tc = start + it.t2_us
            for j, call in enumerate(it.calls):
                if j:
                    tc = tc + it.t5_us
                copied = tc
                for k in call.kernels:
                    s = tc + k.delay_us
                    before = free.get(k.stream)
                    for t in ((before, ready) + tuple(free.get(st) for st in k.wait_streams)
                              + tuple(kend.get(kid) + lag if kid in kend else None
                                      for kid, lag in k.after)):
                        if t is not None:
                            s = np.maximum(s, t)
                    if k.collective:
                        if skip is not None:
                            raise ValueError("a collective cannot be absent from a batch")
                        s, e = yield s, k
                    else:
                        e = s + k.dur_us
                    if skip is not None:  # an absent kernel leaves its stream as it was
                        e = np.where(skip, -np.inf if before is None else before, e)
                    free[k.stream] = e
                    if k.id >= 0:
                        kend[k.id] = e
                    res.kernels.append((s, e))
                    last_kernel = e
                    copied = np.maximum(copied, e)
                end_call = tc + call.dur_us
                if call.sync is not None:
                    f = (reduce(np.maximum, free.values(), None if not free else -np.inf)
                         if call.sync == ALL_STREAMS else free.get(call.sync))
                    if f is not None:
                        end_call = np.maximum(end_call, f)
                elif call.returns_before_us is not None:
                    end_call = np.maximum(end_call, copied - call.returns_before_us)
                tc = end_call
            end = tc + it.t3_us
        starts.append(start)
        ends.append(end)
        clock[it.thread] = end
        if last_kernel is not None:
            done.append(last_kernel if skip is None else np.where(skip, end, last_kernel))
        elif it.done_waits_inputs and ready is not None:
            done.append(np.maximum(end, ready) if skip is None
                        else np.where(skip, end, np.maximum(end, ready)))
        else:
            done.append(end)


def simulate_batch(ranks: Sequence[Sequence[Item]],
                   collective_time: Callable[[int, list[Kernel]], object] | None = None,
                   absent: Sequence[dict] | None = None,
                   cancelled: Callable[[], bool] | None = None) -> list[BatchResult]:
    """:func:`simulate` for a batch of duration sets: the items' durations may be arrays of
    one value per set, ``absent[rank][n]`` marks (True) the sets in which item ``n`` of
    ``rank`` does not run, and ``collective_time(q, kernels)`` may answer an array.  Every
    rank's times, arrays of one value per set."""
    results = [BatchResult() for _ in ranks]
    absent = list(absent) if absent is not None else [{} for _ in ranks]
    walks = [_walk_batch(items, a, res, cancelled)
             for items, a, res in zip(ranks, absent, results)]

    def meet(q: int, pending: list) -> list:
        dur = (collective_time(q, [p[1] for p in pending]) if collective_time is not None
               else 0.0)
        start = reduce(np.maximum, (p[0] for p in pending))
        return [(p[0], start + dur) for p in pending]

    _walk_together(walks, meet)
    return results


def critical_path(results: Sequence[RankResult], meetings: Sequence[Rendezvous],
                  offsets_us: Sequence[float] | None = None) -> list[tuple[int, str, int]]:
    """The chain of items and kernels that sets the step, last first: from the event that
    ends last (on the common clock), each step goes to what bound it: the kernel that held
    an item's end, else what delayed its start; for a kernel, what delayed its start, and
    for a collective that waited, the last rank's arrival.  ``(rank, "item" | "kernel",
    index)`` each."""
    offsets = list(offsets_us) if offsets_us is not None else [0.0] * len(results)
    best = None
    for r, res in enumerate(results):
        for n, e in enumerate(res.item_end):
            if best is None or e + offsets[r] > best[0]:
                best = (e + offsets[r], r, "item", n)
        for i, (_, e) in enumerate(res.kernels):
            if e + offsets[r] > best[0]:
                best = (e + offsets[r], r, "kernel", i)
    if best is None:
        return []
    _, rank, kind, index = best
    path, seen = [], set()
    while (rank, kind, index) not in seen:
        seen.add((rank, kind, index))
        path.append((rank, kind, index))
        res = results[rank]
        if kind == "item":
            ref = res.item_held[index] or res.item_after[index]
        else:
            ref = res.kernel_after[index]
        if ref is None:
            break
        if ref[0] == "collective":
            q = res.collectives.index(ref[1])
            rank = meetings[q].last_rank
            kind, index = "kernel", results[rank].collectives[q]
            if (rank, kind, index) in seen:  # this rank was the last one: go on from it
                ref = results[rank].kernel_after[index]
                if ref is None or ref[0] == "collective":
                    break
                kind, index = ref
        else:
            kind, index = ref
    return path
