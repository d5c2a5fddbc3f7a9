"""Multi-GPU steps: one captured graph per rank, collectives timed on the topology.

The job is hybrid parallel, as facebookresearch/dlrm and TorchRec run a DLRM: embedding
tables are sharded table-wise (:mod:`predictors.model.sharding`), each rank looks its own tables
up for the global batch and an all-to-all hands every rank its share of the samples; the
dense part is data parallel, ``ceil(batch / ranks)`` samples per rank, its gradients
all-reduced in DDP's buckets during backward.  A model without tables is plain data
parallel.

A rank's graph depends only on which tables it holds, so graphs are captured and costed
once per distinct table set and reused across ranks and plans (:class:`RankGraphs`).
"""
from __future__ import annotations

import math
from typing import Callable

from ..costs.collectives import platform_collective
from ..costs.gloo import gloo_time_us
from ..costs.op_costs import CostedGraph, CostedOp, cost_op_graph
from ..hardware.network import Link, Network
from ..hardware.platforms import PLATFORM_PRESETS, Platform, preset_graph, resolve_platform
from ..hardware.specs import device_spec
from ..model.capture import capture_scenario
from ..model.comm_ops import COLLECTIVE_OPS
from ..model.embedding_blocks import per_table_doc
from ..model.sharding import (
    Plan,
    TableRef,
    candidate_plans,
    check_memory,
    check_nodes,
    greedy_with_rowwise,
    plan_from_scenario,
    tables_of,
)
from ..model.workload import RankShard
from ..scenario.format import Issue, ScenarioError, validate_platform
from ..utils.progress import check_cancelled
from .simulate import rank_spans_ms, simulate_ranks
from .timeline import Timeline

__all__ = ["RankGraphs", "collective_timer", "auto_plan", "scenario_plan", "platform_network"]


class RankGraphs:
    """Captured and costed rank graphs of one scenario on one platform, by table set."""

    def __init__(self, doc: dict, platform: Platform, profile=None, overheads=None,
                 cancelled: Callable[[], bool] | None = None):
        self.doc, self.platform = doc, platform
        self.cancelled = cancelled  # polled before every capture
        self.profile, self.overheads = profile, overheads
        self.ranks = platform.ranks
        self.global_batch = int(doc["training"]["batch_size"])
        self.local_batch = max(1, math.ceil(self.global_batch / self.ranks))
        self.tables: list[TableRef] = tables_of(doc)
        self._costed: dict[frozenset, CostedGraph] = {}
        self._table_seconds: dict[str, float] | None = None
        self.notes: list[str] = []  # what the collective model assumed

    def costed(self, local: frozenset, rank: int = 0, rowwise: frozenset = frozenset(),
               replicated: frozenset = frozenset(), columns: dict | None = None,
               row_groups: dict | None = None) -> CostedGraph:
        """The costed graph of a rank holding the tables ``local``, its block of the
        ``rowwise`` tables' rows and the ``replicated`` (data-parallel) tables (cached;
        with row-wise tables, per rank); ``columns``: the column-wise tables (key -> the
        ranks of their shards), a shard of which ``local`` names; ``row_groups``: the
        table-row-wise ones among ``rowwise`` (key -> their node's ranks)."""
        columns, row_groups = columns or {}, row_groups or {}
        key = (local, rowwise, replicated, rank if rowwise else None,
               tuple(sorted(columns.items())), tuple(sorted(row_groups.items())))
        hit = self._costed.get(key)
        if hit is None:
            hit = self._costed[key] = cost_op_graph(
                self.capture(local, rank, rowwise, replicated, columns, row_groups),
                self.platform, self.profile, self.overheads)
        return hit

    def rank_graph(self, plan: Plan, rank: int) -> CostedGraph:
        """The costed graph of ``rank`` under ``plan``."""
        return self.costed(plan.local(rank), rank, plan.rowwise, plan.replicated,
                           plan.columns, plan.row_groups)

    def capture(self, local: frozenset, rank: int = 0, rowwise: frozenset = frozenset(),
                replicated: frozenset = frozenset(), columns: dict | None = None,
                row_groups: dict | None = None):
        """The captured op graph of a rank holding ``local``, its block of the ``rowwise``
        tables' rows and the ``replicated`` tables."""
        check_cancelled(self.cancelled, "capturing a rank")
        # a padded batch: every rank's share is looked up, padding included
        shard = RankShard(rank, self.ranks, local, self.local_batch,
                          self.local_batch * self.ranks, rowwise=rowwise,
                          replicated=replicated, columns=dict(columns or {}),
                          row_groups=dict(row_groups or {}))
        return capture_scenario(self.doc, gpu=self.platform.device != "cpu", shard=shard)

    @property
    def captured(self) -> int:
        """How many distinct rank graphs were captured so far."""
        return len(self._costed)

    def table_seconds(self) -> dict[str, float]:
        """Each table's predicted kernel time in one step (lookup forward, backward and
        sparse update at the global batch), from a rank that holds every table."""
        if self._table_seconds is None:
            # fused lookups price their tables together: ask the per-table kernels
            unfused = per_table_doc(self.doc)
            source = self if unfused is self.doc else RankGraphs(
                unfused, self.platform, self.profile, self.overheads, self.cancelled)
            every = source.costed(frozenset(t.key for t in self.tables))
            seconds = {t.key: 0.0 for t in self.tables}
            for op in every.ops:
                if op.table in seconds:
                    seconds[op.table] += op.kernel_s
            self._table_seconds = seconds
        return self._table_seconds

    def candidates(self) -> tuple[list[Plan], list[tuple[str, str]]]:
        return candidate_plans(self.tables, self.ranks, self.global_batch,
                               self.table_seconds(), self.memory_bytes())

    def memory_bytes(self) -> float:

        try:
            return device_spec(self.platform.device).memory_bytes
        except KeyError:
            return 0.0

    def simulate(self, plan: Plan, title: str = "",
                 cancelled: Callable[[], bool] | None = None,
                 progress: Callable[[int], None] | None = None,
                 starts_us=None) -> Timeline:
        """The step of every rank under ``plan``, walked together (each rank from its
        ``starts_us``, default together)."""

        graphs = []
        for r in range(self.ranks):
            graphs.append(self.rank_graph(plan, r))
            if progress is not None:
                progress(r)
        timer = collective_timer(self.platform, self.profile)
        timeline = simulate_ranks(graphs, timer, title, cancelled, starts_us)
        self.notes.extend(n for n in timer.notes if n not in self.notes)
        return timeline

    def rank_spans_ms(self, plan: Plan,
                      cancelled: Callable[[], bool] | None = None) -> list[float]:
        """Each rank's iteration (ms) under ``plan``: the same simulation as
        :meth:`simulate`, without drawing its Timeline."""
        graphs = [self.rank_graph(plan, r) for r in range(self.ranks)]
        return rank_spans_ms(graphs, collective_timer(self.platform, self.profile), cancelled)

    def batch_note(self) -> str:
        """How the global batch splits over the ranks."""
        note = (f"{self.ranks} ranks: {self.local_batch} of the {self.global_batch} samples "
                "each")
        if self.global_batch % self.ranks:
            note += (f" (the batch does not divide by {self.ranks}: every rank takes "
                     f"ceil({self.global_batch}/{self.ranks}), as DistributedSampler pads)")
        return note


def scenario_plan(graphs: RankGraphs) -> Plan:
    """The plan a prediction of the scenario uses: its own (tables it leaves out placed by
    size), or :func:`auto_plan` for ``"auto"``; a :class:`PlanError` when a rank's tables
    overfill it."""
    plan = plan_from_scenario(graphs.doc, graphs.tables, graphs.ranks,
                              lambda: auto_plan(graphs))
    check_nodes(plan, graphs.platform.ranks_per_node)
    check_memory(plan, graphs.tables, graphs.memory_bytes())
    return plan


def auto_plan(graphs: RankGraphs) -> Plan:
    """``"auto"``: longest predicted table first onto the least loaded rank that has
    memory for it, the largest tables row-wise where that cannot fit (the kernel-time
    planner of :func:`~predictors.model.sharding.candidate_plans`)."""
    seconds = graphs.table_seconds()
    return greedy_with_rowwise("auto (greedy by kernel time)", graphs.tables, graphs.ranks,
                       lambda t: seconds.get(t.key, 0.0), graphs.memory_bytes(),
                       how="the longest predicted lookup (forward, backward, update) first")


class collective_timer:  # noqa: N801 - used like the function it replaced
    """The collective model on ``platform``, as :func:`~predictors.engine.simulate.simulate_ranks`
    asks for it: the ranks' twin ops -> (seconds, detail).  The message is the largest
    any rank sends or receives; results are cached per kind and size.  What the model had
    to assume (e.g. PCIe where the platform names no GPU link) collects in ``notes``."""

    def __init__(self, platform: Platform, profile=None):
        self.platform = platform
        # a CPU profile's measured collectives among this host's processes
        self.measured = (getattr(profile, "collectives", None) or {}).get("gloo")
        self.cache: dict[tuple[str, float, int], tuple[float, str]] = {}
        self.algorithms: dict[tuple[str, float, int], str] = {}
        self.loads: dict[tuple[str, float, int], tuple[str, list[tuple[Link, float]]]] = {}
        self.notes: list[str] = []

    def __call__(self, ops: list[CostedOp]) -> tuple[float, str]:
        return self.timed(*self._key(ops))

    @staticmethod
    def _key(ops: list[CostedOp]) -> tuple[str, float, int]:
        return COLLECTIVE_OPS[ops[0].name], max(op.bytes for op in ops), len(ops)

    def link_loads(self, ops: list[CostedOp]) -> tuple[str, list[tuple[Link, float]]]:
        """The physical links the ranks' twin collective ``ops`` cross and the bytes each
        carries (:meth:`~predictors.hardware.network.Network.link_loads`, with the
        algorithm the collective model chose), after what the collective was
        (``all_reduce ring, 0.16 MB``); no links on a CPU platform."""
        key = self._key(ops)
        if key not in self.loads:
            network = platform_network(self.platform)
            if network is None:
                self.loads[key] = ("", [])
            elif key[0] in NODE_KINDS:   # its two collectives' loads, link by link
                loads: dict = {}
                for part in self.node_parts(*key):
                    self.timed(*part)
                    for link, nbytes in network.link_loads(*part,
                                                           self.algorithms.get(part, "none")):
                        loads[link] = loads.get(link, 0.0) + nbytes
                self.loads[key] = (f"{key[0]}, {key[1] / 1e6:,.2f} MB", list(loads.items()))
            else:
                self.timed(*key)
                algorithm = self.algorithms.get(key, "none")
                self.loads[key] = (f"{key[0]} {algorithm}, {key[1] / 1e6:,.2f} MB",
                                   network.link_loads(*key, algorithm))
        return self.loads[key]

    def node_parts(self, kind: str, nbytes: float, ranks: int) -> list[tuple[str, float, int]]:
        """A table-row-wise exchange as the collectives it runs, ``(kind, bytes, ranks)``:
        a reduce-scatter of the partial bags over one node's ranks, then an all-to-all
        of each rank's share of the sums (``nbytes`` / the node's ranks) over every rank,
        which moves what crosses the network; backward, the reverse."""
        node = min(ranks, self.platform.ranks_per_node)
        inside, across = ("reduce_scatter", nbytes, node), ("all_to_all", nbytes / node, ranks)
        return [inside, across] if kind == "node_reduce_scatter" else \
            [across, ("all_gather", nbytes, node)]

    def timed(self, kind: str, nbytes: float, ranks: int) -> tuple[float, str]:
        """``(seconds, detail)`` of one ``kind`` collective of ``nbytes`` over ``ranks``."""
        key = (kind, nbytes, ranks)
        if key not in self.cache and kind in NODE_KINDS:
            parts = [(part, *self.timed(*part)) for part in self.node_parts(*key)]
            self.cache[key] = (sum(t for _, t, _ in parts),
                               " then ".join(f"{k.replace('_', '-')} over {n} ranks: {how}"
                                             for (k, _, n), _, how in parts))
        if key not in self.cache and self.platform.device == "cpu":
            us, how = gloo_time_us(kind, nbytes, ranks, self.measured)
            if "default" in how:
                note = ("CPU collectives priced by gloo's default model: calibrate this "
                        "host (calibrate --device cpu) to measure them")
                if note not in self.notes:
                    self.notes.append(note)
            self.cache[key] = (us * 1e-6, f"{nbytes / 1e6:,.2f} MB, {how}")
        if key not in self.cache:
            try:
                est, _, _, notes = platform_collective(kind, nbytes, self.platform, ranks)
            except ValueError as exc:  # a topology the collectives cannot cross
                raise ScenarioError([Issue("platform", str(exc))]) from None
            self.notes.extend(n for n in notes if n not in self.notes)
            self.cache[key] = (est.us * 1e-6, f"{nbytes / 1e6:,.2f} MB, {est.detail}")
            self.algorithms[key] = est.algorithm
        return self.cache[key]


# a table-row-wise exchange: two collectives (collective_timer.node_parts)
NODE_KINDS = ("node_reduce_scatter", "node_all_gather")

_PRESET_NETWORKS: dict[str, Network] = {}


def platform_network(platform: Platform) -> Network | None:
    """The links a multi-GPU platform's collectives run over: a drawn platform's own
    network, a preset's drawn as :func:`~predictors.hardware.platforms.preset_graph` (which
    prices collectives as the preset); None for CPUs and single GPUs."""
    if platform.device == "cpu" or platform.ranks < 2:
        return None
    if platform.network is not None:
        return platform.network
    if platform.name not in PLATFORM_PRESETS:
        return None
    if platform.name not in _PRESET_NETWORKS:
        drawn = resolve_platform(validate_platform(preset_graph(platform.name)))
        _PRESET_NETWORKS[platform.name] = drawn.network
    return _PRESET_NETWORKS[platform.name]
