"""The search over sharding plans: enumeration, local search, budget and cancel."""
import itertools
import json
import random

import numpy as np
import pytest
from paths import SCENARIOS

from predictors.engine.parallel import RankGraphs
from predictors.engine.plan_evaluator import PlanEvaluator
from predictors.engine.predict import prepare
from predictors.model.sharding import Plan, TableRef
from predictors.plan.search import enumerate_plans, search_plans
from predictors.scenario.format import load_scenario

TWO_GPUS = {"nodes": [{"id": "g0", "kind": "gpu", "params": {"model": "a100"}},
                      {"id": "g1", "kind": "gpu", "params": {"model": "a100"}}],
            "edges": [{"source": "g0", "target": "g1", "kind": "nvlink3"}]}


def _tables(n):
    return [TableRef(f"t/{i}", "t", i, 100, 16, 1, {"kind": "uniform"}, 4) for i in range(n)]


def test_enumeration_visits_each_placement_once_up_to_renaming_ranks():
    plans = list(enumerate_plans(_tables(6), 2))
    assert len(plans) == 2 ** 5   # rank 0 holds the first table
    assert len({tuple(sorted(p.assignment.items())) for p in plans}) == len(plans)
    # three ranks: the Stirling numbers of the second kind, S(5,1)+S(5,2)+S(5,3)
    assert len(list(enumerate_plans(_tables(5), 3))) == 1 + 15 + 25


@pytest.fixture(scope="module")
def small_case():
    """A DLRM of 8 skewed tables of several sizes on two GPUs, and its evaluator."""
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = TWO_GPUS
    rng = random.Random(5)
    for node in doc["model"]["nodes"]:
        if node["kind"] == "interaction":
            node["params"]["op"] = "cat"
        if node["kind"] == "embedding_tables":
            node["params"]["kernel"] = "fused"
            for t in node["params"]["tables"]:
                t.update(rows=rng.choice([1_000, 100_000, 2_000_000]),
                         dim=rng.choice([16, 64, 128]), pooling=rng.choice([1, 8, 40]),
                         distribution={"kind": "zipf", "alpha": 1.05})
    doc, platform, profile = prepare(doc)
    graphs = RankGraphs(doc, platform, profile)
    assert len(graphs.tables) == 8
    return graphs, PlanEvaluator(graphs)


def test_local_search_finds_the_optimum_that_enumeration_proves(small_case):
    graphs, ev = small_case
    seed = [Plan("all on 0", 2, {t.key: 0 for t in graphs.tables})]
    every = search_plans(graphs.tables, 2, ev.spans_ms, seed, budget_s=60, kinds=False)
    assert every.exhaustive and every.evaluated == 2 ** 7
    best = every.best_first()[0][1].max()
    # the brute force agrees: every assignment, not only the relabelled ones
    brute = ev.spans_ms([Plan("x", 2, dict(zip([t.key for t in graphs.tables], combo)))
                         for combo in itertools.product(range(2), repeat=8)])
    assert best == pytest.approx(brute.max(axis=1).min(), rel=1e-12)
    searched = search_plans(graphs.tables, 2, ev.spans_ms, seed, budget_s=20, batch=16,
                            exhaustive_limit=0, seed=1, kinds=False)
    assert not searched.exhaustive
    assert searched.best_first()[0][1].max() == pytest.approx(best, rel=1e-12)
    assert searched.evaluated < every.evaluated * 1.5 + 100  # it stops when stuck


def test_a_spent_budget_or_a_cancel_keeps_the_best_found(small_case):
    graphs, ev = small_case
    seeds = [Plan("all on 0", 2, {t.key: 0 for t in graphs.tables}),
             Plan("alternate", 2, {t.key: i % 2 for i, t in enumerate(graphs.tables)})]
    calls = []

    def cancelled():
        calls.append(1)
        return len(calls) > 3

    res = search_plans(graphs.tables, 2, ev.spans_ms, seeds, budget_s=60,
                       exhaustive_limit=0, cancelled=cancelled)
    assert res.evaluated >= 2 and len(calls) > 3
    first = res.best_first()[0][1].max()
    assert first <= ev.spans_ms(seeds).max(axis=1).min()
    tiny = search_plans(graphs.tables, 2, ev.spans_ms, seeds, budget_s=1e-6,
                        exhaustive_limit=0)
    assert tiny.evaluated == 2   # the seeds, then the budget is gone


def test_plans_that_do_not_fit_are_never_simulated(small_case):
    graphs, ev = small_case
    big = max(graphs.tables, key=lambda t: t.bytes).key
    seeds = [Plan("all on 0", 2, {t.key: 0 for t in graphs.tables})]

    def evaluate(plans):
        assert all(p.assignment[big] == 0 for p in plans)
        return ev.spans_ms(plans)

    res = search_plans(graphs.tables, 2, evaluate, seeds, budget_s=30,
                       fits=lambda p: p.assignment[big] == 0, kinds=False)
    assert res.exhaustive and res.rejected > 0
    assert all(p.assignment[big] == 0 for p in res.plans)
    assert isinstance(res.spans[0], np.ndarray)


def test_changing_a_tables_kind_beats_every_table_wise_plan():
    """One table does most of the lookups: no table-wise placement balances two GPUs,
    row-wise or column-wise halves it."""
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = TWO_GPUS
    doc["training"]["batch_size"] = 8192
    for node in doc["model"]["nodes"]:
        if node["kind"] == "interaction":
            node["params"]["op"] = "cat"
        if node["kind"] == "embedding_tables":
            node["params"]["kernel"] = "fused"
            for j, t in enumerate(node["params"]["tables"]):
                t.update(rows=5_000_000 if j == 0 else 10_000, dim=128 if j == 0 else 16,
                         pooling=100 if j == 0 else 2, distribution={"kind": "uniform"})
    doc, platform, profile = prepare(doc)
    graphs = RankGraphs(doc, platform, profile)
    ev = PlanEvaluator(graphs)
    seed = [Plan("all on 0", 2, {t.key: 0 for t in graphs.tables})]
    whole = search_plans(graphs.tables, 2, ev.spans_ms, seed, budget_s=60, kinds=False)
    mixed = search_plans(graphs.tables, 2, ev.spans_ms, seed, budget_s=60)
    assert whole.exhaustive and mixed.exhaustive and mixed.evaluated > whole.evaluated
    best_whole = whole.best_first()[0][1].max()
    plan, spans = mixed.best_first()[0]
    assert spans.max() < 0.95 * best_whole
    assert not isinstance(plan.assignment["tables/0"], int)
    kinds = {json.dumps(p.to_json()["assignment"]["tables/0"]) for p in mixed.plans}
    assert {'"rw"', '"dp"', '{"kind": "cw", "ranks": [0, 1]}'} <= kinds
