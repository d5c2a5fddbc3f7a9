"""Capture one training step at the aten level, as an op graph.

A ``TorchDispatchMode`` sees every aten op that reaches a backend: on the meta device
this costs milliseconds and no memory.  Each op records its shapes, dtypes, phase
(forward, backward, optimizer), the CPU thread that issues it (``main`` or ``autograd``),
the block it came from, and edges to the ops that produced its tensor inputs.
"""
from __future__ import annotations

import json
import math
import threading
import weakref
from collections import OrderedDict
from contextlib import contextmanager, nullcontext

import networkx as nx
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ..utils.gc_pause import collection_paused
from .embedding_blocks import lookup_specs
from .input_pipeline import (
    COPY_BLOCK,
    DIST_BLOCK,
    TAKE_BLOCK,
    copy_batch,
    host_batch,
    start_sparse_dist,
    take_sparse_dist,
)
from .memory import GPU_BLOCK, StorageLedger, step_memory
from .op_classes import classify
from .workload import Workload, build_workload, gradient_buckets

__all__ = ["OpRecorder", "capture_training_step", "capture_scenario", "gpu_fused_ops",
           "op_sequence"]


def _dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


class OpRecorder(TorchDispatchMode):
    """Records aten ops into a ``networkx.DiGraph`` (nodes numbered in issue order)."""

    def __init__(self, memory_block: int = 1, device=None):
        super().__init__()
        self.graph = nx.DiGraph()
        self.device = None if device is None else torch.device(device).type
        self.ledger = StorageLedger(memory_block, self.device)
        self.phase = "forward"
        self.block: list[str] = []
        # id(tensor) -> (weak reference, value).  Strong references would change what
        # autograd does: AccumulateGrad and InputBuffer steal buffers only when nobody
        # else holds them, so holding them records copies a real run never makes.
        self._producer: dict[int, tuple] = {}
        self._nnz: dict[int, tuple] = {}
        # id(indices tensor) -> (weak reference, table spec): embedding ops that read
        # these indices get ``lookup`` = rows, dim, pooling and index distribution.
        self.lookups: dict[int, tuple] = {}
        # bytes the step's ops have written so far, and that count when each op's output
        # was written: an input's age in bytes (how far the caches have moved on since)
        self.written = 0
        self._written_at: dict[int, int] = {}

    @staticmethod
    def _get(table: dict, t: torch.Tensor, default=None):
        entry = table.get(id(t))
        if entry is None or entry[0]() is not t:
            return default
        return entry[1]

    def _describe(self, tensors):
        shapes, dtypes, nnz = [], [], []
        for t in tensors:
            shapes.append(tuple(t.shape))
            dtypes.append(_dtype_name(t))
            nnz.append(self._get(self._nnz, t) if t.is_sparse else None)
        return shapes, dtypes, nnz

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        ns = func.namespace
        if ns not in ("aten", "prims", "mldse"):  # profiler markers and the like
            return out
        ins = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        outs = [a for a in tree_flatten(out)[0] if isinstance(a, torch.Tensor)]
        for t in outs:
            if t.is_sparse:
                # Meta sparse tensors lose nnz through clone/coalesce: inherit it.
                n = t._nnz()
                if n == 0:
                    n = max((self._get(self._nnz, a, 0) for a in ins if a.is_sparse),
                            default=0)
                self._nnz[id(t)] = (weakref.ref(t), n)
        idx = self.graph.number_of_nodes()
        in_shapes, in_dtypes, in_nnz = self._describe(ins)
        out_shapes, out_dtypes, out_nnz = self._describe(outs)
        # the first input's memory layout (a copy of a permuted tensor) and its age: the
        # bytes written since it was (0: before the step, e.g. a weight)
        in_stride = (tuple(ins[0].stride()) if ins and ins[0].layout == torch.strided
                     else None)
        src = self._get(self._producer, ins[0]) if ins else None
        age = self.written - self._written_at.get(src, 0) if src is not None else self.written
        name = f"{ns}::{func._schema.name.split('::')[-1]}"
        node = torch._C._current_autograd_node()
        self.graph.add_node(
            idx, name=name, overload=func._overloadname,
            phase="backward" if node is not None else self.phase,
            thread="autograd" if node is not None else "main",
            block=self.block[-1] if self.block and node is None else "",
            grad_fn=node.name() if node is not None else "",
            input_shapes=in_shapes, input_dtypes=in_dtypes, input_nnz=in_nnz,
            input_stride=in_stride, input_age_bytes=age,
            output_shapes=out_shapes, output_dtypes=out_dtypes, output_nnz=out_nnz,
            scalars=[a for a in tree_flatten((args, kwargs))[0]
                     if isinstance(a, (int, float, bool)) and not isinstance(a, torch.Tensor)],
            lookup=self._lookup_of(ins), host=self._on_host(ins, outs))
        for t in ins:
            src = self._get(self._producer, t)
            if src is not None and src != idx:
                self.graph.add_edge(src, idx)
        # a real run takes the in-place path: no new memory, the input lives on
        renamed = _as_in_a_real_run(self.graph, idx)
        self._count_written(idx, src, ins, outs)
        self.ledger.read(ins)
        self.ledger.wrote(idx, outs, out_nnz, same_as=ins[:1] if renamed else None,
                          indices_shared="embedding" in self.graph.nodes[idx]["name"])
        written = ins if func._schema.is_mutable and ns == "mldse" else outs
        for t in written:  # an in-place collective (all-reduce) produces its inputs anew
            self._producer[id(t)] = (weakref.ref(t), idx)
        return out

    def _count_written(self, idx: int, src, ins, outs) -> None:
        """Add what op ``idx`` writes (as a real run names it) to the step's bytes
        written, and note the count its outputs were written at."""
        if classify(self.graph.nodes[idx]["name"]) == "view":
            # no data moves: its output is as old as its input (0: made before the step)
            self._written_at[idx] = self._written_at.get(src, 0)
            return
        sparse_in = [t for t in ins if t.is_sparse]
        if sparse_in and not any(t.is_sparse for t in outs):
            written = sparse_in   # an update with sparse rows writes those rows
        else:
            written = outs
        self.written += sum(_nbytes(t, self._get(self._nnz, t, 0)) for t in written)
        self._written_at[idx] = self.written

    def _on_host(self, ins, outs) -> bool:
        """Every tensor of the op is a CPU tensor while the step is on another device (an
        optimizer's step counter): the host runs it, no kernel is launched."""
        tensors = ins + outs
        return bool(tensors) and self.device not in (None, "cpu") and all(
            t.device.type == "cpu" for t in tensors)

    def _lookup_of(self, ins) -> dict | None:
        """The table an op reads: through its indices, or through a sparse gradient
        that an embedding backward produced (the optimizer's sparse update)."""
        for t in ins:
            spec = self._get(self.lookups, t)
            if spec is not None:
                return spec
        for t in ins:
            if t.is_sparse:
                src = self._get(self._producer, t)
                if src is not None and self.graph.nodes[src].get("lookup"):
                    return self.graph.nodes[src]["lookup"]
        return None

    @contextmanager
    def in_block(self, block: str):
        self.block.append(block)
        try:
            yield
        finally:
            self.block.pop()

    @contextmanager
    def in_phase(self, phase: str):
        old, self.phase = self.phase, phase
        try:
            yield
        finally:
            self.phase = old


def _nbytes(t: torch.Tensor, nnz: int = 0) -> int:
    """The bytes ``t`` holds: a sparse COO tensor's ``nnz`` rows (its values)."""
    if t.is_sparse:
        return nnz * (t.numel() // max(1, t.shape[0]) if t.dim() else 1) * t.element_size()
    return t.numel() * t.element_size()


class _Unrecorded(TorchDispatchMode):
    """Runs ops as a recording does, keeping nothing."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _attach_block_hooks(module, recorder: OpRecorder):
    handles = []
    for nid, block in module.blocks.items():
        handles.append(block.register_forward_pre_hook(
            lambda m, a, nid=nid: recorder.block.append(nid)))
        # A forward hook that returns a value replaces the output: return None.
        handles.append(block.register_forward_hook(
            lambda m, a, o: None if recorder.block.pop() else None))
    return handles


_ORIGINALS = {"scaled_dot_product_attention": F.scaled_dot_product_attention,
              "dropout": F.dropout}
_fusing = threading.local()  # per thread: is this thread capturing for a GPU?
_patch_lock = threading.Lock()
_patch_users = 0


def _fusing_here() -> bool:
    return getattr(_fusing, "on", False)


def _gpu_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
              scale=None, enable_gqa=False):
    """``scaled_dot_product_attention`` as a GPU runs it, in threads inside
    :func:`gpu_fused_ops`; the original everywhere else."""
    if not _fusing_here() or attn_mask is not None or enable_gqa or query.dim() != 4:
        return _ORIGINALS["scaled_dot_product_attention"](
            query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
            is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
    half = query.dtype in (torch.float16, torch.bfloat16)
    if query.shape[-1] % (8 if half else 4) or value.shape[-1] % (8 if half else 4):
        # the fused kernels need aligned head dims: torch falls back to its math path
        # (seen on the H200 for head dim 38)
        return _gpu_math_attention(query, key, value, dropout_p, is_causal, scale)
    if half and query.shape[-1] <= 256:
        return torch.ops.aten._scaled_dot_product_flash_attention(
            query, key, value, dropout_p, is_causal, False, scale=scale)[0]
    return torch.ops.aten._scaled_dot_product_efficient_attention(
        query, key, value, None, True, dropout_p, is_causal, scale=scale)[0]


def _gpu_math_attention(query, key, value, dropout_p, is_causal, scale):
    """torch's math attention as a GPU runs it (``_scaled_dot_product_attention_math``:
    both operands scaled by the root of the scale, ``_safe_softmax``, a fused dropout)."""

    root = math.sqrt(scale if scale is not None else 1.0 / math.sqrt(query.shape[-1]))
    attn = torch.matmul(query * root, (key * root).transpose(-2, -1))
    if is_causal:
        n, m = attn.shape[-2:]
        mask = torch.ones(n, m, dtype=torch.bool, device=attn.device).tril()
        attn = attn.masked_fill(~mask, float("-inf"))
    attn = torch.ops.aten._safe_softmax(attn, -1)
    if dropout_p > 0.0:
        attn = torch.ops.aten.native_dropout(attn, dropout_p, True)[0]
    return torch.matmul(attn, value)


def _gpu_dropout(input, p=0.5, training=True, inplace=False):
    """``dropout`` as a GPU runs it (one ``native_dropout`` kernel forward, one
    ``native_dropout_backward``), in threads inside :func:`gpu_fused_ops`."""
    if _fusing_here() and training and 0.0 < p < 1.0 and not inplace and input.numel():
        return torch.ops.aten.native_dropout(input, p, True)[0]
    return _ORIGINALS["dropout"](input, p, training, inplace)


_GPU_VERSIONS = {"scaled_dot_product_attention": _gpu_sdpa, "dropout": _gpu_dropout}


@contextmanager
def gpu_fused_ops():
    """Inside, this thread's ``scaled_dot_product_attention`` and ``dropout`` calls are
    recorded as a GPU runs them, not as a meta or CPU tensor decomposes them:

    - attention: one fused kernel each way (flash attention for 16-bit inputs,
      memory-efficient attention for fp32), not matmul-softmax-matmul.  Measured on an
      H200 (``resources/measurements``): a bf16 LM ran cuDNN flash kernels while the meta capture had
      recorded fp32 ``bmm`` s (softmax upcast) that predicted its step 77 % too slow.
      Head dims the fused kernels cannot take run torch's math path (with a fused
      dropout); masks and grouped queries keep the decomposed form;
    - dropout: ``native_dropout`` (one kernel), not ``bernoulli_``, ``div_`` and ``mul``
      (three ops and their dispatch, seen in the same traces).

    The functions are swapped while any thread is inside (a count, under a lock) and
    the swap acts only in those threads: predictions run in worker threads beside real
    CPU runs."""
    global _patch_users
    with _patch_lock:
        if _patch_users == 0:
            for name, fn in _GPU_VERSIONS.items():
                setattr(F, name, fn)
        _patch_users += 1
    previous, _fusing.on = _fusing_here(), True
    try:
        yield
    finally:
        _fusing.on = previous
        with _patch_lock:
            _patch_users -= 1
            if _patch_users == 0:
                for name, fn in _ORIGINALS.items():
                    setattr(F, name, fn)


def capture_training_step(workload: Workload, *, gpu: bool = False) -> nx.DiGraph:
    """The op graph of one training step of ``workload`` (usually on meta).

    The inputs are made before recording, as a data loader would; the graph holds
    forward (with the loss), backward and the optimizer step.  ``gpu``: record the ops a
    CUDA device runs where they differ from the CPU's (dropout and attention as
    :func:`gpu_fused_ops` records them, the multi-tensor optimizer step), and the
    workload's TorchRec pipeline (:mod:`.input_pipeline`) when it has one: the next
    batch's copy before the forward, its received features taken at the forward's start,
    and the input distribution of the batch after it between forward and backward.
    """

    module = workload.module
    batch = workload.make_batch()
    # On a GPU, SGD updates all dense parameters with one ``_foreach_add_``.
    optimizer = workload.optimizer(foreach=True if gpu else None)
    if workload.doc["training"].get("optimizer", "sgd") != "sgd":
        # Adam makes its state in its first step: record a steady-state step, the second.
        # (Under a dispatch mode, as recording runs: meta has no sparse coalesce.)
        with collection_paused(), (gpu_fused_ops() if gpu else nullcontext()), _Unrecorded():
            module(batch).backward()
            optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    recorder = OpRecorder(GPU_BLOCK if gpu else 1, device=workload.device)
    for nid, inputs in batch["sparse"].items():
        specs = lookup_specs(module.blocks[nid], workload.specs[nid]["tables"], nid,
                             workload.batch_size, module.shard)
        for bag_input, spec in zip(inputs, specs):
            if bag_input is not None:  # None: another rank's table
                indices = bag_input[0]
                recorder.lookups[id(indices)] = (weakref.ref(indices), spec)
    handles = _attach_block_hooks(module, recorder)
    recorder.ledger.read(_held_parameters(module))   # unused ones take memory too
    buckets = None
    if module.shard is not None and module.shard.ranks > 1:
        # data-parallel: every dense parameter's gradient is all-reduced, as DDP does
        buckets = gradient_buckets(module, module.shard.ranks)
        buckets.attach()
        recorder.ledger.read(buckets.flat + ([buckets.late_flat] if buckets.late else []))
    pipeline = workload.pipeline if gpu else None
    host = host_batch(pipeline, batch) if pipeline is not None else []
    try:
        with collection_paused(), (gpu_fused_ops() if gpu else nullcontext()), recorder:
            with recorder.in_phase("forward"):
                if pipeline is not None:
                    with recorder.in_block(COPY_BLOCK):
                        copied = copy_batch(host, workload.device)
                    with recorder.in_block(TAKE_BLOCK):
                        take_sparse_dist(pipeline, workload.device)
                loss = module(batch)
                if pipeline is not None:
                    with recorder.in_block(DIST_BLOCK):
                        start_sparse_dist(pipeline, copied, workload.device)
                        del copied
            if buckets is not None:
                buckets.expect(loss)
            with recorder.in_phase("backward"):
                loss.backward()
            with recorder.in_phase("optimizer"):
                optimizer.step()
            del loss   # a real loop drops it too; it must not count as kept memory
    except BaseException:
        recorder.ledger.close()   # no callbacks into a ledger nobody will read
        raise
    finally:
        for h in handles:
            h.remove()
        if buckets is not None:
            buckets.detach()
    graph = recorder.graph
    graph.graph["written_bytes"] = recorder.written   # the step's footprint (devices.footprint)
    ledger = recorder.ledger
    params = list(module.parameters())
    graph.graph["memory"] = step_memory(
        ledger, graph.number_of_nodes(),
        {"parameters": ledger.storage_keys(params),
         "optimizer state": ledger.storage_keys(
             v for st in optimizer.state.values() for v in st.values()),
         "inputs": ledger.storage_keys(tree_flatten(batch)[0]),
         "communication buffers": ledger.storage_keys(buckets.flat if buckets else [])},
        ledger.storage_keys([p.grad for p in params if p.grad is not None]))
    ledger.close()
    if graph.number_of_nodes():
        peak = graph.nodes[graph.graph["memory"].peak_node]
        where = ", ".join(x for x in (peak["phase"], peak["block"]) if x)
        graph.graph["memory"].peak_op = f"{peak['name']} ({where})"
    if buckets is not None:
        # DDP's epilogue (the copies back from the buckets) runs in a callback of the
        # autograd engine, on its thread, after the last node
        engine = [i for i in graph.nodes if graph.nodes[i]["grad_fn"]]
        for i in range(max(engine, default=len(graph)) + 1, len(graph)):
            if graph.nodes[i]["phase"] == "backward":
                graph.nodes[i]["thread"] = "autograd"
    graph.graph.update(device=str(workload.device), batch_size=workload.batch_size,
                       dtype=str(workload.dtype).removeprefix("torch."))
    return graph


def _held_parameters(module) -> list[torch.Tensor]:
    """The parameters a rank keeps in memory: all but other ranks' embedding tables
    (its block of a row-wise table's rows is its own)."""
    shard = module.shard
    foreign = set()
    if shard is not None:
        foreign = {id(w) for nid, kind in module.kinds.items() if kind == "embedding_tables"
                   for w in module.blocks[nid].foreign_weights(shard, nid)}
    return [p for p in module.parameters() if id(p) not in foreign]


_CAPTURES: "OrderedDict[str, nx.DiGraph]" = OrderedDict()
_CAPTURES_LOCK = threading.Lock()
CAPTURE_CACHE_SIZE = 64


def capture_scenario(doc: dict, *, gpu: bool, shard=None) -> nx.DiGraph:
    """:func:`capture_training_step` of a validated scenario (one rank's, with ``shard``),
    reusing a recent capture of the same model, training settings and rank: sweeps over
    platforms and sharding plans capture each distinct step once.  The graph is shared:
    callers must not change it."""

    key = json.dumps([doc["model"], doc["training"], gpu,
                      None if shard is None else [shard.ranks, sorted(shard.local),
                                                  shard.local_batch, shard.global_batch,
                                                  sorted(shard.rowwise),
                                                  sorted(shard.replicated),
                                                  sorted(shard.columns.items()),
                                                  sorted(shard.row_groups.items()),
                                                  # its row blocks differ by rank
                                                  shard.rank if shard.rowwise else None]],
                     sort_keys=True, default=str)
    with _CAPTURES_LOCK:
        graph = _CAPTURES.get(key)
        if graph is not None:
            _CAPTURES.move_to_end(key)
            return graph
    graph = capture_training_step(build_workload(doc, shard=shard), gpu=gpu)
    with _CAPTURES_LOCK:
        _CAPTURES[key] = graph
        while len(_CAPTURES) > CAPTURE_CACHE_SIZE:
            _CAPTURES.popitem(last=False)
    return graph


def _is_view(name: str) -> bool:
    return classify(name) == "view"


def _as_in_a_real_run(graph: nx.DiGraph, i: int) -> bool:
    """Undo what recording itself changes, for op ``i`` as it is recorded (its inputs'
    producers known, and already renamed); True when it was renamed.

    While any dispatch mode is active, ATen's ``isTensorSubclassLike`` answers True, so
    autograd and composite ops take their out-of-place paths.  A real run takes the
    in-place ones (as its profiler shows); rename the ops to match it:

    - gradient accumulation in the autograd engine: ``add`` -> ``add_``;
    - ``aten::linear``'s bias on an N-d input (``mm`` then ``add``): ``add`` -> ``add_``;
    - ``IndexBackward0``: ``index_put`` -> ``_index_put_impl_`` (in place);
    - ``AccumulateGrad`` of a sparse gradient: ``clone`` -> ``_sparse_coo_tensor_unsafe``,
      which wraps the indices and values without copying them.

    Each real-run form writes into (or wraps) the first input.
    """
    nodes = graph.nodes
    n = nodes[i]
    name, ins = n["name"], n["input_shapes"]
    preds = [nodes[p] for p in graph.predecessors(i)]
    real = name
    if name == "aten::add" and len(ins) == 2:
        # The engine adds in place unless the old buffer is a view it cannot steal.
        if (n["phase"] == "backward" and ins[0] == ins[1] and preds
                and n["grad_fn"] != "AddBackward0"
                and not _is_view(preds[0]["name"])):
            real = "aten::add_"
        elif (n["phase"] != "backward" and len(ins[1]) == 1 and preds
              and preds[0]["name"] == "aten::_unsafe_view"):
            real = "aten::add_"
    elif name == "aten::index_put" and n["grad_fn"] == "IndexBackward0":
        real = "aten::_index_put_impl_"
    elif (name == "aten::clone" and n["grad_fn"].endswith("AccumulateGrad")
          and n["input_nnz"] and n["input_nnz"][0] is not None):
        real = "aten::_sparse_coo_tensor_unsafe"
    n["name"] = real
    return real != name


def op_sequence(graph: nx.DiGraph) -> list[str]:
    """The op names of a captured graph in issue order."""
    return [graph.nodes[i]["name"] for i in sorted(graph.nodes)]
