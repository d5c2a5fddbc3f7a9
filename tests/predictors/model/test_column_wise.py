"""Column-wise sharding: a table's dim cut into equal shards on several ranks."""
import copy

import pytest
from paths import SCENARIOS

from predictors.engine.predict import predict
from predictors.model.capture import capture_training_step
from predictors.model.sharding import (
    ColumnWise,
    Plan,
    PlanError,
    check_memory,
    placement,
    plan_from_scenario,
    tables_of,
)
from predictors.model.workload import RankShard, build_workload
from predictors.scenario.format import ScenarioError, load_scenario, validate_scenario


@pytest.fixture
def dlrm():
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "dgx-a100"}
    return validate_scenario(doc)


def _nodes(graph, prefix):
    return [graph.nodes[i] for i in sorted(graph.nodes)
            if graph.nodes[i]["name"].startswith(prefix)]


def test_a_shard_is_looked_up_at_its_width_and_joined_after_the_exchange(dlrm):
    keys = [t.key for t in tables_of(dlrm)]
    dim = tables_of(dlrm)[0].dim
    shard = RankShard(0, 8, frozenset(keys[:2]), 64, 512, columns={keys[0]: (0, 3)})
    graph = capture_training_step(build_workload(dlrm, shard=shard), gpu=True)
    forward = [n for n in _nodes(graph, "aten::_embedding_bag") if n["phase"] == "forward"]
    widths = {n["lookup"]["table"]: n["output_shapes"][0][1] for n in forward}
    assert widths == {keys[0]: dim // 2, keys[1]: dim}
    (a2a,) = [n for n in _nodes(graph, "mldse::all_to_all") if n["phase"] == "forward"]
    # one entry per shard: the column-wise table twice at half width, the others whole
    assert a2a["output_shapes"] == [(64, dim // 2)] * 2 + [(64, dim)] * (len(keys) - 1)
    joins = [n for n in _nodes(graph, "aten::cat") if n["phase"] == "forward"
             and n["input_shapes"][:2] == [(64, dim // 2), (64, dim // 2)]]
    assert joins and joins[0]["output_shapes"] == [(64, dim)]


def test_scenario_forms_of_a_placement(dlrm):
    keys = [t.key for t in tables_of(dlrm)]
    doc = copy.deepcopy(dlrm)
    doc["parallelism"] = {"embedding_sharding": {keys[0]: {"kind": "cw", "ranks": [1, 2]},
                                                 keys[1]: {"kind": "tw", "rank": 5},
                                                 keys[2]: {"kind": "rw"}}}
    doc = validate_scenario(doc)
    tables = tables_of(doc)
    plan = plan_from_scenario(doc, tables, 8, auto=lambda: None)
    assert plan.assignment[keys[0]] == ColumnWise((1, 2))
    assert plan.assignment[keys[1]] == 5 and plan.assignment[keys[2]] == "rw"
    assert plan.to_json()["assignment"][keys[0]] == {"kind": "cw", "ranks": [1, 2]}
    assert plan.local(2) >= {keys[0]} and plan.columns == {keys[0]: (1, 2)}
    bytes_ = plan.rank_bytes(tables)
    assert bytes_[1] >= tables[0].bytes / 2 and bytes_[2] >= tables[0].bytes / 2
    # and the prediction runs the plan
    assert predict(doc).iteration_ms > 0


@pytest.mark.parametrize("value,message", [
    ({"kind": "cw", "ranks": [0, 0]}, "must differ"),
    ({"kind": "cw", "ranks": [0, 1, 2]}, "does not split into 3 equal"),
    ({"kind": "cw", "ranks": [0, 8]}, "from 0 to 7"),
    ({"kind": "tw", "rank": 9}, "from 0 to 7"),
])
def test_bad_column_wise_placements_name_the_table(dlrm, value, message):
    key = tables_of(dlrm)[0].key
    doc = copy.deepcopy(dlrm)
    doc["parallelism"] = {"embedding_sharding": {key: value}}
    with pytest.raises(ScenarioError, match=message) as info:
        validate_scenario(doc)
    assert info.value.issues[0].field == f"parallelism.embedding_sharding.{key}"


def test_placement_parses_and_refuses():
    assert placement(3) == 3 and placement({"kind": "dp"}) == "dp"
    assert placement({"kind": "cw", "ranks": [0, 2]}, 16, 4) == ColumnWise((0, 2))
    with pytest.raises(PlanError, match="equal shards"):
        placement({"kind": "cw", "ranks": [0, 1, 2]}, 16, 4)
    with pytest.raises(PlanError, match="unknown sharding kind"):
        placement({"kind": "grid", "ranks": [0, 1]}, 16, 4)


def test_column_shards_split_a_table_that_fits_no_single_rank(dlrm):
    tables = tables_of(dlrm)
    big = tables[0]
    memory = big.bytes * 0.6   # half of it fits, all of it does not
    others = {t.key: 1 + i % 7 for i, t in enumerate(tables[1:])}
    with pytest.raises(PlanError):
        check_memory(Plan("tw", 8, {big.key: 0, **others}), [big], memory)
    check_memory(Plan("cw", 8, {big.key: ColumnWise((0, 1)), **others}), [big], memory)
