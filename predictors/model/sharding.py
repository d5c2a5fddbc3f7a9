"""Embedding sharding: which rank holds each embedding table, or each table's rows.

A multi-GPU DLRM is hybrid parallel (facebookresearch/dlrm, TorchRec): the dense part is
data parallel over the ranks, the tables are sharded.  *Table-wise*, a table lives whole
on one rank, which looks it up for the global batch and hands each rank its samples in
an all-to-all.  *Row-wise* (TorchRec's RW), every rank holds a contiguous block of the
rows, looks up the global batch's indices that fall in it, and a reduce-scatter sums the
partial bags and hands each rank its samples; a table too big for one GPU can only go
this way.  *Data-parallel* (TorchRec's DP), every rank holds the whole table and looks
up its own samples; the table's gradient is dense and all-reduced with the dense part's,
which suits small tables.  *Column-wise* (TorchRec's CW), the table's dim is cut into
equal shards on several ranks; each shard is looked up like a table-wise table of that
width, and the receiving rank joins the shards' pooled columns after the all-to-all: it
spreads one heavy table's lookups.  *Table-row-wise* (TorchRec's TWRW), the rows are
split over the GPUs of one node only: the partial bags are summed by a reduce-scatter
over the node's fast links, and each sample's sum crosses the network once, in an
all-to-all, where a row-wise table's reduce-scatter spans every node.  A plan maps table
keys (``"<block id>/<table index>"``) to a rank, ``"rw"``, ``"dp"``, a
:class:`ColumnWise` or a :class:`TableRowWise`.  The scenario gives
one (``parallelism.embedding_sharding``) or ``"auto"``; the planners here make
candidates, and :mod:`predictors.plan.rank_sharding` predicts each one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from .index_law import row_block
from .op_classes import ITEMSIZE

ROW_WISE = "rw"   # as predictors.scenario.format.ROW_WISE (imported there without torch)
REPLICATED = "dp"  # as predictors.scenario.format.REPLICATED
KINDS = (ROW_WISE, REPLICATED)   # the values of a plan that are not a rank


@dataclass(frozen=True)
class ColumnWise:
    """A table whose dim is cut into ``len(ranks)`` equal shards, one on each rank."""

    ranks: tuple[int, ...]

    def width(self, dim: int) -> int:
        return dim // len(self.ranks)

    def to_json(self) -> dict:
        return {"kind": "cw", "ranks": list(self.ranks)}


@dataclass(frozen=True)
class TableRowWise:
    """A table whose rows are split over the ranks of one node (``ranks``, consecutive),
    a contiguous block on each."""

    ranks: tuple[int, ...]

    def to_json(self) -> dict:
        return {"kind": "twrw", "ranks": list(self.ranks)}


def is_rank(where) -> bool:
    """Whether a plan's value places its table whole on one rank (table-wise)."""
    return isinstance(where, int) and not isinstance(where, bool)


def holders(where, ranks: int) -> tuple[int, ...]:
    """The ranks that look up some of a table placed at ``where``."""
    if is_rank(where):
        return (where,)
    if isinstance(where, (ColumnWise, TableRowWise)):
        return where.ranks
    return tuple(range(ranks))


def row_group(where, ranks: int) -> tuple[int, ...] | None:
    """The ranks a row-wise or table-row-wise table's rows are split over; None for
    other placements."""
    if where == ROW_WISE:
        return tuple(range(ranks))
    if isinstance(where, TableRowWise):
        return where.ranks
    return None


def placement(value, dim: int | None = None, ranks: int | None = None):
    """A plan value from its JSON (a rank, ``"rw"``, ``"dp"``, or an object
    ``{"kind": "tw", "rank": r}``, ``{"kind": "rw"}``, ``{"kind": "dp"}``,
    ``{"kind": "cw", "ranks": [...]}``, ``{"kind": "twrw", "ranks": [...]}``: a
    table-row-wise table over all the ranks is row-wise); :class:`PlanError` says what
    is wrong, given the table's ``dim`` and the platform's ``ranks``."""
    if isinstance(value, dict):
        kind = value.get("kind")
        if kind in KINDS:
            return kind
        if kind == "tw":
            value = value.get("rank")
        elif kind == "cw":
            on = value.get("ranks")
            if (not isinstance(on, list) or len(on) < 2 or len(set(on)) != len(on)
                    or not all(is_rank(r) and r >= 0 for r in on)):
                raise PlanError(f"a column-wise table needs two or more ranks, one shard "
                                f"on each, got {on!r}")
            if ranks is not None and max(on) >= ranks:
                raise PlanError(f"column-wise ranks {on}: the platform has ranks 0-"
                                f"{ranks - 1}")
            if dim is not None and dim % len(on):
                raise PlanError(f"column-wise over {len(on)} ranks: the dim {dim} does not "
                                f"split into {len(on)} equal shards")
            return ColumnWise(tuple(on))
        elif kind == "twrw":
            on = value.get("ranks")
            if (not isinstance(on, list) or len(on) < 2 or not all(is_rank(r) for r in on)
                    or sorted(on) != list(range(min(on), min(on) + len(on)))):
                raise PlanError(f"a table-row-wise table needs the ranks of one node, two "
                                f"or more consecutive ones, got {on!r}")
            if ranks is not None and (min(on) < 0 or max(on) >= ranks):
                raise PlanError(f"table-row-wise ranks {on}: the platform has ranks 0-"
                                f"{ranks - 1}")
            if ranks is not None and len(on) == ranks:
                return ROW_WISE   # one node: its rows over every rank
            return TableRowWise(tuple(sorted(on)))
        else:
            raise PlanError(f"unknown sharding kind {kind!r} (tw, rw, twrw, cw, dp)")
    if value in KINDS:
        return value
    if not is_rank(value) or value < 0 or (ranks is not None and value >= ranks):
        raise PlanError(f"expected a rank{f' from 0 to {ranks - 1}' if ranks else ''}, "
                        f"'rw', 'dp' or a sharding object, got {value!r}")
    return value


def placement_json(where):
    """A plan value as the scenario and the JSON outputs write it."""
    return where.to_json() if isinstance(where, (ColumnWise, TableRowWise)) else where


__all__ = ["TableRef", "Plan", "PlanError", "ColumnWise", "TableRowWise", "is_rank", "holders",
           "row_group", "check_nodes", "placement",
           "placement_json", "tables_of", "plan_from_scenario", "greedy_plan", "greedy_with_rowwise", "round_robin_plan", "rowwise_plan",
           "candidate_plans", "PLANNERS", "ROW_WISE", "REPLICATED", "KINDS"]


class PlanError(ValueError):
    """A plan that cannot run: unknown tables, ranks out of range, or a rank's memory."""


@dataclass(frozen=True)
class TableRef:
    """One embedding table of the scenario."""

    key: str          # "<block id>/<index>"
    block: str
    index: int
    rows: int
    dim: int
    pooling: int
    distribution: dict
    itemsize: int

    @property
    def bytes(self) -> float:
        """Its weights."""
        return float(self.rows) * self.dim * self.itemsize

    def lookup_bytes(self, batch: int) -> float:
        """The rows one step reads for ``batch`` samples."""
        return float(batch) * self.pooling * self.dim * self.itemsize

    def shard_bytes(self, ranks: int) -> float:
        """One rank's block of its rows when sharded row-wise (the largest block)."""
        return float(math.ceil(self.rows / ranks)) * self.dim * self.itemsize

    def row_shares(self, ranks: int) -> list[float]:
        """Each rank's share of the lookups when sharded row-wise."""
        return [row_block(self.rows, self.distribution, r, ranks)[1] for r in range(ranks)]


@dataclass
class Plan:
    """A placement of every table: on a rank, or row-wise over all of them."""

    name: str
    ranks: int
    assignment: dict[str, int | str]
    how: str = ""
    notes: list[str] = field(default_factory=list)

    def local(self, rank: int) -> frozenset[str]:
        """The tables ``rank`` holds whole, or a column shard of."""
        return frozenset(k for k, r in self.assignment.items()
                         if r == rank or isinstance(r, ColumnWise) and rank in r.ranks)

    @property
    def columns(self) -> dict[str, tuple[int, ...]]:
        """The column-wise tables: key -> the ranks of its shards, in column order."""
        return {k: r.ranks for k, r in self.assignment.items() if isinstance(r, ColumnWise)}

    @property
    def rowwise(self) -> frozenset[str]:
        """The tables whose rows are split over ranks: every rank, or one node's."""
        return frozenset(k for k, r in self.assignment.items()
                         if r == ROW_WISE or isinstance(r, TableRowWise))

    @property
    def row_groups(self) -> dict[str, tuple[int, ...]]:
        """The table-row-wise tables: key -> the ranks of the node holding its rows."""
        return {k: r.ranks for k, r in self.assignment.items() if isinstance(r, TableRowWise)}

    @property
    def replicated(self) -> frozenset[str]:
        """The data-parallel tables: whole on every rank."""
        return frozenset(k for k, r in self.assignment.items() if r == REPLICATED)

    def rank_bytes(self, tables: list[TableRef]) -> list[float]:
        out = [0.0] * self.ranks
        for t in tables:
            where = self.assignment[t.key]
            group = row_group(where, self.ranks)
            if group is not None:
                for r in group:
                    out[r] += t.shard_bytes(len(group))
            elif where == REPLICATED:   # the table and its dense gradient, everywhere
                for r in range(self.ranks):
                    out[r] += 2 * t.bytes
            elif isinstance(where, ColumnWise):
                for r in where.ranks:
                    out[r] += t.bytes / len(where.ranks)
            else:
                out[where] += t.bytes
        return out

    def signature(self, tables: list[TableRef]) -> tuple:
        """What the plan puts together, blind to swaps of identical tables of one block
        and to which rank gets which group, unless a row-wise table makes the ranks
        differ (a Zipf table's hot rows are rank 0's; rows that do not divide leave the
        last block short): two plans with one signature run the same step."""
        groups = [[] for _ in range(self.ranks)]
        rowwise, replicated = [], []
        for t in tables:
            spec = (t.block, t.rows, t.dim, t.pooling, tuple(sorted(t.distribution.items())))
            where = self.assignment[t.key]
            if where == ROW_WISE:
                rowwise.append(spec)
            elif isinstance(where, TableRowWise):   # which node: its ranks differ
                rowwise.append(spec + where.ranks)
            elif where == REPLICATED:
                replicated.append(spec)
            elif isinstance(where, ColumnWise):
                for r in where.ranks:
                    groups[r].append(spec + (len(where.ranks),))
            else:
                groups[where].append(spec)  # each block has its own exchange
        placed = [tuple(sorted(g)) for g in groups]
        uneven = any(self.assignment[t.key] == ROW_WISE and (
            t.distribution["kind"] != "uniform" or t.rows % self.ranks)
            or isinstance(self.assignment[t.key], TableRowWise) for t in tables)
        return (tuple(placed if uneven else sorted(placed)), tuple(sorted(rowwise)),
                tuple(sorted(replicated)))

    def to_json(self) -> dict:
        return {"name": self.name, "how": self.how,
                "assignment": {k: placement_json(v) for k, v in
                               sorted(self.assignment.items(), key=_key_order)}}


def _key_order(item):
    block, _, index = item[0].rpartition("/")
    return block, int(index) if index.isdigit() else 0


def tables_of(doc: dict) -> list[TableRef]:
    """The embedding tables of a validated scenario, in block and table order."""

    itemsize = ITEMSIZE.get(doc["training"]["dtype"], 4)
    return [TableRef(f"{n['id']}/{j}", n["id"], j, int(t["rows"]), int(t["dim"]),
                     int(t["pooling"]), dict(t["distribution"]), itemsize)
            for n in doc["model"]["nodes"] if n["kind"] == "embedding_tables"
            for j, t in enumerate(n["params"]["tables"])]


def check_nodes(plan: Plan, per_node: int) -> None:
    """Raise :class:`PlanError` when a table-row-wise table's ranks are not one node's
    (``per_node`` ranks a node, node after node)."""
    for key, where in plan.assignment.items():
        if isinstance(where, TableRowWise) and (
                len(where.ranks) != per_node or where.ranks[0] % per_node):
            raise PlanError(f"{key}: table-row-wise ranks {list(where.ranks)} are not the "
                            f"ranks of one node (nodes of {per_node}: 0-{per_node - 1}, "
                            f"{per_node}-{2 * per_node - 1}, ...)")


def check_memory(plan: Plan, tables: list[TableRef], memory_bytes: float) -> None:
    """Raise :class:`PlanError` when a rank's tables exceed its device memory."""
    if memory_bytes <= 0:
        return
    for rank, used in enumerate(plan.rank_bytes(tables)):
        if used > memory_bytes:
            held = sorted((t for t in tables
                           if rank in holders(plan.assignment[t.key], plan.ranks)),
                          key=lambda t: -t.bytes)
            raise PlanError(f"rank {rank} would hold {used / 1e9:,.1f} GB of tables "
                            f"({', '.join(t.key for t in held[:3])}"
                            f"{', ...' if len(held) > 3 else ''}), more than its "
                            f"{memory_bytes / 1e9:,.0f} GB")


def greedy_plan(name: str, tables: list[TableRef], ranks: int,
                weight: Callable[[TableRef], float], memory_bytes: float = 0.0,
                fixed: dict[str, int] | None = None, how: str = "",
                by_bytes: bool = False) -> Plan:
    """Longest-processing-time-first: the heaviest table goes to the least loaded rank
    that still has memory for it.  ``fixed`` tables keep their rank (and their load; a
    row-wise one loads each rank by its share of the lookups, or with ``by_bytes``, when
    the weight is a size, evenly)."""
    fixed = dict(fixed or {})
    load, used = [0.0] * ranks, [0.0] * ranks
    by_key = {t.key: t for t in tables}
    for key, rank in fixed.items():
        t = by_key[key]
        group = row_group(rank, ranks)
        if group is not None:   # each rank does its block's share of the lookups
            n = len(group)
            shares = [1.0 / n] * n if by_bytes else t.row_shares(n)
            for r, share in zip(group, shares):
                load[r] += weight(t) * share
                used[r] += t.shard_bytes(n)
        elif rank == REPLICATED:   # every rank looks up its own samples
            for r in range(ranks):
                load[r] += weight(t) / ranks
                used[r] += 2 * t.bytes
        elif isinstance(rank, ColumnWise):   # each shard a share of the width
            for r in rank.ranks:
                load[r] += weight(t) / len(rank.ranks)
                used[r] += t.bytes / len(rank.ranks)
        else:
            load[rank] += weight(t)
            used[rank] += t.bytes
    assignment = dict(fixed)
    for t in sorted((t for t in tables if t.key not in fixed),
                    key=lambda t: (-weight(t), -t.bytes, t.key)):
        order = sorted(range(ranks), key=lambda r: (load[r], used[r], r))
        fits = [r for r in order if memory_bytes <= 0 or used[r] + t.bytes <= memory_bytes]
        if not fits:
            raise PlanError(f"table {t.key} ({t.bytes / 1e9:,.1f} GB) fits on no rank "
                            f"beside the tables placed before it")
        r = fits[0]
        assignment[t.key] = r
        load[r] += weight(t)
        used[r] += t.bytes
    return Plan(name, ranks, assignment, how)


def greedy_with_rowwise(name: str, tables: list[TableRef], ranks: int,
                        weight: Callable[[TableRef], float], memory_bytes: float = 0.0,
                        fixed: dict | None = None, how: str = "",
                        by_bytes: bool = False) -> Plan:
    """:func:`greedy_plan`, except that when the tables do not fit table-wise, the
    largest ones go row-wise (each rank holds a block of their rows) until the rest
    fits: a table bigger than a GPU can only be placed so."""
    fixed = dict(fixed or {})
    for t in sorted(tables, key=lambda t: (-t.bytes, t.key)):
        try:
            return greedy_plan(name, tables, ranks, weight, memory_bytes, fixed, how,
                               by_bytes)
        except PlanError:
            if t.key in fixed:
                continue
            fixed[t.key] = ROW_WISE
    plan = greedy_plan(name, tables, ranks, weight, memory_bytes, fixed, how, by_bytes)
    check_memory(plan, tables, memory_bytes)   # all fixed: nothing was checked placing it
    return plan


def rowwise_plan(tables: list[TableRef], ranks: int) -> Plan:
    return Plan("row-wise", ranks, {t.key: ROW_WISE for t in tables},
                "every table's rows split over all ranks (torchrec's row-wise sharding)")


def round_robin_plan(tables: list[TableRef], ranks: int) -> Plan:
    return Plan("round-robin", ranks, {t.key: i % ranks for i, t in enumerate(tables)},
                "table i on rank i mod ranks (torchrec's naive table-wise placement)")


def plan_from_scenario(doc: dict, tables: list[TableRef], ranks: int,
                       auto: Callable[[], Plan]) -> Plan:
    """The scenario's own plan: an explicit mapping (tables it leaves out are placed by
    size, greedily, around the given ones), or ``auto()`` for ``"auto"``."""
    sharding = doc["parallelism"].get("embedding_sharding", "auto")
    if not isinstance(sharding, dict):
        return auto()
    known = {t.key for t in tables}
    unknown = sorted(set(sharding) - known)
    if unknown:
        raise PlanError(f"parallelism.embedding_sharding names {', '.join(unknown)}, which "
                        f"is no table (keys are '<block id>/<table index>': "
                        f"{', '.join(sorted(known)[:4])}{', ...' if len(known) > 4 else ''})")
    dims = {t.key: t.dim for t in tables}
    given = {}
    for key, value in sharding.items():
        try:
            given[key] = placement(value, dims[key], ranks)
        except PlanError as exc:
            raise PlanError(f"parallelism.embedding_sharding.{key}: {exc}") from None
    plan = greedy_with_rowwise("scenario", tables, ranks, lambda t: t.bytes,
                               fixed=given, by_bytes=True,
                               how="the scenario's parallelism.embedding_sharding")
    missing = len(known) - len(sharding)
    if missing:
        plan.notes.append(f"{missing} table(s) the scenario does not place were placed "
                          f"by size")
    return plan


SMALL_TABLE_BYTES = 1 << 20   # a data-parallel seed replicates the tables this small

PLANNERS = {
    "size": ("greedy by size", lambda t, b: t.bytes,
             "largest table first onto the rank with the fewest bytes"),
    "lookups": ("greedy by lookups", lambda t, b: t.lookup_bytes(b),
                "the most rows read per step first (batch x pooling x dim)"),
}


def candidate_plans(tables: list[TableRef], ranks: int, batch: int,
                    cost: dict[str, float] | None = None,
                    memory_bytes: float = 0.0) -> tuple[list[Plan], list[tuple[str, str]]]:
    """The planners' candidates: greedy by size, by lookups, by predicted kernel time
    (``cost``: seconds per table key, when given; each puts tables row-wise where
    table-wise does not fit), the first of them with the small tables data-parallel,
    round-robin and all row-wise.  Returns the feasible plans,
    distinct, and ``(name, why)`` for the ones that cannot run."""
    plans, refused = [], []
    specs = [(name, lambda t, w=w: w(t, batch), how) for name, w, how in PLANNERS.values()]
    if cost is not None:
        specs.insert(0, ("greedy by kernel time", lambda t: cost.get(t.key, 0.0),
                         "the longest predicted lookup (forward, backward, update) first"))
    for name, weight, how in specs:
        try:
            plans.append(greedy_with_rowwise(name, tables, ranks, weight, memory_bytes,
                                             how=how, by_bytes=name == PLANNERS["size"][0]))
        except PlanError as exc:
            refused.append((name, str(exc)))
    small = {t.key: REPLICATED for t in tables if t.bytes <= SMALL_TABLE_BYTES}
    if small and len(small) < len(tables):
        _, weight, how = specs[0]
        try:
            plans.append(greedy_with_rowwise(
                "small tables data-parallel", tables, ranks, weight, memory_bytes,
                fixed=small, how=f"tables of at most {SMALL_TABLE_BYTES >> 20} MiB on every "
                                 f"rank, the others {how}"))
        except PlanError as exc:
            refused.append(("small tables data-parallel", str(exc)))
    for fixed in (round_robin_plan(tables, ranks), rowwise_plan(tables, ranks)):
        try:
            check_memory(fixed, tables, memory_bytes)
            plans.append(fixed)
        except PlanError as exc:
            refused.append((fixed.name, str(exc)))
    distinct, seen = [], set()
    for p in plans:
        sig = p.signature(tables)
        if sig not in seen:
            seen.add(sig)
            distinct.append(p)
    return distinct, refused
