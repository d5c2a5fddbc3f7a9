"""An ``embedding_tables`` block as torch runs it, and the index batches it looks up.

Two kernels, the block's ``kernel`` parameter:

- ``per_table`` (design.md's reference, as facebookresearch/dlrm): one ``EmbeddingBag``
  per table, each its own lookup, sparse gradient and sparse update.
- ``fused`` (as TorchRec runs tables with FBGEMM's table-batched embedding): the tables a
  rank looks up, grouped by dim (and apart: whole tables, row-wise blocks), share one
  weight, their rows stacked.  A group is one ``embedding_bag`` call over indices the
  data loader already offset to each table's rows (TBE adds those offsets in its kernel),
  one sparse gradient and one sparse update.  The output ([tables x batch, dim]) is
  split into the tables' pooled views, as TorchRec splits TBE's.

Both give the same pooled tensors to the rest of the model, and both run for real on any
device and on meta.
"""
from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["EmbeddingTablesBlock", "FusedEmbeddingTables", "bag_input",
           "rowwise_input", "table_inputs", "lookup_specs", "fused_groups", "per_table_doc",
           "with_kernel"]


class EmbeddingTablesBlock(nn.Module):
    """One ``EmbeddingBag`` per table (the ``per_table`` kernel)."""

    fast_init = False  # set while building for timing runs: values do not change the time

    def __init__(self, tables: list[dict], mode: str, dense: set[int] = frozenset()):
        super().__init__()
        self.dims = [t["dim"] for t in tables]
        self.dense = set(dense)   # data-parallel tables: dense gradients, all-reduced
        self.bags = nn.ModuleList(
            nn.EmbeddingBag(t["rows"], t["dim"], mode=mode, sparse=j not in self.dense,
                            _weight=_table_weight(t["rows"], t["dim"], self.fast_init))
            for j, t in enumerate(tables))

    def sparse_weights(self) -> list[nn.Parameter]:
        """The weights whose gradients are sparse."""
        return [bag.weight for j, bag in enumerate(self.bags) if j not in self.dense]

    def dense_weights(self) -> list[nn.Parameter]:
        """The data-parallel tables' weights (dense gradients)."""
        return [bag.weight for j, bag in enumerate(self.bags) if j in self.dense]

    def foreign_weights(self, shard, nid: str) -> list[nn.Parameter]:
        """The weights of tables another rank holds (built on every rank, never read)."""
        return [bag.weight for j, bag in enumerate(self.bags)
                if not (shard.has(nid, j) or shard.is_rowwise(nid, j)
                        or shard.is_replicated(nid, j))]

    def look_up(self, sparse: list, tables: list[int]) -> list[torch.Tensor]:
        """The pooled embeddings of ``tables`` (indices into the block's tables)."""
        return [self.bags[j](*sparse[j]) for j in tables]

    def forward(self, sparse, shard=None, nid: str = ""):
        if shard is None:
            return self.look_up(sparse, list(range(len(self.dims))))
        # one rank of a sharded job: its own tables, then the exchange; its rows of the
        # row-wise tables, then their reduce-scatter
        out: list = [None] * len(self.dims)
        rowwise = [j for j in range(len(self.dims)) if shard.is_rowwise(nid, j)]
        replicated = [j for j in range(len(self.dims)) if shard.is_replicated(nid, j)]
        whole = [j for j in range(len(self.dims)) if j not in rowwise and j not in replicated]
        if whole:
            mine = self.look_up(sparse, [j for j in whole if shard.has(nid, j)])
            got = shard.exchange(mine, [self.dims[j] for j in whole],
                                 [f"{nid}/{j}" for j in whole])
            for j, pooled in zip(whole, got):
                out[j] = pooled
        nodes = [j for j in rowwise if f"{nid}/{j}" in shard.row_groups]
        spread = [j for j in rowwise if j not in nodes]
        if spread:
            got = shard.reduce_scatter(self.look_up(sparse, spread))
            for j, pooled in zip(spread, got):
                out[j] = pooled
        if nodes:   # table-row-wise: this node's tables looked up, the others' empty
            mine = [j for j in nodes if shard.row_slot(f"{nid}/{j}") is not None]
            looked = dict(zip(mine, self.look_up(sparse, mine)))
            # another node's table: an empty partial, in autograd's graph through the
            # anchor so that this rank takes part in the backward exchange too
            partial = [looked[j] if j in looked
                       else shard.anchor.view(0, 1).expand(0, self.dims[j])
                       for j in nodes]
            for j, pooled in zip(nodes, shard.reduce_scatter(partial, node=True)):
                out[j] = pooled
        if replicated:   # this rank's own samples, no exchange
            for j, pooled in zip(replicated, self.look_up(sparse, replicated)):
                out[j] = pooled
        return out


class FusedEmbeddingTables(EmbeddingTablesBlock):
    """The ``fused`` kernel: one weight and one lookup per group of :func:`fused_groups`."""

    def __init__(self, tables: list[dict], mode: str, groups: list[list[int]],
                 dense: set[int] = frozenset()):
        nn.Module.__init__(self)
        self.dims, self.mode, self.groups = [t["dim"] for t in tables], mode, groups
        self.dense = set(dense)   # a group of data-parallel tables is all dense
        self.weights = nn.ParameterList(
            nn.Parameter(_table_weight(sum(tables[j]["rows"] for j in g), tables[g[0]]["dim"],
                                       self.fast_init)) for g in groups)

    def sparse_weights(self) -> list[nn.Parameter]:
        return [w for g, w in zip(self.groups, self.weights) if g[0] not in self.dense]

    def dense_weights(self) -> list[nn.Parameter]:
        return [w for g, w in zip(self.groups, self.weights) if g[0] in self.dense]

    def foreign_weights(self, shard, nid: str) -> list[nn.Parameter]:
        return []   # a rank's groups hold its own tables only

    def look_up(self, sparse: list, tables: list[int]) -> list[torch.Tensor]:
        pooled: dict[int, torch.Tensor] = {}
        for g, weight, (indices, offsets) in zip(self.groups, self.weights, sparse):
            if not set(g) & set(tables):
                continue
            out = F.embedding_bag(indices, weight, offsets, mode=self.mode,
                                  sparse=g[0] not in self.dense)
            pooled.update(zip(g, out.view(len(g), -1, weight.shape[1]).unbind(0)))
        return [pooled[j] for j in tables]


def fused_groups(tables: list[dict], nid: str, shard=None) -> list[list[int]]:
    """The tables (indices) that share one fused lookup: those this rank looks up, whole
    ones, row-wise blocks and data-parallel tables apart (different batches of indices),
    by dim; in that order, each kind by dim, whichever tables a rank holds."""
    groups: dict[tuple, list[int]] = {}
    for j, t in enumerate(tables):
        if shard is None or shard.has(nid, j):
            how = 0          # whole
        elif shard.is_rowwise(nid, j) and f"{nid}/{j}" in shard.row_groups:
            if shard.row_slot(f"{nid}/{j}") is None:
                continue     # a table-row-wise table of another node
            how = 3          # a block of a table-row-wise table's rows (its own exchange)
        elif shard.is_rowwise(nid, j):
            how = 1          # a block of a row-wise table's rows
        elif shard.is_replicated(nid, j):
            how = 2          # data parallel: its own samples
        else:
            continue
        groups.setdefault((how, t["dim"]), []).append(j)
    return [groups[key] for key in sorted(groups)]


def with_kernel(doc: dict, kernel: str) -> dict:
    """A copy of scenario ``doc`` with every embedding block on ``kernel``."""
    out = copy.deepcopy(doc)
    for node in out["model"]["nodes"]:
        if node["kind"] == "embedding_tables":
            node["params"]["kernel"] = kernel
    return out


def per_table_doc(doc: dict) -> dict:
    """``doc`` with every embedding block on the per-table kernel (``doc`` itself when
    none is fused): per-table costs, for the sharding planners."""
    fused = any(n["kind"] == "embedding_tables" and n["params"].get("kernel") == "fused"
                for n in doc["model"]["nodes"])
    return with_kernel(doc, "per_table") if fused else doc


def _table_weight(rows: int, dim: int, fast_init: bool) -> torch.Tensor:
    # Pass the weight in: on meta, normal_() would route through torch._refs and cost
    # seconds on first use; real devices get EmbeddingBag's N(0, 1) init.
    weight = torch.empty(rows, dim)
    if weight.device.type != "meta":
        # fill_ touches every page like normal_ does, at memset speed
        weight.fill_(0.01) if fast_init else nn.init.normal_(weight)
    return weight


def _lookups(table: dict, batch: int, rowwise: bool) -> int:
    """How many indices ``batch`` bags of ``table`` look up (a row-wise block's pooling is
    a fraction: its share of the table's lookups)."""
    return int(round(batch * table["pooling"])) if rowwise else batch * table["pooling"]


def bag_input(table: dict, batch: int, device, gen):
    """Indices and offsets of a fixed-pooling EmbeddingBag lookup (shapes only on meta,
    ``gen`` None)."""
    n = _lookups(table, batch, False)
    offsets = torch.arange(0, n, table["pooling"], dtype=torch.long, device=device)
    if gen is None:
        return torch.empty(n, dtype=torch.long, device=device), offsets
    dist, rows = table["distribution"], table["rows"]
    if dist["kind"] == "uniform":
        return torch.randint(0, rows, (n,), generator=gen, device=device), offsets
    # Zipf ranks truncated to the table: inverse CDF of the continuous power law on
    # [1, rows + 1), floored (exact for the tail; avoids a rows-long weight vector).
    a = float(dist["alpha"])
    u = torch.rand(n, generator=gen, device=device, dtype=torch.float64)
    top = float(rows + 1)
    if abs(a - 1.0) < 1e-9:
        x = torch.exp(u * math.log(top))
    else:
        x = (1 + u * (top ** (1 - a) - 1)) ** (1 / (1 - a))
    return (x.floor().long() - 1).clamp_(0, rows - 1), offsets


def rowwise_input(table: dict, batch: int, device, gen):
    """Indices and offsets of one rank's block of a row-wise table (``table`` already
    cut to it by ``build_workload``: its rows, and its lookups per sample, a fraction):
    the block's share of the global batch's lookups, in ``batch`` bags."""
    n = _lookups(table, batch, True)
    # bags of (nearly) equal size
    offsets = torch.arange(batch, dtype=torch.long, device=device) * n // max(1, batch)
    if gen is None:
        return torch.empty(n, dtype=torch.long, device=device), offsets
    return torch.randint(0, table["rows"], (n,), generator=gen, device=device), offsets


def _per_table(tables: list[dict], nid: str, batch: int, shard, device, gen) -> list:
    """Each table's (indices, offsets): None for another rank's table."""
    if shard is None:
        return [bag_input(t, batch, device, gen) for t in tables]
    return [bag_input(t, shard.global_batch, device, gen) if shard.has(nid, j)
            else rowwise_input(t, shard.global_batch, device, gen) if shard.is_rowwise(nid, j)
            else bag_input(t, shard.local_batch, device, gen) if shard.is_replicated(nid, j)
            else None for j, t in enumerate(tables)]


def table_inputs(block: EmbeddingTablesBlock, tables: list[dict], nid: str, batch: int,
                 shard, device, gen) -> list:
    """One step's index batches of ``block``: per table, or per fused group (the
    tables' indices offset to their rows in the group's weight, then concatenated)."""
    per_table = _per_table(tables, nid, batch, shard, device, gen)
    if not isinstance(block, FusedEmbeddingTables):
        return per_table
    out = []
    for g in block.groups:
        indices, offsets, row, start = [], [], 0, 0
        for j in g:
            idx, off = per_table[j]
            indices.append(idx if gen is None else idx + row)
            offsets.append(off + start)
            row, start = row + tables[j]["rows"], start + idx.shape[0]
        out.append((torch.cat(indices), torch.cat(offsets)))
    return out


def lookup_specs(block: EmbeddingTablesBlock, tables: list[dict], nid: str, batch: int,
                 shard) -> list[dict | None]:
    """What each of :func:`table_inputs`' index batches looks up, for the capture:
    the table (rows, dim, pooling, distribution and its key ``"<block>/<index>"``), or
    for a fused group its tables as ``parts`` (each with its ``lookups`` and ``bags``)."""
    specs = [dict(t, table=f"{nid}/{j}") for j, t in enumerate(tables)]
    if not isinstance(block, FusedEmbeddingTables):
        return [s if shard is None or shard.has(nid, j) or shard.is_rowwise(nid, j)
                or shard.is_replicated(nid, j) else None for j, s in enumerate(specs)]
    out = []
    for g in block.groups:
        rowwise = shard is not None and shard.is_rowwise(nid, g[0])
        bags = (batch if shard is None else shard.local_batch
                if shard.is_replicated(nid, g[0]) else shard.global_batch)
        parts = [dict(specs[j], lookups=_lookups(tables[j], bags, rowwise), bags=bags)
                 for j in g]
        out.append({"table": ", ".join(p["table"] for p in parts), "parts": parts,
                    "rows": sum(p["rows"] for p in parts), "dim": parts[0]["dim"],
                    "pooling": sum(p["lookups"] for p in parts) / (bags * len(g))})
    return out
