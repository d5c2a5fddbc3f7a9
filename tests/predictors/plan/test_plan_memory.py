"""A plan's memory priced from parts bounds its captured peak, closely."""
import random

import pytest
from paths import SCENARIOS

from predictors.engine.parallel import RankGraphs
from predictors.engine.predict import prepare
from predictors.model.sharding import REPLICATED, ROW_WISE, ColumnWise, Plan, PlanError
from predictors.plan.plan_memory import PlanMemory
from predictors.scenario.format import load_scenario


def _graphs(optimizer):
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "pcie-4x-a100"}
    doc["training"].update(optimizer=optimizer, batch_size=4096)
    for node in doc["model"]["nodes"]:
        if node["kind"] == "embedding_tables":
            for j, t in enumerate(node["params"]["tables"]):
                t.update(rows=(200_000, 2_000_000, 50_000)[j % 3], dim=(16, 32, 64)[j % 3],
                         pooling=(1, 20, 60)[j % 3])
        if node["kind"] == "interaction":
            node["params"]["op"] = "cat"
    doc, platform, profile = prepare(doc)
    return RankGraphs(doc, platform, profile)


def _plans(graphs, rng, n):
    keys = [t.key for t in graphs.tables]
    out = []
    for _ in range(n):
        a = {k: rng.randrange(graphs.ranks) for k in keys}
        for k in rng.sample(keys, 3):
            a[k] = rng.choice([ROW_WISE, REPLICATED, ColumnWise((0, 2)), ColumnWise((1, 3))])
        out.append(Plan("random", graphs.ranks, a))
    return out


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_priced_memory_bounds_the_captured_peak_within_ten_percent(optimizer):
    graphs = _graphs(optimizer)
    budget = PlanMemory(graphs)
    for plan in _plans(graphs, random.Random(2), 3):
        priced = budget.rank_bytes(plan, graphs.tables)
        for r in range(graphs.ranks):
            peak = graphs.rank_graph(plan, r).memory.peak
            assert peak <= priced[r] <= 1.10 * peak, (plan.assignment, r)


def test_a_plan_over_the_memory_names_the_rank_and_its_parts():
    graphs = _graphs("sgd")
    budget = PlanMemory(graphs)
    plan = Plan("all on 1", graphs.ranks, {t.key: 1 for t in graphs.tables})
    budget.device_bytes = budget.rank_bytes(plan, graphs.tables)[1] * 0.99
    with pytest.raises(PlanError, match=r"rank 1 would need .* of tables, .* of lookup "
                                        r"buffers, .* for the rest of the step"):
        budget.check(plan, graphs.tables)
    spread = Plan("spread", graphs.ranks, {t.key: i % 4 for i, t in enumerate(graphs.tables)})
    assert budget.fits(spread, graphs.tables)
