"""Collectives as ops a capture can record: ``mldse::all_to_all``, ``mldse::all_reduce``,
``mldse::reduce_scatter`` and its backward ``mldse::all_gather``, the table-row-wise
exchange ``mldse::node_reduce_scatter`` with its backward ``mldse::node_all_gather``, and
the sparse features' input distribution of TorchRec's pipeline, ``mldse::kjt_splits`` and
``mldse::kjt_all_to_all``.

A rank of a data- and model-parallel job calls NCCL where a single-device step has no op.
These custom ops stand in for those calls on the meta device: they have shapes (their fake
kernels) and autograd (the all-to-all's backward is the reverse all-to-all), so the
recorder sees them in issue order with their tensor dependencies, as a profiler sees
``nccl:all_to_all`` and ``nccl:all_reduce`` in a real run.  They never run on data.

:class:`GradientBuckets` reproduces what ``DistributedDataParallel``'s reducer does in
backward: dense gradients are copied into flat buckets (reverse parameter order, 1 MiB
first bucket, then 25 MiB), each bucket is divided by the world size and all-reduced as
soon as it is full and every earlier bucket has gone, and the results are copied back
into the gradients when backward ends.
"""
from __future__ import annotations

import time
from contextlib import contextmanager

import torch

__all__ = ["COLLECTIVE_OPS", "PROFILER_NAMES", "INPUT_DIST_OPS", "HOST_WAITS",
           "GradientBuckets", "all_to_all", "exchange_anchor", "reduce_scatter", "all_reduce",
           "wait_pending", "take_exchange_us"]

# recorded op name -> the collective kind of devices/collectives.py
COLLECTIVE_OPS = {"mldse::all_to_all": "all_to_all",
                  "mldse::all_to_all_backward": "all_to_all",
                  "mldse::all_reduce": "all_reduce",
                  "mldse::reduce_scatter": "reduce_scatter",
                  "mldse::all_gather": "all_gather",
                  "mldse::node_reduce_scatter": "node_reduce_scatter",
                  "mldse::node_all_gather": "node_all_gather",
                  "mldse::kjt_splits": "all_to_all",
                  "mldse::kjt_all_to_all": "all_to_all"}

# what a profiler calls them (the record_param_comms / NCCL names of a Kineto trace)
PROFILER_NAMES = {"mldse::all_to_all": "nccl:all_to_all",
                  "mldse::all_to_all_backward": "nccl:all_to_all",
                  "mldse::all_reduce": "nccl:all_reduce",
                  "mldse::reduce_scatter": "nccl:reduce_scatter",
                  "mldse::all_gather": "nccl:all_gather",
                  "mldse::node_reduce_scatter": "nccl:reduce_scatter + all_to_all",
                  "mldse::node_all_gather": "nccl:all_to_all + all_gather",
                  "mldse::kjt_splits": "nccl:all_to_all",
                  "mldse::kjt_all_to_all": "nccl:all_to_all"}

# The input distribution runs on a stream of its own (input_pipeline.DIST_BLOCK): these
# collectives wait for it, not for the compute stream.
INPUT_DIST_OPS = frozenset({"mldse::kjt_splits", "mldse::kjt_all_to_all"})
# The host waits for these to end (it reads their result: ``.tolist()`` of the splits).
HOST_WAITS = frozenset({"mldse::kjt_splits"})

FIRST_BUCKET_BYTES = 1 << 20   # torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES
BUCKET_BYTES = 25 << 20        # DistributedDataParallel(bucket_cap_mb=25)


def _capture_only(*_args):
    raise RuntimeError("mldse collectives only exist for capture on the meta device")


@torch.library.custom_op("mldse::all_to_all", mutates_args=())
def _all_to_all(pooled: list[torch.Tensor], anchor: torch.Tensor, rows: int,
                widths: list[int], owners: list[int]) -> list[torch.Tensor]:
    """Send this rank's pooled embeddings ([global batch, dim] per local table) to the
    ranks that own each sample; receive [local batch, dim] of every table.  ``anchor``
    (empty, requiring grad) gives dtype and device, and keeps the exchange in autograd's
    graph on a rank that holds none of the block's tables: it still takes part.
    ``owners``: the rank that holds each table of ``widths`` (-1 where unknown: a
    capture)."""
    _capture_only()


@_all_to_all.register_fake
def _(pooled, anchor, rows, widths, owners):
    return [anchor.new_empty((rows, w)) for w in widths]


@torch.library.custom_op("mldse::all_to_all_backward", mutates_args=())
def _all_to_all_backward(grads: list[torch.Tensor], anchor: torch.Tensor, rows: int,
                         widths: list[int], owners: list[int]) -> list[torch.Tensor]:
    """The reverse exchange: gradients of every table's local-batch slice go back to the
    table's owner as [global batch, dim] (``widths``: this rank's tables; ``owners``:
    who holds each table of ``grads``)."""
    _capture_only()


@_all_to_all_backward.register_fake
def _(grads, anchor, rows, widths, owners):
    return [anchor.new_empty((rows, w)) for w in widths]


def _a2a_setup(ctx, inputs, output):
    pooled, anchor, _, widths, owners = inputs
    ctx.anchor = anchor
    ctx.rows = pooled[0].shape[0] if pooled else 0
    ctx.widths = [p.shape[1] for p in pooled]
    ctx.owners = list(owners)


def _a2a_backward(ctx, grads):
    back = torch.ops.mldse.all_to_all_backward(list(grads), ctx.anchor, ctx.rows, ctx.widths,
                                               ctx.owners)
    return list(back), None, None, None, None


_all_to_all.register_autograd(_a2a_backward, setup_context=_a2a_setup)


@torch.library.custom_op("mldse::all_reduce", mutates_args=("tensors",))
def _all_reduce(tensors: list[torch.Tensor]) -> None:
    """Sum ``tensors`` in place over all ranks."""
    _capture_only()


@_all_reduce.register_fake
def _(tensors):
    return None


@torch.library.custom_op("mldse::reduce_scatter", mutates_args=())
def _reduce_scatter(partial: list[torch.Tensor], rows: int) -> list[torch.Tensor]:
    """Sum the row-wise tables' partial bags ([global batch, dim] each) over the ranks;
    each rank keeps its ``rows`` samples."""
    _capture_only()


@_reduce_scatter.register_fake
def _(partial, rows):
    return [p.new_empty((rows, p.shape[1])) for p in partial]


@torch.library.custom_op("mldse::all_gather", mutates_args=())
def _all_gather(grads: list[torch.Tensor], rows: int) -> list[torch.Tensor]:
    """The reduce-scatter's backward: every rank's sample gradients gathered to
    [global batch, dim] on every rank."""
    _capture_only()


@_all_gather.register_fake
def _(grads, rows):
    return [g.new_empty((rows, g.shape[1])) for g in grads]


def _rs_setup(ctx, inputs, output):
    partial, _ = inputs
    ctx.rows = partial[0].shape[0] if partial else 0


def _rs_backward(ctx, grads):
    return list(torch.ops.mldse.all_gather(list(grads), ctx.rows)), None


_reduce_scatter.register_autograd(_rs_backward, setup_context=_rs_setup)


@torch.library.custom_op("mldse::node_reduce_scatter", mutates_args=())
def _node_reduce_scatter(partial: list[torch.Tensor], rows: int) -> list[torch.Tensor]:
    """Table-row-wise tables' exchange (TorchRec's TWRW): each node sums its ranks'
    partial bags ([global batch, dim]; [0, dim] for a table of another node) in a
    reduce-scatter over its own links, then an all-to-all across the nodes hands each
    rank its ``rows`` samples of every table."""
    _capture_only()


@_node_reduce_scatter.register_fake
def _(partial, rows):
    return [p.new_empty((rows, p.shape[1])) for p in partial]


@torch.library.custom_op("mldse::node_all_gather", mutates_args=())
def _node_all_gather(grads: list[torch.Tensor], rows: list[int]) -> list[torch.Tensor]:
    """The node reduce-scatter's backward: the samples' gradients back across the nodes,
    then gathered over each node's ranks, [rows[i], dim] each."""
    _capture_only()


@_node_all_gather.register_fake
def _(grads, rows):
    return [g.new_empty((r, g.shape[1])) for g, r in zip(grads, rows)]


def _node_rs_setup(ctx, inputs, output):
    ctx.rows = [p.shape[0] for p in inputs[0]]


def _node_rs_backward(ctx, grads):
    return list(torch.ops.mldse.node_all_gather(list(grads), ctx.rows)), None


_node_reduce_scatter.register_autograd(_node_rs_backward, setup_context=_node_rs_setup)


@torch.library.custom_op("mldse::kjt_splits", mutates_args=())
def _kjt_splits(splits: torch.Tensor) -> torch.Tensor:
    """How many lengths and values this rank sends each rank, exchanged so that each
    rank knows what it will receive (TorchRec's splits all-to-all); the host reads the
    result before it can go on."""
    _capture_only()


@_kjt_splits.register_fake
def _(splits):
    return splits.new_empty(splits.shape)


@torch.library.custom_op("mldse::kjt_all_to_all", mutates_args=())
def _kjt_all_to_all(data: torch.Tensor) -> torch.Tensor:
    """The sparse features' lengths or values sent to the ranks that look them up (as
    many as this rank sends: the ranks' shares are alike on average)."""
    _capture_only()


@_kjt_all_to_all.register_fake
def _(data):
    return data.new_empty(data.shape)


# -- a real exchange on CPU ranks, over torch.distributed (gloo) ---------------------------
#
# A real run (``measure``: ranks of ``local-cpu`` joined by gloo) calls the same exchanges
# through plain autograd Functions rather than the custom ops: the custom-op dispatcher
# costs a few hundred microseconds of Python per call, which a training job's own
# collectives do not pay.  ``record_function`` keeps the ops' names in a recorded trace.

# A real run's wall time in each exchange (us), by kind, summed until read: what a step
# spends in them, waiting for its peers included (calibrate/ranks.py reads it per step).
EXCHANGE_US: dict[str, float] = {}


@contextmanager
def _clock(kind: str):
    """Add the wall time of the ``with`` body to :data:`EXCHANGE_US` under ``kind``."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        EXCHANGE_US[kind] = EXCHANGE_US.get(kind, 0.0) + (time.perf_counter() - t0) * 1e6


def take_exchange_us() -> dict[str, float]:
    """The exchanges' wall times since the last call, by kind; then cleared."""
    out = dict(EXCHANGE_US)
    EXCHANGE_US.clear()
    return out


def _real_run() -> bool:
    import torch.distributed as dist
    return dist.is_available() and dist.is_initialized()


def _exchange(chunks_out: list[list[torch.Tensor]], sizes_in: list[int],
              like: torch.Tensor) -> list[torch.Tensor]:
    """One all-to-all: ``chunks_out[j]`` (flattened together) to rank ``j``; returns what
    each rank sent here, flat, of ``sizes_in[i]`` values from rank ``i``."""
    import torch.distributed as dist
    flat_out = [torch.cat([c.reshape(-1) for c in cs]) if cs else like.new_empty(0)
                for cs in chunks_out]
    sent = torch.cat(flat_out) if flat_out else like.new_empty(0)
    got = like.new_empty(sum(sizes_in))
    dist.all_to_all_single(got, sent, sizes_in, [t.numel() for t in flat_out])
    return list(got.split(sizes_in))


def _a2a_real(pooled, anchor, rows, widths, owners):
    import torch.distributed as dist
    me, world = dist.get_rank(), dist.get_world_size()
    mine = [w for w, o in zip(widths, owners) if o == me]
    if len(mine) != len(pooled):
        raise ValueError(f"rank {me} looks up {len(pooled)} table(s) but owns {len(mine)}")
    # to rank j: its samples (rows j*rows .. (j+1)*rows) of each of this rank's tables
    out = [[p[j * rows:(j + 1) * rows] for p in pooled] for j in range(world)]
    sizes = [rows * sum(w for w, o in zip(widths, owners) if o == i) for i in range(world)]
    got = _exchange(out, sizes, anchor)
    result, offset = [], [0] * world
    for w, o in zip(widths, owners):
        result.append(got[o][offset[o]:offset[o] + rows * w].view(rows, w))
        offset[o] += rows * w
    return result


def _a2a_backward_real(grads, anchor, rows, widths, owners):
    import torch.distributed as dist
    world = dist.get_world_size()
    local = grads[0].shape[0] if grads else 0
    # to rank i: this rank's samples of every table rank i holds
    out = [[g for g, o in zip(grads, owners) if o == i] for i in range(world)]
    sizes = [local * sum(widths)] * world
    got = _exchange(out, sizes, anchor)
    parts = [[] for _ in widths]
    for chunk in got:   # from each rank, in rank order: its samples of my tables
        offset = 0
        for t, w in enumerate(widths):
            parts[t].append(chunk[offset:offset + local * w].view(local, w))
            offset += local * w
    return [torch.cat(p) for p in parts]


class _AllToAll(torch.autograd.Function):
    """``mldse::all_to_all`` and its backward in a real run."""

    @staticmethod
    def forward(ctx, anchor, rows, widths, owners, *pooled):
        ctx.anchor, ctx.owners = anchor, list(owners)
        ctx.rows = pooled[0].shape[0] if pooled else 0
        ctx.widths = [p.shape[1] for p in pooled]
        with torch.profiler.record_function("mldse::all_to_all"), _clock("all_to_all"):
            return tuple(_a2a_real(list(pooled), anchor, rows, widths, owners))

    @staticmethod
    def backward(ctx, *grads):
        with torch.profiler.record_function("mldse::all_to_all_backward"), \
                _clock("all_to_all_backward"):
            back = _a2a_backward_real([g.contiguous() for g in grads], ctx.anchor, ctx.rows,
                                      ctx.widths, ctx.owners)
        return (None, None, None, None, *back)


_PENDING: list = []   # a real run's all-reduces in flight (DDP waits when backward ends)


def _all_reduce_real(tensors: list[torch.Tensor]) -> None:
    """Asynchronous, as DDP's reducer launches a bucket: gloo reduces it on its own
    threads while backward goes on."""
    import torch.distributed as dist
    with torch.profiler.record_function("mldse::all_reduce"):
        _PENDING.extend(dist.all_reduce(t, async_op=True) for t in tensors)


def wait_pending() -> None:
    """Wait for a real run's all-reduces in flight (none in a capture)."""
    if not _PENDING:
        return
    with _clock("all_reduce_wait"):
        while _PENDING:
            _PENDING.pop(0).wait()


class _ReduceScatter(torch.autograd.Function):
    """``mldse::reduce_scatter`` (gloo has none: the sums everywhere, each rank keeps its
    samples) and its backward ``mldse::all_gather`` in a real run."""

    @staticmethod
    def forward(ctx, rows, *partial):
        ctx.rows = partial[0].shape[0] if partial else 0
        with torch.profiler.record_function("mldse::reduce_scatter"), _clock("reduce_scatter"):
            return tuple(_reduce_scatter_real(list(partial), rows))

    @staticmethod
    def backward(ctx, *grads):
        with torch.profiler.record_function("mldse::all_gather"), _clock("all_gather"):
            return (None, *_all_gather_real([g.contiguous() for g in grads]))


def _reduce_scatter_real(partial: list[torch.Tensor], rows: int) -> list[torch.Tensor]:
    import torch.distributed as dist
    me = dist.get_rank()
    flat = torch.cat([p.reshape(-1) for p in partial])
    dist.all_reduce(flat)
    out, offset = [], 0
    for p in partial:
        whole = flat[offset:offset + p.numel()].view_as(p)
        out.append(whole[me * rows:(me + 1) * rows].clone())
        offset += p.numel()
    return out


def _all_gather_real(grads: list[torch.Tensor]) -> list[torch.Tensor]:
    # one collective for every table, as the capture records it
    import torch.distributed as dist
    world = dist.get_world_size()
    flat = torch.cat([g.reshape(-1) for g in grads])
    pieces = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(pieces, flat)
    out, offset = [], 0
    for g in grads:
        out.append(torch.cat([p[offset:offset + g.numel()].view_as(g) for p in pieces]))
        offset += g.numel()
    return out


def reduce_scatter(partial: list[torch.Tensor], local_batch: int,
                   node: bool = False) -> list[torch.Tensor]:
    """Row-wise tables' exchange: ``partial`` bags of this rank's rows for the global
    batch in, this rank's ``local_batch`` samples of their sums out; ``node``: table-row-wise
    tables, summed per node (``mldse::node_reduce_scatter``)."""
    if node:
        if _real_run():   # one host is one node: its table-row-wise tables are row-wise
            raise ValueError("table-row-wise tables need a platform of several nodes")
        return list(torch.ops.mldse.node_reduce_scatter(partial, local_batch))
    if _real_run():
        return list(_ReduceScatter.apply(local_batch, *partial))
    return list(torch.ops.mldse.reduce_scatter(partial, local_batch))


def all_to_all(pooled: list[torch.Tensor], anchor: torch.Tensor, local_batch: int,
               widths: list[int], owners: list[int] | None = None) -> list[torch.Tensor]:
    """The forward exchange of a table-wise sharded embedding block: ``pooled`` holds
    this rank's tables ([global batch, dim]); returns [local batch, w] for each of
    ``widths`` (every table of the block, in order), held by ``owners`` (needed for a
    real exchange; a capture leaves it out).  ``anchor``: an empty tensor of the step's
    dtype and device that requires grad (:func:`exchange_anchor`)."""
    owners = list(owners) if owners is not None else [-1] * len(widths)
    if _real_run():
        return list(_AllToAll.apply(anchor, local_batch, widths, owners, *pooled))
    return list(torch.ops.mldse.all_to_all(pooled, anchor, local_batch, widths, owners))


def all_reduce(tensors: list[torch.Tensor]) -> None:
    """Sum ``tensors`` over the ranks in place (in a real run, asynchronously:
    :func:`wait_pending` waits)."""
    if _real_run():
        _all_reduce_real(tensors)
    else:
        torch.ops.mldse.all_reduce(tensors)


def exchange_anchor(dtype: torch.dtype, device) -> torch.Tensor:
    """The empty tensor :func:`all_to_all` needs, made once per workload."""
    return torch.empty(0, dtype=dtype, device=device, requires_grad=True)


class GradientBuckets:
    """DistributedDataParallel's gradient all-reduce, hooked into a module's parameters."""

    def __init__(self, params: list[torch.nn.Parameter], world: int,
                 late: list[torch.nn.Parameter] = ()):
        self.world = world
        # data-parallel embedding tables: one more bucket, reduced when backward ends (the
        # ranks' lookups differ, so their gradients are ready at different points of each
        # rank's backward; at its end they are the same collective on every rank)
        self.late = list(late)
        self.late_flat = (torch.empty(sum(p.numel() for p in self.late),
                                      dtype=self.late[0].dtype, device=self.late[0].device)
                          if self.late else None)
        self.buckets: list[list[torch.nn.Parameter]] = []
        self.flat: list[torch.Tensor] = []
        self.handles = []
        cap, size, current = FIRST_BUCKET_BYTES, 0, []
        for p in reversed(params):   # DDP fills buckets in reverse registration order
            current.append(p)        # and closes one once it reaches the limit
            size += p.numel() * p.element_size()   # (compute_bucket_assignment_by_size)
            if size >= cap:
                self.buckets.append(current)
                cap, size, current = BUCKET_BYTES, 0, []
        if current:
            self.buckets.append(current)
        self.bucket_of = {id(p): b for b, ps in enumerate(self.buckets) for p in ps}
        for ps in self.buckets:   # allocated when DDP is built, not during a step
            self.flat.append(torch.empty(sum(p.numel() for p in ps), dtype=ps[0].dtype,
                                         device=ps[0].device))
        self.pending = [len(ps) for ps in self.buckets]
        self.launched = 0
        self.unused: set[int] = set()

    def expect(self, loss: torch.Tensor) -> None:
        """Mark the parameters that ``loss`` does not reach as ready, as DDP's
        ``find_unused_parameters`` does: their buckets still go, and so do later ones."""
        used, seen, stack = set(), set(), [loss.grad_fn]
        while stack:
            fn = stack.pop()
            if fn is None or fn in seen:
                continue
            seen.add(fn)
            variable = getattr(fn, "variable", None)  # AccumulateGrad of a leaf
            if variable is not None:
                used.add(id(variable))
            stack.extend(f for f, _ in fn.next_functions)
        for b, ps in enumerate(self.buckets):
            self.pending[b] -= sum(1 for p in ps if id(p) not in used)
        self.unused = {id(p) for ps in self.buckets for p in ps if id(p) not in used}

    def reset(self) -> None:
        """Before each step of a real run: no bucket has gone yet."""
        self.pending = [len(ps) for ps in self.buckets]
        self.launched = 0
        self.unused = set()

    def attach(self) -> None:
        for p in (p for ps in self.buckets for p in ps):
            self.handles.append(p.register_post_accumulate_grad_hook(self._ready))
        for p in self.late:
            self.handles.append(p.register_post_accumulate_grad_hook(self._late_ready))

    def _late_view(self, p: torch.nn.Parameter) -> torch.Tensor:
        offset = 0
        for q in self.late:
            if q is p:
                break
            offset += q.numel()
        return self.late_flat[offset:offset + p.numel()].view_as(p)

    def _late_ready(self, p: torch.nn.Parameter) -> None:
        self._late_view(p).copy_(p.grad)
        if not self.buckets and p is self.late[0]:
            torch.autograd.Variable._execution_engine.queue_callback(self._finish)

    def detach(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()

    def _view(self, b: int, p: torch.nn.Parameter) -> torch.Tensor:
        offset = 0
        for q in self.buckets[b]:
            if q is p:
                break
            offset += q.numel()
        return self.flat[b][offset:offset + p.numel()].view_as(p)

    def _ready(self, p: torch.nn.Parameter) -> None:
        b = self.bucket_of[id(p)]
        self._view(b, p).copy_(p.grad)   # the reducer copies each gradient into its bucket
        self.pending[b] -= 1
        while self.launched < len(self.buckets) and self.pending[self.launched] == 0:
            flat = self.flat[self.launched]   # buckets go in order, as DDP sends them
            flat.div_(self.world)
            all_reduce([flat])
            self.launched += 1
            if self.launched == len(self.buckets):   # the last one: backward's epilogue
                torch.autograd.Variable._execution_engine.queue_callback(self._finish)

    def _finish(self) -> None:
        """Reduce the late bucket, wait for the reductions and copy the averaged
        gradients back."""
        if self.late:
            self.late_flat.div_(self.world)
            all_reduce([self.late_flat])
        wait_pending()
        for b, ps in enumerate(self.buckets):
            for p in ps:
                if id(p) not in self.unused:
                    p.grad.copy_(self._view(b, p))
        for p in self.late:
            if p.grad is not None:
                p.grad.copy_(self._late_view(p))
