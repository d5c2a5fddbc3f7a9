"""Each rank's device memory under a sharding plan, without capturing the plan.

The search checks thousands of plans a second against the device's memory, so a plan's
rank is priced from parts, each from the same model the captured step uses:

- the rank's step without any table (one capture): the dense part's parameters,
  gradients, optimizer state and activations, DDP's buckets, the batch, and what the
  all-to-all hands it (its samples of every table);
- per table it looks up: its weights (a row-wise block, a column shard's share), the
  pooled output and its gradient for the global batch, and the sparse gradient (one row
  and one index per lookup);
- per data-parallel table: the weights, the dense gradient, its copy in the late
  all-reduce bucket, and where the optimizer is Adam its two moments and the square
  root of the second that its step makes.

The sum is an upper bound of the captured peak: every part counts as live at once
(``pytest tests/predictors/plan/test_plan_memory.py`` checks it on random plans, and
that it is within 10 % of the peak).  The best plans are then predicted from captured
rank graphs, whose exact peak the ranking reports.
"""
from __future__ import annotations

from ..engine.parallel import RankGraphs
from ..model.sharding import (
    REPLICATED,
    ColumnWise,
    Plan,
    PlanError,
    TableRef,
    is_rank,
    row_group,
)
from ..utils.formatting import format_bytes

__all__ = ["PlanMemory"]

INDEX_BYTES = 8   # an int64 index per looked-up row in the sparse gradient


class PlanMemory:
    """Each rank's peak memory under a plan of ``graphs``' scenario (see the module)."""

    def __init__(self, graphs: RankGraphs):
        self.ranks = graphs.ranks
        self.device_bytes = graphs.memory_bytes()
        self.global_batch = graphs.local_batch * graphs.ranks
        memory = graphs.costed(frozenset()).memory
        self.base = float(memory.peak) if memory is not None else 0.0
        adam = graphs.doc["training"].get("optimizer", "sgd") in ("adam", "adamw")
        # weights, gradient, bucket; Adam: exp_avg, exp_avg_sq and sqrt(exp_avg_sq)
        self.replicated_copies = 3 + (3 if adam else 0)

    def _looked_up(self, t: TableRef, width: int, share: float = 1.0) -> float:
        """A table's step buffers on a rank that looks it up for the global batch:
        pooled output and its gradient, and the sparse gradient of ``share`` of its
        lookups, ``width`` wide."""
        b = self.global_batch
        return (2.0 * b * width * t.itemsize
                + share * b * t.pooling * (width * t.itemsize + INDEX_BYTES))

    def parts(self, plan: Plan, tables: list[TableRef]) -> list[dict[str, float]]:
        """Per rank: ``step`` (the rank without tables), ``tables`` (weights and
        data-parallel copies) and ``buffers`` (the tables' step buffers)."""
        out = [{"step": self.base, "tables": 0.0, "buffers": 0.0} for _ in range(self.ranks)]
        for t in tables:
            where = plan.assignment[t.key]
            if is_rank(where):
                out[where]["tables"] += t.bytes
                out[where]["buffers"] += self._looked_up(t, t.dim)
            elif isinstance(where, ColumnWise):
                n = len(where.ranks)
                for r in where.ranks:
                    out[r]["tables"] += t.bytes / n
                    out[r]["buffers"] += self._looked_up(t, t.dim // n)
            elif row_group(where, self.ranks) is not None:   # row-wise, table-row-wise
                group = row_group(where, self.ranks)
                for r, share in zip(group, t.row_shares(len(group))):
                    out[r]["tables"] += t.shard_bytes(len(group))
                    out[r]["buffers"] += self._looked_up(t, t.dim, share)
            elif where == REPLICATED:
                for r in range(self.ranks):
                    out[r]["tables"] += self.replicated_copies * t.bytes
        return out

    def rank_bytes(self, plan: Plan, tables: list[TableRef]) -> list[float]:
        return [sum(p.values()) for p in self.parts(plan, tables)]

    def check(self, plan: Plan, tables: list[TableRef]) -> None:
        """Raise :class:`PlanError` naming the first rank over its device's memory."""
        if self.device_bytes <= 0:
            return
        for rank, p in enumerate(self.parts(plan, tables)):
            total = sum(p.values())
            if total > self.device_bytes:
                raise PlanError(
                    f"rank {rank} would need about {format_bytes(total)} at its peak "
                    f"({format_bytes(p['tables'])} of tables, {format_bytes(p['buffers'])} "
                    f"of lookup buffers, {format_bytes(p['step'])} for the rest of the "
                    f"step), more than its {format_bytes(self.device_bytes)}")

    def fits(self, plan: Plan, tables: list[TableRef]) -> bool:
        try:
            self.check(plan, tables)
            return True
        except PlanError:
            return False
