"""Compile a scenario's block graph into a real ``torch.nn.Module`` and its inputs.

The module follows the reference semantics of design.md, so the same object is captured
on the meta device (prediction) and run on a real device (``measure``).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace

import networkx as nx
import torch
import torch.nn.functional as F
from torch import nn

from ..scenario.format import Issue, ScenarioError, model_graph
from .comm_ops import GradientBuckets, all_to_all, exchange_anchor, reduce_scatter
from .embedding_blocks import (
    EmbeddingTablesBlock,
    FusedEmbeddingTables,
    fused_groups,
    table_inputs,
)
from .index_law import row_block
from .input_pipeline import InputPipeline, pipeline_of

__all__ = ["Workload", "build_workload", "training_step", "BuildError"]

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh}


def BuildError(doc: dict, node_id: str, message: str) -> ScenarioError:
    """A model that validates field by field but cannot be wired (e.g. mismatched widths)."""
    index = next(i for i, n in enumerate(doc["model"]["nodes"]) if n["id"] == node_id)
    return ScenarioError([Issue(f"model.nodes[{index}]", message, node_id)])


# Output descriptions flowing along edges while the graph is compiled.
@dataclass(frozen=True)
class Dense:
    width: int
    final: str | None = None  # activation of the producing MLP's last layer


@dataclass(frozen=True)
class Pooled:
    dims: tuple[int, ...]


@dataclass(frozen=True)
class Tokens:
    hidden: int
    seq_len: int
    vocab: int


@dataclass(frozen=True)
class TokenLogits:
    vocab: int
    seq_len: int


class MLPBlock(nn.Module):
    def __init__(self, in_features: int, layers: list[int], activation: str, final):
        super().__init__()
        mods: list[nn.Module] = []
        for i, width in enumerate(layers):
            mods.append(nn.Linear(in_features, width))
            act = final if i == len(layers) - 1 else activation
            if act is not None:
                mods.append(_ACTIVATIONS[act]())
            in_features = width
        self.net = nn.Sequential(*mods)

    def forward(self, x):
        return self.net(x)


class LowRankCrossNet(nn.Module):
    """DCNv2 low-rank cross layers: x_{l+1} = x0 * (W (V x_l) + b) + x_l (TorchRec)."""

    def __init__(self, width: int, layers: int, rank: int):
        super().__init__()
        self.V = nn.ModuleList(nn.Linear(width, rank, bias=False) for _ in range(layers))
        self.W = nn.ModuleList(nn.Linear(rank, width) for _ in range(layers))

    def forward(self, x0):
        x = x0
        for v, w in zip(self.V, self.W):
            x = x0 * w(v(x)) + x
        return x


class InteractionBlock(nn.Module):
    def __init__(self, op: str, width: int, layers: int, rank: int):
        super().__init__()
        self.op = op
        self.cross = LowRankCrossNet(width, layers, rank) if op == "dcn" else None

    def forward(self, dense: list, pooled: list):
        if self.op == "dot":  # facebookresearch/dlrm interact_features
            x = dense[0]
            batch, d = x.shape
            t = torch.cat([x] + dense[1:] + pooled, dim=1).view((batch, -1, d))
            z = torch.bmm(t, torch.transpose(t, 1, 2))
            n = t.shape[1]
            li, lj = torch.tril_indices(n, n, offset=-1, device=x.device)
            return torch.cat([x, z[:, li, lj]], dim=1)
        out = torch.cat(dense + pooled, dim=1)
        return self.cross(out) if self.cross is not None else out


class TransformerStack(nn.Module):
    def __init__(self, hidden: int, heads: int, ffn: int, count: int, dropout: float):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(hidden, heads, ffn, dropout, activation="gelu",
                                       batch_first=True, norm_first=True)
            for _ in range(count))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class LossBlock(nn.Module):
    def __init__(self, kind: str, source):
        super().__init__()
        self.kind = kind
        # BCE on probabilities after a sigmoid (as dlrm's BCELoss), else on logits.
        self.on_probabilities = isinstance(source, Dense) and source.final == "sigmoid"

    def forward(self, out, target):
        if self.kind == "bce":
            if self.on_probabilities:
                return F.binary_cross_entropy(out, target)
            return F.binary_cross_entropy_with_logits(out, target)
        if self.kind == "mse":
            return F.mse_loss(out, target)
        if out.dim() == 3:
            return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
        return F.cross_entropy(out, target)


@dataclass
class RankShard:
    """What one rank of a hybrid-parallel job runs: its own tables (``local``, keys
    ``"<block id>/<index>"``) for the global batch, then an all-to-all that hands every
    rank its ``local_batch`` samples of every table; its block of the rows of every
    ``rowwise`` table, looked up for the global batch's indices that fall in it, then a
    reduce-scatter of the partial bags; every ``replicated`` (data-parallel) table, looked
    up for its own samples, its gradient dense and all-reduced with the dense part's; the
    dense part sees ``local_batch``."""

    rank: int
    ranks: int
    local: frozenset
    local_batch: int
    global_batch: int
    anchor: torch.Tensor | None = None  # see comm_ops.exchange_anchor
    rowwise: frozenset = frozenset()
    owners: dict | None = None  # table key -> rank, for a real exchange (a run, not a capture)
    replicated: frozenset = frozenset()  # data parallel: on every rank, for its own samples
    # column-wise tables: key -> the ranks of its equal column shards (``local`` holds
    # the key on those ranks); ``dims``: their full dims (set by build_workload)
    columns: dict = field(default_factory=dict)
    dims: dict = field(default_factory=dict)
    # table-row-wise tables (in ``rowwise`` too): key -> the ranks of the node holding
    # their rows; the others' rows are split over every rank
    row_groups: dict = field(default_factory=dict)

    def has(self, nid: str, index: int) -> bool:
        """Whether this rank looks the table up for the global batch (whole, or its
        column shard)."""
        return f"{nid}/{index}" in self.local

    def full_dim(self, nid: str, index: int, dim: int) -> int:
        """A table's dim as the model sees it (a column shard's table: all of it)."""
        return self.dims.get(f"{nid}/{index}", dim)

    def is_rowwise(self, nid: str, index: int) -> bool:
        return f"{nid}/{index}" in self.rowwise

    def is_replicated(self, nid: str, index: int) -> bool:
        return f"{nid}/{index}" in self.replicated

    def row_slot(self, key: str) -> tuple[int, int] | None:
        """``(this rank's block, blocks)`` of a row-wise table; None where a
        table-row-wise table's rows lie on another node."""
        group = self.row_groups.get(key)
        if group is None:
            return self.rank, self.ranks
        return (group.index(self.rank), len(group)) if self.rank in group else None

    def row_block(self, table: dict, key: str = "") -> tuple[int, float]:
        """This rank's rows of a row-wise ``table`` (a contiguous block, as torchrec's
        row-wise sharding cuts them) and the share of the lookups that land in it under
        the table's index distribution (a Zipf table's hot rows are all in the first
        block); none of a table-row-wise table on another node."""
        slot = self.row_slot(key)
        if slot is None:
            return 0, 0.0
        return row_block(int(table["rows"]), table["distribution"], *slot)

    def exchange(self, pooled: list, widths: list[int], keys: list[str]) -> list:
        """This rank's pooled tables out, every table's share of the local batch in
        (``widths`` and ``keys``: every table of the block that is placed whole)."""
        entries, owners = [], []   # a column-wise table sends one entry per shard
        for w, k in zip(widths, keys):
            if k in self.columns:
                on = self.columns[k]
                entries += [self.dims[k] // len(on)] * len(on)
                owners += list(on)
            else:
                entries.append(w)
                owners.append(self.owners[k] if self.owners is not None else -1)
        got = all_to_all(pooled, self.anchor, self.local_batch, entries, owners)
        out, at = [], 0
        for k in keys:   # a column-wise table's shards joined again, in column order
            n = len(self.columns.get(k, (0,)))
            out.append(got[at] if n == 1 else torch.cat(got[at:at + n], dim=1))
            at += n
        return out

    def reduce_scatter(self, partial: list, node: bool = False) -> list:
        """The row-wise tables' partial bags ([global batch, dim]) summed over the ranks,
        each rank keeping its ``local_batch`` samples; ``node``: table-row-wise tables,
        summed over each node, then sent to their samples' ranks (a rank off a
        table's node gives an empty partial)."""

        return reduce_scatter(partial, self.local_batch, node=node)


class ScenarioModel(nn.Module):
    """The whole block graph; ``forward(batch)`` returns the summed loss."""

    def __init__(self, order: list[str], inputs: dict[str, list[str]], kinds: dict[str, str],
                 blocks: dict[str, nn.Module]):
        super().__init__()
        self.order, self.inputs, self.kinds = order, inputs, kinds
        self.blocks = nn.ModuleDict(blocks)
        self.shard: RankShard | None = None  # one rank of a multi-GPU job

    def forward(self, batch: dict):
        values, losses = {}, []
        for nid in self.order:
            kind, srcs = self.kinds[nid], self.inputs[nid]
            if kind == "dense_input":
                values[nid] = batch["dense"][nid]
            elif kind == "embedding_tables":
                block, sparse = self.blocks[nid], batch["sparse"][nid]
                values[nid] = (block(sparse) if self.shard is None
                               else block(sparse, self.shard, nid))
            elif kind == "token_input":
                values[nid] = self.blocks[nid](batch["tokens"][nid])
            elif kind == "interaction":
                dense = [values[s] for s in srcs if not isinstance(values[s], list)]
                pooled = [p for s in srcs if isinstance(values[s], list) for p in values[s]]
                values[nid] = self.blocks[nid](dense, pooled)
            elif kind == "loss":
                losses.append(self.blocks[nid](values[srcs[0]], batch["target"][nid]))
            else:
                values[nid] = self.blocks[nid](values[srcs[0]])
        return losses[0] if len(losses) == 1 else torch.stack(losses).sum()


def _single(graph, nid, outs):
    (src,) = list(graph.predecessors(nid))
    return outs[src]


def _compile(doc: dict, shard: RankShard | None = None):
    """Topologically build each block, tracking what flows along each edge (a fused
    embedding block holds the tables ``shard``'s rank looks up)."""
    graph = model_graph(doc)
    order = list(nx.lexicographical_topological_sort(graph))
    outs, blocks, kinds, inputs, specs = {}, {}, {}, {}, {}
    for nid in order:
        kind, p = graph.nodes[nid]["kind"], graph.nodes[nid]["params"]
        kinds[nid], inputs[nid] = kind, sorted(graph.predecessors(nid), key=order.index)
        ins = [outs[s] for s in inputs[nid]]
        if kind == "dense_input":
            outs[nid], specs[nid] = Dense(p["features"]), p
        elif kind == "embedding_tables":
            dense = ({j for j in range(len(p["tables"])) if shard.is_replicated(nid, j)}
                     if shard is not None else set())
            blocks[nid] = (FusedEmbeddingTables(p["tables"], p["mode"],
                                                fused_groups(p["tables"], nid, shard), dense)
                           if p.get("kernel") == "fused"
                           else EmbeddingTablesBlock(p["tables"], p["mode"], dense))
            outs[nid] = Pooled(tuple(t["dim"] if shard is None else
                                     shard.full_dim(nid, j, t["dim"])
                                     for j, t in enumerate(p["tables"])))
            specs[nid] = p
        elif kind == "token_input":
            nxt = [s for s in graph.successors(nid) if graph.nodes[s]["kind"] ==
                   "transformer_layer"]
            if not nxt:
                raise BuildError(doc, nid, "a token input must feed a transformer layer, which "
                                      "sets its hidden size")
            hidden = graph.nodes[nxt[0]]["params"]["hidden"]
            blocks[nid] = nn.Embedding(p["vocab"], hidden)
            outs[nid], specs[nid] = Tokens(hidden, p["seq_len"], p["vocab"]), p
        elif kind == "mlp":
            src = ins[0]
            if not isinstance(src, Dense):
                raise BuildError(doc, nid, f"an MLP needs a dense [batch, features] input, got "
                                      f"{type(src).__name__.lower()} (add an interaction)")
            blocks[nid] = MLPBlock(src.width, p["layers"], p["activation"], p["final"])
            outs[nid] = Dense(p["layers"][-1], p["final"])
        elif kind == "interaction":
            dense = [s for s in ins if isinstance(s, Dense)]
            pooled = [d for s in ins if isinstance(s, Pooled) for d in s.dims]
            if any(not isinstance(s, (Dense, Pooled)) for s in ins) or not dense:
                raise BuildError(doc, nid, "an interaction takes one dense input (e.g. the bottom "
                                      "MLP) and embedding tables")
            if p["op"] == "dot":
                d = dense[0].width
                bad = [w for w in [s.width for s in dense] + pooled if w != d]
                if bad:
                    raise BuildError(doc, nid, f"dot interaction needs equal widths: the dense "
                                          f"input has {d}, embeddings have {sorted(set(bad))}")
                n = len(dense) + len(pooled)
                width = d + n * (n - 1) // 2
            else:
                width = sum(s.width for s in dense) + sum(pooled)
            blocks[nid] = InteractionBlock(p["op"], width, p["layers"], p["low_rank"])
            outs[nid] = Dense(width)
        elif kind == "transformer_layer":
            src = ins[0]
            if not isinstance(src, Tokens):
                raise BuildError(doc, nid, "a transformer layer needs a token input (or another "
                                      "transformer layer) before it")
            if p["hidden"] % p["heads"]:
                raise BuildError(doc, nid, f"heads ({p['heads']}) must divide hidden "
                                      f"({p['hidden']})")
            if p["hidden"] != src.hidden:
                raise BuildError(doc, nid, f"hidden {p['hidden']} differs from its input's "
                                      f"{src.hidden}")
            blocks[nid] = TransformerStack(p["hidden"], p["heads"], p["ffn"], p["count"],
                                           p["dropout"])
            outs[nid] = src
        elif kind == "lm_head":
            src = ins[0]
            if not isinstance(src, Tokens):
                raise BuildError(doc, nid, "an LM head needs a transformer layer before it")
            blocks[nid] = nn.Linear(src.hidden, src.vocab)
            outs[nid] = TokenLogits(src.vocab, src.seq_len)
        elif kind == "loss":
            src = ins[0]
            if p["kind"] == "cross_entropy" and not isinstance(src, (Dense, TokenLogits)):
                raise BuildError(doc, nid, "cross entropy needs logits")
            if p["kind"] != "cross_entropy" and not isinstance(src, Dense):
                raise BuildError(doc, nid, f"{p['kind']} loss needs a dense output")
            blocks[nid] = LossBlock(p["kind"], src)
            specs[nid] = src
    return order, inputs, kinds, blocks, specs


@dataclass
class Workload:
    """A compiled scenario: the module, its optimizer settings and how to make a batch."""

    doc: dict
    module: ScenarioModel
    specs: dict
    batch_size: int
    dtype: torch.dtype
    lr: float
    device: torch.device
    pipeline: InputPipeline | None = None   # TorchRec's pipeline around the step

    def make_batch(self, seed: int = 0) -> dict:
        """Inputs for one step: random data on CPU-like devices, shapes only on meta."""
        gen = None
        if self.device.type != "meta":
            gen = torch.Generator(device=self.device).manual_seed(seed)
        b, dev, dt = self.batch_size, self.device, self.dtype
        shard = self.module.shard
        if shard is not None:  # the dense part's share; own tables for every sample
            b = shard.local_batch
        batch: dict = {"dense": {}, "sparse": {}, "tokens": {}, "target": {}}
        for nid, kind in self.module.kinds.items():
            spec = self.specs.get(nid)
            if kind == "dense_input":
                batch["dense"][nid] = _randn((b, spec["features"]), dt, dev, gen)
            elif kind == "embedding_tables":
                batch["sparse"][nid] = table_inputs(self.module.blocks[nid], spec["tables"],
                                                    nid, b, shard, dev, gen)
            elif kind == "token_input":
                batch["tokens"][nid] = _randint(spec["vocab"], (b, spec["seq_len"]), dev, gen)
            elif kind == "loss":
                batch["target"][nid] = _target(self.module.blocks[nid].kind, spec, b, dt,
                                               dev, gen)
        return batch

    def optimizer(self, foreach: bool | None = None):
        """The scenario's optimizer: ``sgd``, plain SGD over all parameters (sparse rows
        for the embedding bags); ``adam``/``adamw``/``adagrad``, torch's Adam/AdamW/Adagrad
        over the dense parameters while the embedding bags keep one sparse row update
        each (torch's sparse Adam and Adagrad coalesce, which needs the data; FBGEMM's
        fused lookups apply Adagrad inside their backward, one kernel over the rows the
        step touched).  ``foreach``: torch's choice by default
        (the multi-tensor update where every parameter is on a CUDA device, one op per
        parameter elsewhere or when a gradient is sparse); True makes a meta capture
        record what a GPU runs."""
        params = list(self.module.parameters())
        kind = self.doc["training"].get("optimizer", "sgd")
        if kind == "sgd":
            return torch.optim.SGD(params, lr=self.lr, foreach=foreach)
        sparse_ids = {id(p) for p in sparse_parameters(self.module)}
        dense = [p for p in params if id(p) not in sparse_ids]
        sparse = [p for p in params if id(p) in sparse_ids]
        dense_kind = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW,
                      "adagrad": torch.optim.Adagrad}[kind]
        parts = [dense_kind(dense, lr=self.lr, foreach=foreach)] if dense else []
        if sparse:
            parts.append(torch.optim.SGD(sparse, lr=self.lr, foreach=foreach))
        return parts[0] if len(parts) == 1 else OptimizerGroup(parts)


def sparse_parameters(module: nn.Module) -> list[nn.Parameter]:
    """The embedding tables' weights: their gradients are sparse."""
    return [w for nid, kind in module.kinds.items() if kind == "embedding_tables"
            for w in module.blocks[nid].sparse_weights()]


def replicated_parameters(module: nn.Module) -> list[nn.Parameter]:
    """The data-parallel embedding tables' weights (dense gradients, all-reduced)."""
    return [w for nid, kind in module.kinds.items() if kind == "embedding_tables"
            for w in module.blocks[nid].dense_weights()]


def gradient_buckets(module: nn.Module, world: int):
    """DDP's all-reduce of every dense gradient of a rank's ``module``: the dense part in
    buckets during backward, the data-parallel tables when it ends."""
    sparse = {id(p) for p in sparse_parameters(module)}
    late = replicated_parameters(module)
    skip = sparse | {id(p) for p in late}
    return GradientBuckets([p for p in module.parameters() if id(p) not in skip], world, late)


class OptimizerGroup:
    """Several optimizers stepped as one (dense Adam beside the tables' sparse SGD)."""

    def __init__(self, parts: list[torch.optim.Optimizer]):
        self.parts = parts

    @property
    def param_groups(self) -> list[dict]:
        return [g for p in self.parts for g in p.param_groups]

    @property
    def state(self) -> dict:
        return {k: v for p in self.parts for k, v in p.state.items()}

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parts:
            p.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        for p in self.parts:
            p.step()


def _randn(shape, dtype, device, gen):
    if gen is None:
        return torch.empty(shape, dtype=dtype, device=device)
    return torch.randn(shape, generator=gen, device=device).to(dtype)


def _randint(high, shape, device, gen):
    if gen is None:
        return torch.empty(shape, dtype=torch.long, device=device)
    return torch.randint(0, high, shape, generator=gen, device=device)


def _target(kind: str, source, batch: int, dtype, device, gen):
    if kind == "cross_entropy":
        if isinstance(source, TokenLogits):
            return _randint(source.vocab, (batch, source.seq_len), device, gen)
        return _randint(source.width, (batch,), device, gen)
    shape = (batch, source.width)
    if gen is None:
        return torch.empty(shape, dtype=dtype, device=device)
    return torch.randint(0, 2, shape, generator=gen, device=device).to(dtype)


def _cut_rowwise(doc: dict, shard: RankShard) -> dict:
    """``doc`` with each row-wise table cut to ``shard``'s block: its rows, and its
    lookups per sample (the share that lands in the block; a fraction)."""
    doc = copy.deepcopy(doc)
    for node in doc["model"]["nodes"]:
        if node["kind"] != "embedding_tables":
            continue
        for j, table in enumerate(node["params"]["tables"]):
            if shard.is_rowwise(node["id"], j):
                key = f"{node['id']}/{j}"
                rows, share = shard.row_block(table, key)
                table["rows"] = max(1, rows)   # a table with fewer rows than ranks
                table["pooling"] = table["pooling"] * share
                slot = shard.row_slot(key)
                if slot is None or slot[0] > 0:
                    # past the first block a Zipf table's tail is nearly flat: priced as
                    # uniform (its L2 hot set is the first block's)
                    table["distribution"] = {"kind": "uniform"}
    return doc


def _table_dims(doc: dict, keys) -> dict[str, int]:
    return {f"{n['id']}/{j}": int(t["dim"]) for n in doc["model"]["nodes"]
            if n["kind"] == "embedding_tables" for j, t in enumerate(n["params"]["tables"])
            if f"{n['id']}/{j}" in keys}


def _cut_columns(doc: dict, shard: RankShard) -> dict:
    """``doc`` with each column-wise table this rank holds a shard of cut to the
    shard's width."""
    doc = copy.deepcopy(doc)
    for node in doc["model"]["nodes"]:
        if node["kind"] != "embedding_tables":
            continue
        for j, table in enumerate(node["params"]["tables"]):
            key = f"{node['id']}/{j}"
            if key in shard.columns and shard.has(node["id"], j):
                table["dim"] = int(table["dim"]) // len(shard.columns[key])
    return doc


def build_workload(doc: dict, device: str | torch.device = "meta",
                   fast_init: bool = False, shard: RankShard | None = None) -> Workload:
    """Compile a validated scenario into a module on ``device`` (meta: no memory).

    ``fast_init`` fills embedding tables with a constant instead of N(0, 1) samples: the
    step time is the same, and building a few GB of tables takes a fraction of the time.
    ``shard``: the module runs one rank of a multi-GPU job (capture only, on meta).
    """
    device = torch.device(device)
    dtype = _DTYPES[doc["training"]["dtype"]]
    pipeline = (pipeline_of(doc, shard)
                if doc["training"].get("input_pipeline") == "torchrec" else None)
    if shard is not None and shard.rowwise:
        doc = _cut_rowwise(doc, shard)
    if shard is not None and shard.columns:
        shard = replace(shard, dims=_table_dims(doc, shard.columns))
        doc = _cut_columns(doc, shard)
    EmbeddingTablesBlock.fast_init = fast_init
    try:
        with torch.device(device):  # parameters are born on the device: none on meta
            order, inputs, kinds, blocks, specs = _compile(doc, shard)
            module = ScenarioModel(order, inputs, kinds, blocks)
    finally:
        EmbeddingTablesBlock.fast_init = False
    module.to(device=device, dtype=dtype)
    if shard is not None:
        shard = replace(shard, anchor=exchange_anchor(dtype, device))
    module.shard = shard
    return Workload(doc, module, specs, doc["training"]["batch_size"], dtype,
                    doc["training"]["lr"], device, pipeline)


def training_step(module: nn.Module, batch: dict, optimizer: torch.optim.Optimizer):
    """One reference training step: forward, loss, backward, optimizer step."""
    optimizer.zero_grad(set_to_none=True)
    loss = module(batch)
    loss.backward()
    optimizer.step()
    return loss
