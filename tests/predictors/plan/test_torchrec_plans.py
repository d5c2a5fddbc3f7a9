"""Plans in TorchRec's terms: written, read back, and bad ones named."""
import pytest

from predictors.model.sharding import ColumnWise, Plan, PlanError, TableRef
from predictors.plan.torchrec_plans import from_torchrec, to_torchrec

TABLES = [TableRef(f"t/{i}", "t", i, 100, 16, 1, {"kind": "uniform"}, 4) for i in range(4)]


def test_a_plan_round_trips_through_torchrec_terms():
    plan = Plan("mine", 4, {"t/0": 3, "t/1": "rw", "t/2": "dp", "t/3": ColumnWise((2, 0))})
    doc = to_torchrec(plan)
    assert doc["tables"]["t/3"] == {"sharding_type": "column_wise", "ranks": [2, 0]}
    assert doc["tables"]["t/0"] == {"sharding_type": "table_wise", "ranks": [3]}
    assert doc["tables"]["t/1"] == {"sharding_type": "row_wise", "ranks": [0, 1, 2, 3]}
    assert doc["tables"]["t/2"]["sharding_type"] == "data_parallel"
    back = from_torchrec(doc, TABLES, 4)
    assert back.assignment == plan.assignment


@pytest.mark.parametrize("change,message", [
    (lambda d: d["tables"].update({"t/9": d["tables"]["t/0"]}), "t/9: no such table"),
    (lambda d: d["tables"]["t/0"].update(ranks=[7]), "not all among the platform's 0-3"),
    (lambda d: d["tables"]["t/0"].update(ranks=[0, 1]), "sits on one rank"),
    (lambda d: d["tables"]["t/1"].update(ranks=[0, 1]), "spans every rank"),
    (lambda d: d["tables"]["t/0"].update(sharding_type="grid_shard"), "not modelled"),
    (lambda d: d["tables"]["t/0"].update(sharding_type="column_wise", ranks=[0, 0, 1]),
     "two or more ranks"),
    (lambda d: d["tables"]["t/0"].update(sharding_type="column_wise", ranks=[0, 1, 2]),
     "does not split into 3"),
    (lambda d: d["tables"].pop("t/3"), "leaves out 1 table"),
    (lambda d: d.pop("tables"), "expected"),
])
def test_a_plan_that_cannot_run_here_is_named(change, message):
    doc = to_torchrec(Plan("mine", 4, {"t/0": 3, "t/1": "rw", "t/2": "dp", "t/3": 0}))
    change(doc)
    with pytest.raises(PlanError, match=message):
        from_torchrec(doc, TABLES, 4)


def test_torchrec_own_planner_is_ranked_beside_the_search():
    pytest.importorskip("torchrec.distributed.planner",
                        reason="TorchRec is not installed (optional: torchrec and "
                               "fbgemm-gpu-cpu CPU wheels)")
    from paths import SCENARIOS

    from predictors.plan.rank_sharding import rank_shardings
    from predictors.scenario.format import load_scenario

    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "pcie-4x-a100"}
    ranking = rank_shardings(doc, budget_s=3, torchrec_planner=True)
    theirs = next(p for p in ranking.plans if p.plan.name == "TorchRec planner")
    assert set(theirs.plan.assignment) == {f"tables/{j}" for j in range(8)}
    assert ranking.plans[0].iteration_ms <= theirs.iteration_ms
