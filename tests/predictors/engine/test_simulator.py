"""The simulator's rules on small hand-made programs (times in us)."""
import pytest

from predictors.engine.simulator import (
    ALL_STREAMS,
    Call,
    CollectiveMismatch,
    Item,
    Kernel,
    simulate,
)


def launch(stream, dur, **kw):
    """An item that launches one kernel with a 2 us call; the kernel may start 5 us in."""
    return Item("main", gap_us=1.0, calls=(Call(2.0, (Kernel(stream, dur, 5.0),)),), **kw)


def test_kernels_queue_on_their_stream_and_the_cpu_runs_ahead():
    (res,), _ = simulate([[launch(0, 100.0), launch(0, 100.0), launch(1, 10.0)]])
    # the first item starts at 0, each next one a gap after: the CPU does not wait
    assert res.item_start == [0.0, 3.0, 6.0]
    assert res.kernels == [(5.0, 105.0), (105.0, 205.0), (11.0, 21.0)]


def test_a_synchronization_holds_the_thread_until_its_stream_drains():
    sync = Item("main", gap_us=1.0, calls=(Call(3.0, sync=0),))
    every = Item("main", gap_us=1.0, calls=(Call(3.0, sync=ALL_STREAMS),))
    (res,), _ = simulate([[launch(0, 100.0), launch(1, 300.0), sync, every]])
    assert res.item_end[2] == 105.0 and res.item_end[3] == 308.0


def test_a_blocking_copy_returns_a_set_time_before_its_copy_ends():
    copy = Item("main", gap_us=1.0, calls=(Call(2.0, (Kernel(0, 50.0, 5.0),),
                                                returns_before_us=10.0),))
    (res,), _ = simulate([[launch(0, 100.0), copy]])
    assert res.kernels[1] == (105.0, 155.0) and res.item_end[1] == 145.0


def test_an_item_waits_for_the_item_of_another_thread_it_waited_for():
    main = Item("main", gap_us=1.0, t5_us=50.0)
    other = Item("autograd", gap_us=2.0, t5_us=10.0, waits_for=0)
    (res,), _ = simulate([[main, other]])
    assert res.item_start[1] == 52.0


def test_inputs_and_event_waits_delay_a_kernel():
    first = launch(0, 100.0)
    reader = Item("main", gap_us=1.0, after_items=(0,),
                  calls=(Call(2.0, (Kernel(1, 10.0, 5.0),)),))
    event = Item("main", gap_us=1.0, calls=(Call(2.0, (Kernel(2, 10.0, 5.0,
                                                                after=((7, 4.0),)),)),))
    first.calls[0].kernels[0].id = 7
    (res,), _ = simulate([[first, reader, event]])
    assert res.kernels[1][0] == 105.0  # after the kernel whose result it reads
    assert res.kernels[2][0] == 109.0  # 4 us after the event it waited for


def test_collectives_start_when_the_last_rank_arrives():
    def rank(compute):
        return [launch(0, compute), Item("main", gap_us=1.0, calls=(Call(
            2.0, (Kernel(1, 0.0, 5.0, wait_streams=(0,), collective=True),)),))]

    results, meetings = simulate([rank(100.0), rank(300.0)], lambda q, kernels: 40.0)
    # each arrives when its compute stream drains (the collective waits for it)
    assert meetings[0].last_rank == 1 and meetings[0].start_us == 305.0
    assert [r.kernels[1] for r in results] == [(105.0, 345.0), (305.0, 345.0)]
    # clocks that start apart: rank 1's 305 us are 355 us on rank 0's clock
    results, meetings = simulate([rank(100.0), rank(300.0)], lambda q, k: 40.0,
                                 offsets_us=[0.0, 50.0])
    assert meetings[0].start_us == 355.0
    assert results[0].kernels[1] == (105.0, 395.0) and results[1].kernels[1][1] == 345.0


def test_ranks_with_different_collectives_are_an_error():
    lone = [Item("main", t5_us=1.0)]
    meets = [Item("main", calls=(Call(1.0, (Kernel(1, collective=True),)),))]
    with pytest.raises(CollectiveMismatch, match="collectives differ"):
        simulate([lone, meets])


def test_the_critical_path_follows_what_bound_each_start():
    """Rank 0 waits in the collective for rank 1, whose long kernel sets the step: the
    path runs from rank 0's last item back through the collective to rank 1's kernel
    and the item that launched it."""
    from predictors.engine.simulator import critical_path

    def rank(compute):
        return [launch(0, compute), Item("main", gap_us=1.0, calls=(Call(
            2.0, (Kernel(1, 0.0, 5.0, wait_streams=(0,), collective=True),)),)),
            Item("main", gap_us=1.0, calls=(Call(3.0, sync=1),))]

    results, meetings = simulate([rank(100.0), rank(300.0)], lambda q, kernels: 40.0)
    path = critical_path(results, meetings)
    assert path == [(0, "item", 2),      # rank 0's sync, held by its collective
                    (0, "kernel", 1),    # which waited for the last rank
                    (1, "kernel", 1),    # rank 1's collective: after its compute stream
                    (1, "kernel", 0),    # the 300 us kernel
                    (1, "item", 0)]      # launched by the first item


def _random_ranks(rng, ranks=3, n=40):
    """Random programs over two threads and three streams, with every kind of rule, and
    one collective per rank every ten items."""
    import numpy as np  # noqa: F401
    programs = []
    for _ in range(ranks):
        items = []
        for i in range(n):
            thread = rng.choice(["main", "autograd"])
            calls = []
            if i % 10 == 5:
                calls.append(Call(rng.uniform(1, 5), (Kernel("comm", 0.0, rng.uniform(0, 5),
                                                             wait_streams=(0,),
                                                             collective=True),)))
            else:
                for _ in range(rng.randrange(0, 3)):
                    kernels = tuple(Kernel(rng.randrange(2), rng.uniform(0, 50),
                                           rng.uniform(0, 8), id=rng.randrange(1000),
                                           after=((rng.randrange(1000), 2.0),))
                                    for _ in range(rng.randrange(0, 2)))
                    kind = rng.random()
                    calls.append(Call(rng.uniform(0.5, 4), kernels,
                                      sync=(0 if kind < 0.1 else ALL_STREAMS if kind < 0.2
                                            else None),
                                      returns_before_us=(1.0 if 0.2 <= kind < 0.3
                                                         else None)))
            items.append(Item(thread, rng.uniform(0, 3), rng.uniform(0, 2), rng.uniform(0, 2),
                              rng.uniform(0, 2), tuple(calls),
                              waits_for=i - 1 if i and rng.random() < 0.3 else -1,
                              after_items=tuple(rng.sample(range(i), min(i, 2))),
                              done_waits_inputs=rng.random() < 0.5))
        programs.append(items)
    return programs


def test_a_batch_walk_gives_each_set_the_times_of_its_own_walk():
    """simulate_batch on arrays of durations equals simulate on each set alone, absent
    items included (a set without them is the program without them)."""
    import copy
    import random

    import numpy as np

    from predictors.engine.simulator import simulate_batch

    rng = random.Random(3)
    base = _random_ranks(rng)
    sets = 4
    scale = np.array([1.0, 0.5, 2.0, 1.3])
    absent_n = [n for n, it in enumerate(base[0])
                if not any(k.collective for c in it.calls for k in c.kernels)][3::7]
    absent = [{n: np.array([False, True, False, True]) for n in absent_n}, {}, {}]

    def with_durations(items, f, rank, gone):
        out = []
        for n, it in enumerate(items):
            it = copy.deepcopy(it)
            if rank == 0 and n in gone:  # absent: no time, no kernels
                it.gap_us = it.t2_us = it.t3_us = it.t5_us = 0.0
                it.calls = tuple(Call(0.0, ()) for _ in it.calls)
            for c in it.calls:
                for k in c.kernels:
                    k.dur_us = k.dur_us * f
            out.append(it)
        return out

    def batch_items(items, rank):
        out = []
        for n, it in enumerate(items):
            it = copy.deepcopy(it)
            if rank == 0 and n in absent_n:
                keep = ~absent[0][n]
                it.gap_us, it.t2_us = it.gap_us * keep, it.t2_us * keep
                it.t3_us, it.t5_us = it.t3_us * keep, it.t5_us * keep
                for c in it.calls:
                    c.dur_us = c.dur_us * keep
            for c in it.calls:
                for k in c.kernels:
                    k.dur_us = k.dur_us * scale
            out.append(it)
        return out

    def collective_time(q, kernels):
        return 10.0 + q

    batch = simulate_batch([batch_items(items, r) for r, items in enumerate(base)],
                           lambda q, k: 10.0 + q, absent)
    for i in range(sets):
        gone = set(absent_n) if absent[0][absent_n[0]][i] else set()
        alone, _ = simulate([with_durations(items, scale[i], r, gone)
                             for r, items in enumerate(base)], collective_time)
        for r in range(len(base)):
            ends = [float(np.broadcast_to(e, (sets,))[i]) for e in batch[r].item_end]
            assert ends == pytest.approx(alone[r].item_end, abs=1e-9)
            kept = [float(np.broadcast_to(t, (sets,))[i]) for k in batch[r].kernels for t in k]
            if not gone or r:  # (a set without the absent items has fewer kernels)
                assert kept == pytest.approx([t for k in alone[r].kernels for t in k],
                                             abs=1e-9)
