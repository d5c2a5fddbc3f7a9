"""Real multi-process runs on this host: ranks of ``local-cpu`` joined by gloo.

:func:`measure_plans` trains a scenario's sharded DLRM in ``ranks`` processes of the
platform's threads each, as the predictor models it: each rank looks up its own tables
for the global batch and its block of the row-wise ones, exchanges the pooled
embeddings (an all-to-all; for row-wise tables a reduce-scatter), runs the dense part on
its share of the batch, and all-reduces the dense gradients in DDP's buckets
(:class:`~predictors.model.comm_ops.GradientBuckets`) during backward.  Several plans are
measured in interleaved rounds, so that a slow minute of the host is shared among them.

:func:`measure_collectives` times gloo's collectives against message size, the
measurements behind the predictor's model of CPU collectives.
"""
from __future__ import annotations

import copy
import json
import math
import os
import statistics
import tempfile
import time
from datetime import timedelta

import torch

__all__ = ["measure_plans", "measure_collectives", "COLLECTIVE_SIZES"]

COLLECTIVE_SIZES = [2 ** k for k in range(10, 25)]   # 1 KiB .. 16 MiB
TIMEOUT = timedelta(seconds=300)


def measure_plans(doc: dict, plans: list[dict], iters: int = 10, warmup: int = 3,
                  rounds: int = 3, seed: int = 0, trace: str | None = None) -> list[dict]:
    """Each plan's step (``plans``: assignments, table key -> rank, ``"rw"``, ``"dp"``
    or a :class:`~predictors.model.sharding.ColumnWise`) measured for real on the
    scenario's ``local-cpu`` ranks.  Per plan: ``iteration_ms`` (the
    median over rounds of the slowest rank's median step), ``rounds_ms`` and
    ``per_rank_ms`` (each rank's median step over all rounds), ``exchange_ms`` (per kind
    of exchange, each rank's median wall time in it a step, waiting for its peers
    included; ``all_reduce_wait``: DDP's all-reduces waited for when backward ends).
    ``trace``: after the
    last round, each rank records one more step of each plan with torch.profiler, to
    ``trace`` with ``.plan<i>.rank<r>`` before its extension (Kineto JSON)."""
    from ..hardware.platforms import resolve_platform

    platform = resolve_platform(doc["platform"])
    if platform.device != "cpu" or platform.ranks < 2:
        raise ValueError("real multi-rank runs need a local-cpu platform with ranks >= 2")
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="ml-dse-ranks-") as tmp:
        args = (platform.ranks, os.path.join(tmp, "store"), tmp, doc, plans, iters, warmup,
                rounds, seed, platform.threads, trace)
        files = [os.path.join(tmp, f"rank{r}.json") for r in range(platform.ranks)]
        try:
            mp.start_processes(_plans_worker, args=args, nprocs=platform.ranks,
                               start_method="spawn")
        except mp.ProcessRaisedException as exc:
            raise RuntimeError(f"a rank failed: {str(exc).strip().splitlines()[-1]}") from None
        except mp.ProcessExitedException as exc:
            # a rank that dies after writing its samples (gloo's threads torn down at
            # exit) measured everything; one that died before did not
            if not all(os.path.exists(f) for f in files):
                raise RuntimeError(f"a rank stopped before its steps were measured: "
                                   f"{exc}") from None
        results = [json.load(open(f)) for f in files]
    out = []
    for i in range(len(plans)):
        steps = [res["steps"][i] for res in results]
        per_round = [max(statistics.median(rank[k]) for rank in steps) for k in range(rounds)]
        kinds = sorted({kind for res in results for step in res["exchanges"][i]
                        for kind in step})
        out.append({"iteration_ms": statistics.median(per_round), "rounds_ms": per_round,
                    "per_rank_ms": [statistics.median(s for k in range(rounds) for s in rank[k])
                                    for rank in steps],
                    # per kind of exchange, each rank's median time in it a step
                    "exchange_ms": {kind: [statistics.median(step.get(kind, 0.0) / 1e3
                                                             for step in res["exchanges"][i])
                                           for res in results] for kind in kinds}})
    return out


def _init(rank: int, world: int, store: str, threads: int):
    import torch.distributed as dist
    bind_cores(rank, world, threads)
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=world, timeout=TIMEOUT)
    return dist


def bind_cores(rank: int, world: int, threads: int) -> bool:
    """Bind this rank (and the threads it starts later: gloo's among them) to cores of
    its own, ``threads`` each, as a launcher binds ranks (torchrun's ``--cpu-affinity``,
    numactl) and as the predictor models them: each rank computes on its own cores.
    Without enough cores for every rank, nothing is bound (False)."""
    if not hasattr(os, "sched_setaffinity"):
        return False
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < world * threads:
        return False
    os.sched_setaffinity(0, set(cpus[rank * threads:(rank + 1) * threads]))
    return True


def _rank_workload(doc: dict, assignment: dict, rank: int, world: int):
    """This rank's module (its tables only: another rank's are one row, never read), its
    batch, optimizer and gradient buckets."""
    from ..model.sharding import Plan, holders, is_rank
    from ..model.workload import RankShard, build_workload, gradient_buckets

    plan = Plan("measured", world, dict(assignment))
    doc = copy.deepcopy(doc)
    for node in doc["model"]["nodes"]:
        if node["kind"] == "embedding_tables":
            for j, t in enumerate(node["params"]["tables"]):
                where = assignment.get(f"{node['id']}/{j}")
                if where is not None and rank not in holders(where, world):
                    t["rows"] = 1
    local_batch = max(1, math.ceil(int(doc["training"]["batch_size"]) / world))
    owners = {k: r for k, r in assignment.items() if is_rank(r)}
    shard = RankShard(rank, world, plan.local(rank), local_batch, local_batch * world,
                      rowwise=plan.rowwise, owners=owners, replicated=plan.replicated,
                      columns=plan.columns, row_groups=plan.row_groups)
    workload = build_workload(doc, device="cpu", fast_init=True, shard=shard)
    buckets = gradient_buckets(workload.module, world)
    buckets.attach()
    return workload, buckets


def _step(workload, batch, optimizer, buckets) -> None:
    optimizer.zero_grad(set_to_none=True)
    loss = workload.module(batch)
    buckets.reset()
    buckets.expect(loss)
    loss.backward()
    optimizer.step()


def trace_path(trace: str, plan: int, rank: int) -> str:
    """Where rank ``rank`` records plan ``plan``'s step: ``.plan<i>.rank<r>`` before the
    extension of ``trace`` (``.json`` or ``.json.gz``)."""
    stem, gz = (trace[:-3], ".gz") if trace.endswith(".gz") else (trace, "")
    base, ext = os.path.splitext(stem)
    return f"{base}.plan{plan}.rank{rank}{ext or '.json'}{gz}"


def _plans_worker(rank, world, store, out_dir, doc, plans, iters, warmup, rounds, seed,
                  threads, trace=None):
    from ..model.comm_ops import take_exchange_us

    dist = _init(rank, world, store, threads)
    samples = [[[] for _ in range(rounds)] for _ in plans]
    exchanges = [[] for _ in plans]   # per step, the time in each kind of exchange
    try:
        for k in range(rounds):
            for i, assignment in enumerate(plans):
                workload, buckets = _rank_workload(doc, assignment, rank, world)
                batch = workload.make_batch(seed)
                optimizer = workload.optimizer()
                for _ in range(warmup):
                    _step(workload, batch, optimizer, buckets)
                dist.barrier()
                take_exchange_us()
                for _ in range(iters):
                    t0 = time.perf_counter()
                    _step(workload, batch, optimizer, buckets)
                    samples[i][k].append((time.perf_counter() - t0) * 1e3)
                    exchanges[i].append(take_exchange_us())
                if trace and k == rounds - 1:
                    _record(lambda: _step(workload, batch, optimizer, buckets),
                            trace_path(trace, i, rank))
                buckets.detach()
                del workload, batch, optimizer, buckets
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump({"steps": samples, "exchanges": exchanges}, f)
    finally:
        dist.destroy_process_group()


def _record(step, path: str) -> None:
    """One step under torch.profiler, written to ``path`` (gzipped for ``.gz``)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    from ..utils.fileio import atomic_write_bytes

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with record_function("ProfilerStep#0"):
            step()
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(raw)
        data = open(raw, "rb").read()
    if path.endswith(".gz"):
        import gzip
        data = gzip.compress(data)
    atomic_write_bytes(path, data)


def measure_collectives(ranks: int, sizes: list[int] | None = None, reps: int = 40,
                        threads: int = 1, passes: int = 4) -> dict:
    """gloo's all-reduce (DDP's), and the all-to-all, all-gather and reduce-scatter as the
    ranks' exchanges run them (packing and unpacking included: ``comm_ops``) among
    ``ranks`` processes on this host (each bound to its own cores, as
    :func:`measure_plans` runs them),
    ``{kind: [[bytes, us], ...]}``; ``bytes`` as NCCL counts a message (the buffer of an
    all-reduce, the larger of what a rank sends and receives otherwise).  ``us`` is the
    mean of the middle 80 % of ``reps`` calls, taken in ``passes`` sweeps over every size
    and kind so that a slow moment of the host is shared among them: on loopback TCP a
    message of a few MiB takes one of two times, a few milliseconds apart, and a step
    pays their mean.  Each call follows :data:`COMPUTE_BEFORE_S` of compute, as a step's
    exchanges follow the rank's work."""
    import torch.multiprocessing as mp

    sizes = list(sizes or COLLECTIVE_SIZES)
    with tempfile.TemporaryDirectory(prefix="ml-dse-gloo-") as tmp:
        mp.start_processes(_collectives_worker, args=(ranks, os.path.join(tmp, "store"), tmp,
                                                       sizes, reps, threads, passes),
                           nprocs=ranks, start_method="spawn")
        return json.load(open(os.path.join(tmp, "collectives.json")))


# A collective in a training step follows the rank's own work (the lookups, backward);
# on a small VM one that follows milliseconds of compute takes several times one that
# follows another collective at once (the host's idle and wake-up path), so each timed
# call comes after this much compute.
COMPUTE_BEFORE_S = 0.002


def _compute(seconds: float) -> None:
    """Keep this rank's core busy for ``seconds`` in small products (a few microseconds
    each, so that the ranks leave within microseconds of each other)."""
    x = torch.ones(48, 48) / 48
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        x = x @ x


def _trimmed_mean(xs: list[float], cut: float = 0.1) -> float:
    xs = sorted(xs)
    k = int(len(xs) * cut)
    return statistics.mean(xs[k:len(xs) - k] or xs)


_TABLES, _WIDTH = 2, 16   # tables per rank, and their width, of the timed exchanges


def _layout(nbytes: int, world: int) -> tuple[int, int]:
    """``(floats of the all-reduce buffer, global batch of the exchanges)`` for a message
    of about ``nbytes``, both divisible by ``world``."""
    return (max(world, nbytes // 4 // world * world),
            max(world, nbytes // (4 * _TABLES * _WIDTH) // world * world))


def _collectives_worker(rank, world, store, out_dir, sizes, reps, threads, passes):
    from ..model import comm_ops

    dist = _init(rank, world, store, threads)
    kinds = ("all_reduce", "all_to_all", "all_gather", "reduce_scatter")
    times = {(kind, nbytes): [] for kind in kinds for nbytes in sizes}
    k, d = _TABLES, _WIDTH
    try:
        for p in range(passes):
            for nbytes in sizes:
                n, batch = _layout(nbytes, world)
                buf = torch.ones(n)
                rows = batch // world
                pooled = [torch.ones(batch, d) for _ in range(k)]
                local = [torch.ones(rows, d) for _ in range(k)]
                anchor = torch.empty(0)
                owners = [t // k for t in range(k * world)]
                # DDP's all-reduce as it is; the exchanges as the ranks run them, their
                # packing and unpacking included (comm_ops)
                calls = {"all_reduce": lambda: dist.all_reduce(buf),
                         "all_to_all": lambda: comm_ops._a2a_real(
                             pooled, anchor, rows, [d] * (k * world), owners),
                         "all_gather": lambda: comm_ops._all_gather_real(local),
                         "reduce_scatter": lambda: comm_ops._reduce_scatter_real(pooled, rows)}
                for kind in kinds:
                    calls[kind]()   # warm
                    for _ in range(reps // passes + (p < reps % passes)):
                        dist.barrier()
                        _compute(COMPUTE_BEFORE_S)   # as a step meets it: after work
                        t0 = time.perf_counter()
                        calls[kind]()
                        times[kind, nbytes].append((time.perf_counter() - t0) * 1e6)
        out = {kind: [] for kind in kinds}
        for kind in kinds:
            for nbytes in sizes:
                # every rank's time: the collective ends when the last one leaves
                t = torch.tensor([_trimmed_mean(times[kind, nbytes])])
                dist.all_reduce(t, op=dist.ReduceOp.MAX)
                n, batch = _layout(nbytes, world)
                counted = n * 4 if kind == "all_reduce" else batch * k * d * 4
                out[kind].append([counted, float(t)])
        if rank == 0:
            with open(os.path.join(out_dir, "collectives.json"), "w") as f:
                json.dump(out, f)
    finally:
        dist.destroy_process_group()
