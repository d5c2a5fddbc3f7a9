"""Plans composed from per-table costs simulate as their captured rank graphs do."""
import copy
import random

import numpy as np
import pytest
from paths import SCENARIOS

from predictors.engine.parallel import RankGraphs
from predictors.engine.plan_evaluator import PlanEvaluator, Unsupported
from predictors.engine.predict import prepare
from predictors.model.sharding import REPLICATED, ROW_WISE, ColumnWise, Plan
from predictors.scenario.format import load_scenario


def _graphs(kernel: str, preset: str = "pcie-4x-a100", optimizer: str = "sgd",
            pipeline: str = "resident"):
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": preset}
    doc["training"]["optimizer"] = optimizer
    doc["training"]["input_pipeline"] = pipeline
    for node in doc["model"]["nodes"]:
        if node["kind"] == "interaction":
            node["params"]["op"] = "cat"   # tables of several widths
        if node["kind"] == "embedding_tables":
            node["params"]["kernel"] = kernel
            for j, t in enumerate(node["params"]["tables"]):  # dims and skews that differ
                t["dim"] = (16, 32, 64)[j % 3]
                if j % 2:
                    t["distribution"] = {"kind": "zipf", "alpha": 1.1}
    doc, platform, profile = prepare(doc)
    return RankGraphs(doc, platform, profile)


def _plans(graphs, rng, n=5):
    keys = [t.key for t in graphs.tables]
    plans = []
    for i in range(n):
        rowwise = set(rng.sample(keys, 2)) if i >= n - 2 else set()
        crowd = i == 1   # most tables on rank 0: the others miss some groups, or all
        plans.append(Plan(f"p{i}", graphs.ranks, {
            k: ROW_WISE if k in rowwise else
            (0 if crowd and rng.random() < 0.8 else rng.randrange(graphs.ranks))
            for k in keys}))
    plans.append(Plan("one rank", graphs.ranks, {k: 0 for k in keys}))  # idle ranks
    # data-parallel tables, alone and beside row-wise ones; a rank with only those
    plans.append(Plan("dp", graphs.ranks, {k: REPLICATED if i < 3 else i % graphs.ranks
                                           for i, k in enumerate(keys)}))
    plans.append(Plan("dp+rw", graphs.ranks, {k: REPLICATED if i < 2 else ROW_WISE if i == 2
                                              else 1 for i, k in enumerate(keys)}))
    # column-wise shards (two or four), beside table-wise, row-wise and data-parallel ones
    plans.append(Plan("cw", graphs.ranks, {k: ColumnWise((0, 1)) if i == 2 else
                                           ColumnWise((0, 1, 2, 3)) if i == 4 else
                                           ColumnWise((1, 3)) if i == 1 else i % 2
                                           for i, k in enumerate(keys)}))
    plans.append(Plan("cw+rw+dp", graphs.ranks, {k: ColumnWise((2, 3)) if i == 5 else
                                                 ROW_WISE if i == 0 else REPLICATED if i == 3
                                                 else 0 for i, k in enumerate(keys)}))
    return plans


@pytest.mark.parametrize("kernel,optimizer,pipeline", [
    ("fused", "sgd", "resident"), ("fused", "sgd", "torchrec"),
    pytest.param("per_table", "sgd", "resident", marks=pytest.mark.slow),
    pytest.param("fused", "adam", "resident", marks=pytest.mark.slow)])
def test_composed_plans_simulate_as_their_captured_rank_graphs(kernel, optimizer, pipeline):
    graphs = _graphs(kernel, optimizer=optimizer, pipeline=pipeline)
    plans = _plans(graphs, random.Random(7))
    fast = PlanEvaluator(graphs).spans_ms(plans)
    for plan, spans in zip(plans, fast):
        assert spans == pytest.approx(graphs.rank_spans_ms(plan), rel=1e-9), plan.name


def test_plans_differ_where_their_tables_do():
    graphs = _graphs("fused")
    keys = [t.key for t in graphs.tables]
    spread = Plan("spread", 4, {k: i % 4 for i, k in enumerate(keys)})
    piled = Plan("piled", 4, {k: 0 for k in keys})
    a, b = PlanEvaluator(graphs).spans_ms([spread, piled])
    assert b[0] > a.max()          # rank 0 looks up every table
    assert b[1:].min() > a.max()   # and the others wait for it in the exchanges


def test_cpu_ranks_are_left_to_captured_graphs():
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "local-cpu", "ranks": 2}
    doc, platform, profile = prepare(copy.deepcopy(doc))
    with pytest.raises(Unsupported):
        PlanEvaluator(RankGraphs(doc, platform, profile))


def test_spans_come_back_in_the_order_asked():
    graphs = _graphs("fused")
    plans = _plans(graphs, random.Random(3), n=6)
    ev = PlanEvaluator(graphs)
    together = ev.spans_ms(plans)
    alone = np.array([ev.spans_ms([p])[0] for p in plans])
    assert np.allclose(together, alone, rtol=1e-12)
