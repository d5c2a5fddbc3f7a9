"""Many sharding plans simulated at once, from per-table costs and one captured graph.

A rank's step under a plan differs from its step under another plan only in its fused
lookups (one per embedding dim, :func:`~predictors.model.embedding_blocks.fused_groups`)
and in the size of its all-to-all.  So :class:`PlanEvaluator` captures, once per set of
row-wise tables, a *template* rank that holds every other table: every lookup group is
there, each with all of its dim's tables.  A plan's rank is that template with

- each group's kernels priced for the tables the rank holds: the same per-table costs
  the capture path folds (:func:`~predictors.costs.fused_lookups.fused_seconds`), a bag
  forward at the reuse distance the rank's other tables give it;
- the groups it holds none of absent (they take no time and launch nothing);
- its all-to-all sized by the widths of its own tables.

A column-wise table is a whole table of its shards' width, held by several ranks: the
template of a set of column-wise tables (and their shard counts) captures the shards'
width and the joins of their columns after the exchange.

A batch of plans then goes through the simulator's batch walk
(:func:`~predictors.engine.simulator.simulate_batch`): every rank, its CPU threads, its
streams and the collectives' rendezvous, as :meth:`RankGraphs.rank_spans_ms` simulates one
plan from a captured graph per rank; a test checks that the two agree.
"""
from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce

import numpy as np

from ..costs.fused_lookups import split_fused
from ..costs.op_costs import CostedGraph, cost_op_graph, kernel_seconds
from ..model.comm_ops import COLLECTIVE_OPS
from ..model.sharding import ColumnWise, Plan, TableRowWise, holders, is_rank
from .parallel import RankGraphs, collective_timer
from .simulate import rank_items
from .simulator import Call, Item, simulate_batch

__all__ = ["PlanEvaluator", "Unsupported", "plan_spans"]

_US = 1e6
_EXCHANGE = ("mldse::all_to_all", "mldse::all_to_all_backward")


class Unsupported(ValueError):
    """A scenario whose plans the evaluator cannot compose (the capture path can)."""


@dataclass
class _SlotOp:
    """A template op that belongs to one lookup group (slot)."""

    item: int                          # its item (position in the rank's program)
    slot: int
    seconds: np.ndarray | None = None  # per table of the slot: its part of the kernel
    terms: np.ndarray | None = None    # per table: bag forward terms (5 columns)
    own: np.ndarray | None = None      # per table: bytes its bag forward touches
    stacked: dict | None = None        # a stack over the group's outputs: node, cost by k


@dataclass
class _Rank:
    """One template rank: its program and what a plan changes in it."""

    items: list[Item]
    slot_ops: list[_SlotOp]
    exchange: list[int] = field(default_factory=list)  # items of the all-to-alls


@dataclass
class _Template:
    rowwise: frozenset
    replicated: frozenset
    columns: dict                               # column-wise key -> shard count
    width: np.ndarray                           # per table: bytes a holder sends a sample
    ranks: list[_Rank]
    slots: list[tuple[str, tuple[int, ...]]]   # per slot: kind, table positions
    touched: np.ndarray                         # per table: bytes its bag forward touches
    rw_touched: np.ndarray                      # per rank: bytes of its row-wise blocks
                                                # and data-parallel tables
    # per rank, its program when it holds no table at all (table-row-wise tables make
    # the ranks' exchanges differ; without them every rank's is the same)
    empty: dict[int, _Rank] = field(default_factory=dict)


class PlanEvaluator:
    """Each rank's iteration under many plans of one :class:`RankGraphs`' scenario."""

    def __init__(self, graphs: RankGraphs):
        self.graphs = graphs
        self.tables = graphs.tables
        self.ranks = graphs.ranks
        self.position = {t.key: i for i, t in enumerate(self.tables)}
        self.timer = collective_timer(graphs.platform, graphs.profile)
        self._templates: dict[frozenset, _Template] = {}
        self._stack_cost: dict[tuple, float] = {}
        if graphs.platform.device == "cpu":
            # a CPU step's costs scale with its whole footprint (costs/op_costs.py)
            raise Unsupported("plans on the CPU are simulated from captured graphs")
        self.width = np.array([t.dim * t.itemsize for t in self.tables], dtype=float)

    @property
    def templates(self) -> int:
        """How many template ranks were captured (one per set of kinds)."""
        return len(self._templates)

    # -- templates ---------------------------------------------------------------------

    def template(self, rowwise: frozenset, replicated: frozenset = frozenset(),
                 columns: frozenset = frozenset(), groups: frozenset = frozenset()
                 ) -> _Template:
        """The template of a set of row-wise, data-parallel and column-wise tables
        (``columns``: (key, shard count) pairs; ``groups``: (key, node's ranks) pairs of
        the table-row-wise ones among ``rowwise``)."""
        key = (rowwise, replicated, columns, groups)
        hit = self._templates.get(key)
        if hit is None:
            hit = self._templates[key] = self._build(rowwise, replicated, dict(columns),
                                                     dict(groups))
        return hit

    def _build(self, rowwise: frozenset, replicated: frozenset, shards: dict,
               groups: dict | None = None) -> _Template:
        g = self.graphs
        whole = frozenset(t.key for t in self.tables) - rowwise - replicated
        # the template holds a shard of each column-wise table: which ranks do not matter
        columns = {k: tuple(range(n)) for k, n in shards.items()}
        width = self.width.copy()
        for k, n in shards.items():
            width[self.position[k]] /= n
        ranks = range(self.ranks) if rowwise else range(1)  # whole tables: ranks alike
        slots: dict[tuple[str, str], int] = {}
        slot_list: list[tuple[str, tuple[int, ...]]] = []
        touched = np.zeros(len(self.tables))
        rw_touched = np.zeros(self.ranks)
        out = []
        for r in ranks:
            graph = g.capture(whole, r, rowwise, replicated, columns, groups)
            costed = cost_op_graph(graph, g.platform, g.profile, g.overheads)
            rank, t_rw = self._template_rank(graph, costed, slots, slot_list, touched,
                                             rowwise, replicated)
            rw_touched[r] = t_rw
            out.append(rank)
        # without sparse parameters the optimizer steps the dense ones together
        # (foreach): a rank with no table of its own is a step of its own; with
        # table-row-wise tables only, a rank off their nodes may hold nothing
        if not rowwise:
            out = out * self.ranks
            rw_touched[:] = rw_touched[0]
            idle = {0: range(self.ranks)}
        elif groups and not rowwise - set(groups):
            members = {r for on in groups.values() for r in on}
            idle = {r: (r,) for r in set(ranks) - members}
        else:
            idle = {}
        empty = {}
        for r, alike in idle.items():
            graph = g.capture(frozenset(), r, rowwise, replicated, columns, groups)
            program, _ = self._template_rank(graph, cost_op_graph(
                graph, g.platform, g.profile, g.overheads), slots, slot_list,
                np.zeros_like(touched), rowwise, replicated)
            empty.update(dict.fromkeys(alike, program))
        return _Template(rowwise, replicated, shards, width, out, slot_list, touched,
                         rw_touched, empty)

    def _template_rank(self, graph, costed: CostedGraph, slots, slot_list, touched,
                       rowwise, replicated) -> tuple[_Rank, float]:
        items = rank_items(costed)
        at = {op.index: n + 1 for n, op in enumerate(costed.ops)}  # op index -> item
        nodes = {i: graph.nodes[i] for i in graph.nodes}
        device, profile = costed.device, self.graphs.profile
        embedding = next((m for m in (profile.kernel_models.values() if profile else ())
                          if hasattr(m, "forward_terms")), None)
        slot_of: dict[int, int] = {}
        slot_ops: list[_SlotOp] = []
        rw_bytes = 0.0
        for op in costed.ops:
            if not op.table:
                continue
            keys = op.table.split(", ")
            kind = ("rowwise" if keys[0] in rowwise else "replicated" if keys[0] in replicated
                    else "whole")
            key = (kind, tuple(sorted(self.position[k] for k in keys)))
            if key not in slots:
                slots[key] = len(slot_list)
                slot_list.append(key)
            slot = slot_of[op.index] = slots[key]
            node = nodes[op.index]
            parts = split_fused(node) or [node]
            if len(parts) != len(keys):
                raise Unsupported(f"{op.name} of {op.table}: {len(parts)} parts")
            if op.kernel_s <= 0.0:
                slot_ops.append(_SlotOp(at[op.index], slot))
                continue
            _, secs, models = kernel_seconds(parts, device, profile)
            so = _SlotOp(at[op.index], slot, seconds=np.array(secs, dtype=float))
            if embedding is not None and all(m.startswith("embedding") for m in models):
                terms = [embedding.forward_terms(p) for p in parts]
                if all(t is not None for t in terms):
                    so.terms = np.array(terms, dtype=float) * 1e-3  # ms -> s
                    # each rank's bag forwards, with what they touch (the reuse distance)
                    part_bytes = embedding.touched_bytes(parts)
                    so.own = np.array([part_bytes.get(j, 0.0) for j in range(len(parts))])
                    for j, k in enumerate(keys):
                        if kind == "whole":
                            touched[self.position[k]] = part_bytes.get(j, 0.0)
                        else:   # a row-wise block, or a data-parallel table
                            rw_bytes += part_bytes.get(j, 0.0)
            slot_ops.append(so)
        self._embedding, self._device = embedding, device
        self._step_s = costed.overheads.step_s
        # ops of a group that carry no table: views of its tensors, and the stack of its
        # output gradients (its cost grows with the group's tables)
        succ: dict[int, list[int]] = {}
        for op in costed.ops:
            for d in op.deps:
                succ.setdefault(d, []).append(op.index)
        by_index = {op.index: op for op in costed.ops}
        for op in costed.ops:
            if op.index in slot_of or op.table or op.category == "communication":
                continue
            if op.kernel_s > 0.0:
                near = {slot_of[s2] for s in succ.get(op.index, ())
                        for s2 in [s] + succ.get(s, []) if s2 in slot_of}
                direct = succ.get(op.index, [])
                # a group's op feeds that group only, directly or through views
                into_group = all(s in slot_of or (by_index[s].kernel_s <= 0.0 and succ.get(s)
                                                  and all(s2 in slot_of for s2 in succ[s]))
                                 for s in direct)
                if len(near) == 1 and direct and into_group:
                    if op.name != "aten::stack":
                        raise Unsupported(f"{op.name} in a lookup group")
                    slot = slot_of[op.index] = near.pop()
                    slot_ops.append(_SlotOp(at[op.index], slot,
                                            stacked={"node": nodes[op.index]}))
        for op in costed.ops:   # views take their producer's group
            if op.index in slot_of or op.kernel_s > 0.0 or op.category == "communication":
                continue
            owner = next((slot_of[d] for d in op.deps if d in slot_of), None)
            if owner is not None:
                slot_of[op.index] = owner
                slot_ops.append(_SlotOp(at[op.index], owner))
        exchange = [at[op.index] for op in costed.ops if op.name in _EXCHANGE]
        return _Rank(items, slot_ops, exchange), rw_bytes

    def _stack_seconds(self, node: dict, k: int) -> float:
        key = (id(node), k)
        hit = self._stack_cost.get(key)
        if hit is None:
            one = node["input_shapes"][0]
            dtype = node["input_dtypes"][0]
            out = {**node, "input_shapes": [one] * k, "input_dtypes": [dtype] * k,
                   "input_nnz": [None] * k, "output_shapes": [[k, *one]]}
            _, secs, _ = kernel_seconds([out], self._device, self.graphs.profile)
            hit = self._stack_cost[key] = float(secs[0])
        return hit

    # -- plans -------------------------------------------------------------------------

    def spans_ms(self, plans: list[Plan]) -> np.ndarray:
        """Each rank's iteration (ms) under each plan: an array [plan, rank].  Plans are
        simulated in batches of the same row-wise tables."""
        out = np.zeros((len(plans), self.ranks))
        batches: dict[tuple, list[int]] = {}
        for i, p in enumerate(plans):
            rowwise, replicated = p.rowwise, p.replicated
            columns = frozenset((k, len(on)) for k, on in p.columns.items())
            groups = frozenset(p.row_groups.items())
            # a rank with no sparse table steps its dense parameters together: a program
            # of its own
            busy = {r for w in p.assignment.values()
                    if is_rank(w) or isinstance(w, (ColumnWise, TableRowWise))
                    for r in holders(w, p.ranks)}
            spread = rowwise - set(p.row_groups)   # row-wise over every rank: none idle
            idle = () if spread else tuple(sorted(set(range(self.ranks)) - busy))
            batches.setdefault((rowwise, replicated, columns, groups, idle), []).append(i)
        for (rowwise, replicated, columns, groups, idle), idx in batches.items():
            out[idx] = self._batch([plans[i] for i in idx],
                                   self.template(rowwise, replicated, columns, groups), idle)
        return out

    def _batch(self, plans: list[Plan], tpl: _Template, idle: tuple = ()) -> np.ndarray:
        n_plans, n_tables = len(plans), len(self.tables)
        holds = np.zeros((self.ranks, n_plans, n_tables), dtype=bool)
        for i, p in enumerate(plans):
            for key, where in p.assignment.items():
                if is_rank(where) or isinstance(where, ColumnWise):
                    holds[list(holders(where, p.ranks)), i, self.position[key]] = True
        floor = self._device.kernel_floor_s
        share = self._share_l2()
        programs, absent = [], []
        sent = np.zeros((n_plans, self.ranks))
        ranks = [tpl.empty[r] if r in idle else rank for r, rank in enumerate(tpl.ranks)]
        for r, rank in enumerate(ranks):
            held = holds[r]                                     # [plan, table]
            sent[:, r] = (held * tpl.width).sum(axis=1)
            total = (held * tpl.touched).sum(axis=1) + tpl.rw_touched[r]
            items = list(rank.items)
            gone: dict[int, np.ndarray] = {}
            counts = {}
            for so in rank.slot_ops:
                kind, members = tpl.slots[so.slot]
                cols = list(members)
                mine = held[:, cols] if kind == "whole" else np.ones((n_plans, len(cols)),
                                                                      bool)
                if so.slot not in counts:
                    counts[so.slot] = mine.sum(axis=1)
                k = counts[so.slot]
                present = k > 0
                it = items[so.item]
                if so.seconds is None and so.stacked is None:
                    items[so.item] = _scaled(it, present, None)
                else:
                    if so.stacked is not None:
                        kernel = np.array([self._stack_seconds(so.stacked["node"], int(x))
                                           if x else 0.0 for x in k])
                    else:
                        secs = np.broadcast_to(so.seconds, mine.shape)
                        if so.terms is not None and share is not None:
                            w = np.exp(-np.maximum(total[:, None] - so.own, 0.0) / share)
                            t = so.terms
                            secs = t[:, 0] + np.maximum(t[:, 1] + (t[:, 2] - t[:, 1]) * w,
                                                        t[:, 3] + (t[:, 4] - t[:, 3]) * w)
                        kernel = _fused(secs, mine, floor)
                    items[so.item] = _scaled(it, present, kernel * _US)
                if kind == "whole":
                    gone[so.item] = ~present
            programs.append(items)
            absent.append(gone)
        received = self._received(tpl)
        exchange = np.maximum(sent.max(axis=1) * self._global_batch(), received)

        def collective_time(q, kernels):
            op = kernels[0].payload
            kind = COLLECTIVE_OPS[op.name]
            if op.name in _EXCHANGE:
                return np.array([self._collective_us(kind, b) for b in exchange])
            return self._collective_us(kind, max(k.payload.bytes for k in kernels))

        results = simulate_batch(programs, collective_time, absent,
                                 self.graphs.cancelled)
        spans = np.zeros((n_plans, self.ranks))
        for r, res in enumerate(results):
            first = 0 if self._step_s > 0 else 1
            starts = res.item_start[first:] + [s for s, _ in res.kernels]
            ends = res.item_end[first:] + [e for _, e in res.kernels]
            hi = reduce(np.maximum, ends)
            lo = reduce(np.minimum, starts)
            spans[:, r] = np.broadcast_to(hi - lo, (n_plans,)) / 1e3
        return spans

    def _collective_us(self, kind: str, nbytes: float) -> float:
        return self.timer.timed(kind, float(nbytes), self.ranks)[0] * _US

    def _global_batch(self) -> int:
        return self.graphs.local_batch * self.ranks

    def _received(self, tpl: _Template) -> float:
        """What every rank receives in the all-to-all: its samples of every whole table."""
        whole = [i for i, t in enumerate(self.tables)
                 if t.key not in tpl.rowwise and t.key not in tpl.replicated]
        return float(self.graphs.local_batch * self.width[whole].sum())

    def _share_l2(self) -> float | None:
        model = getattr(self, "_embedding", None)
        if model is None:
            return None
        from ..costs.gpu_embedding import L2_SHARE
        return L2_SHARE * model.peaks.l2_bytes


def plan_spans(graphs: RankGraphs) -> tuple[Callable[[list[Plan]], np.ndarray], str | None]:
    """How plans of ``graphs``' scenario are simulated: each rank's iteration (ms) of a
    list of plans, composed by a :class:`PlanEvaluator`, or, for a scenario it cannot
    compose, from captured rank graphs plan by plan; and why not composed (None when
    they are)."""
    try:
        return PlanEvaluator(graphs).spans_ms, None
    except Unsupported as exc:
        def captured(plans: list[Plan]) -> np.ndarray:
            return np.array([graphs.rank_spans_ms(p) for p in plans])
        return captured, str(exc)


def _fused(seconds: np.ndarray, mine: np.ndarray, floor: float) -> np.ndarray:
    """:func:`~predictors.costs.fused_lookups.fused_seconds` per plan: the held tables'
    parts summed, the floor counted once, never less than the longest (0: none held)."""
    held = np.where(mine, seconds, 0.0)
    k = mine.sum(axis=1)
    return np.where(k > 0, np.maximum(held.max(axis=1),
                                      held.sum(axis=1) - np.maximum(k - 1, 0) * floor), 0.0)


def _scaled(item: Item, present: np.ndarray, kernel_us) -> Item:
    """``item`` with its CPU time where ``present`` (0 elsewhere) and, when given, its
    kernel's duration."""
    keep = present.astype(float)
    out = copy.copy(item)
    out.gap_us, out.t2_us = item.gap_us * keep, item.t2_us * keep
    out.t3_us, out.t5_us = item.t3_us * keep, item.t5_us * keep
    calls = []
    for call in item.calls:
        kernels = call.kernels
        if kernel_us is not None and kernels:
            k = copy.copy(kernels[0])
            k.dur_us = kernel_us
            kernels = (k,) + kernels[1:]
        calls.append(Call(call.dur_us * keep, kernels, call.sync, call.returns_before_us,
                          call.payload))
    out.calls = tuple(calls)
    return out
