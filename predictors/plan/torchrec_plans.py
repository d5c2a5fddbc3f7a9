"""Plans as TorchRec names them: per table, a sharding type and the ranks that hold it.

TorchRec's planner answers a ``ShardingPlan``: per module, per table, a
``ParameterSharding`` with a ``sharding_type`` (``table_wise``, ``row_wise``,
``column_wise``, ``data_parallel``, ...) and ``ranks`` (a column-wise table: the rank of
each column shard, in column order).  The JSON here keeps those two fields per table::

    {"format": "torchrec/sharding", "tables": {"tables/3": {"sharding_type": "table_wise",
                                                            "ranks": [2]}, ...}}

:func:`to_torchrec` writes a plan so that a user can apply it (as ``ParameterConstraints``
or a ``ParameterSharding`` per table); :func:`from_torchrec` reads one, e.g. a TorchRec
planner's output, to rank it beside this tool's plans.  Table keys are this tool's
(``"<block id>/<table index>"``): a TorchRec plan's table names map to them in table order.

Where TorchRec is installed (CPU wheels: ``pip install --no-deps torchrec==1.8.0
fbgemm-gpu-cpu==1.8.0`` beside torch 2.13, then its own dependencies),
:func:`torchrec_planner_plan` runs TorchRec's ``EmbeddingShardingPlanner`` on the
scenario's tables, so that its plan is ranked beside this tool's.
"""
from __future__ import annotations

from ..model.sharding import (
    REPLICATED,
    ROW_WISE,
    ColumnWise,
    Plan,
    PlanError,
    TableRef,
    TableRowWise,
    placement,
)

__all__ = ["FORMAT", "to_torchrec", "from_torchrec", "torchrec_planner_plan", "MODELLED"]

MODELLED = ("table_wise", "row_wise", "column_wise", "table_row_wise",
            "data_parallel")   # sharding types

FORMAT = "torchrec/sharding"
_TYPES = {ROW_WISE: "row_wise", REPLICATED: "data_parallel"}


def to_torchrec(plan: Plan) -> dict:
    """``plan`` as per-table sharding types and ranks."""
    every = list(range(plan.ranks))
    tables = {}
    for key in plan.to_json()["assignment"]:   # in table order
        where = plan.assignment[key]
        if isinstance(where, ColumnWise):
            tables[key] = {"sharding_type": "column_wise", "ranks": list(where.ranks)}
        elif isinstance(where, TableRowWise):
            tables[key] = {"sharding_type": "table_row_wise", "ranks": list(where.ranks)}
        elif where in _TYPES:
            tables[key] = {"sharding_type": _TYPES[where], "ranks": every}
        else:
            tables[key] = {"sharding_type": "table_wise", "ranks": [int(where)]}
    return {"format": FORMAT, "plan": plan.name, "ranks": plan.ranks, "tables": tables}


def from_torchrec(doc: dict, tables: list[TableRef], ranks: int,
                  name: str = "TorchRec plan") -> Plan:
    """The plan of a :func:`to_torchrec` document; a :class:`PlanError` names what is
    wrong (an unknown table, a rank the platform lacks, a sharding type not modelled)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("tables"), dict):
        raise PlanError(f"expected {{'format': '{FORMAT}', 'tables': {{key: "
                        f"{{'sharding_type', 'ranks'}}}}}}")
    known = {t.key for t in tables}
    kinds = {v: k for k, v in _TYPES.items()}
    assignment: dict = {}
    for key, spec in doc["tables"].items():
        if key not in known:
            raise PlanError(f"{key}: no such table (keys are '<block id>/<table index>': "
                            f"{', '.join(sorted(known)[:4])}{', ...' if len(known) > 4 else ''})")
        kind = (spec or {}).get("sharding_type")
        on = (spec or {}).get("ranks") or []
        if not all(isinstance(r, int) and 0 <= r < ranks for r in on):
            raise PlanError(f"{key}: ranks {on} are not all among the platform's 0-{ranks - 1}")
        if kind == "table_wise":
            if len(on) != 1:
                raise PlanError(f"{key}: a table-wise table sits on one rank, got {on}")
            assignment[key] = on[0]
        elif kind == "column_wise" and on and len(set(on)) == 1:
            assignment[key] = on[0]   # every shard on one rank: the table whole there
        elif kind == "column_wise":
            dim = next(t.dim for t in tables if t.key == key)
            try:
                assignment[key] = placement({"kind": "cw", "ranks": on}, dim, ranks)
            except PlanError as exc:
                raise PlanError(f"{key}: {exc}") from None
        elif kind == "table_row_wise":
            try:
                assignment[key] = placement({"kind": "twrw", "ranks": on}, None, ranks)
            except PlanError as exc:
                raise PlanError(f"{key}: {exc}") from None
        elif kind in kinds:
            if sorted(on) != list(range(ranks)):
                raise PlanError(f"{key}: {kind} spans every rank here (0-{ranks - 1}), "
                                f"got {on}")
            assignment[key] = kinds[kind]
        else:
            raise PlanError(f"{key}: sharding type {kind!r} is not modelled (table_wise, "
                            "row_wise, column_wise, table_row_wise, data_parallel are)")
    missing = sorted(known - set(assignment))
    if missing:
        raise PlanError(f"the plan leaves out {len(missing)} table(s): "
                        f"{', '.join(missing[:4])}{', ...' if len(missing) > 4 else ''}")
    return Plan(name, ranks, assignment, "read from a TorchRec plan")


def torchrec_planner_plan(tables: list[TableRef], ranks: int, local_batch: int,
                          memory_bytes: float, device: str = "cuda",
                          ranks_per_node: int | None = None) -> dict:
    """TorchRec's own planner's plan of ``tables`` on ``ranks`` devices of
    ``memory_bytes`` each, for ``local_batch`` samples a rank, as a :func:`to_torchrec`
    document; only the sharding types modelled here are offered to it.  A
    :class:`PlanError` says when TorchRec is not installed or cannot plan."""
    try:
        import torch  # deferred: torch and TorchRec are heavy imports
        from torchrec import EmbeddingBagCollection, EmbeddingBagConfig
        from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
        from torchrec.distributed.planner import EmbeddingShardingPlanner, Topology
        from torchrec.distributed.planner.types import ParameterConstraints
    except (ImportError, OSError) as exc:
        raise PlanError(f"TorchRec's planner is not available here ({exc}); install "
                        "torchrec and fbgemm-gpu-cpu") from None
    names = {f"t{i}": t for i, t in enumerate(tables)}
    configs = [EmbeddingBagConfig(name=n, embedding_dim=t.dim, num_embeddings=t.rows,
                                  feature_names=[f"f_{n}"]) for n, t in names.items()]
    module = EmbeddingBagCollection(tables=configs, device=torch.device("meta"))
    topology = Topology(world_size=ranks, compute_device=device,
                        hbm_cap=int(memory_bytes) if memory_bytes > 0 else None,
                        local_world_size=ranks_per_node or ranks)
    constraints = {n: ParameterConstraints(sharding_types=list(MODELLED),
                                           pooling_factors=[float(t.pooling)])
                   for n, t in names.items()}
    planner = EmbeddingShardingPlanner(topology=topology, batch_size=local_batch,
                                       constraints=constraints)
    try:
        plan = planner.plan(module, [EmbeddingBagCollectionSharder()])
    except Exception as exc:   # TorchRec's planner errors have no common base
        raise PlanError(f"TorchRec's planner found no plan: {exc}") from None
    shardings = next(iter(plan.plan.values()))
    return {"format": FORMAT, "plan": "TorchRec planner", "ranks": ranks,
            "tables": {names[n].key: {"sharding_type": ps.sharding_type,
                                      "ranks": list(ps.ranks or [])}
                       for n, ps in shardings.items()}}
