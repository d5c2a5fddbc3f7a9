"""Table-row-wise tables (TorchRec's TWRW): rows over one node's ranks, summed there,
then one all-to-all across the nodes."""
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from predictors.engine.parallel import RankGraphs, collective_timer
from predictors.engine.plan_evaluator import PlanEvaluator
from predictors.engine.predict import prepare
from predictors.model.sharding import (
    ROW_WISE,
    Plan,
    PlanError,
    TableRowWise,
    check_nodes,
    placement,
)
from predictors.plan.plan_memory import PlanMemory
from predictors.plan.search import _other_kinds
from predictors.plan.torchrec_plans import from_torchrec, to_torchrec
from predictors.scenario.format import ScenarioError

SMALL = Path(__file__).resolve().parents[3] / "resources" / "scenarios" / "small_dlrm.json"
NODE0, NODE1 = tuple(range(8)), tuple(range(8, 16))


def test_placement_parses_normalizes_and_refuses():
    assert placement({"kind": "twrw", "ranks": list(NODE1)}, 16, 16) == TableRowWise(NODE1)
    # one node holding every rank: the table is row-wise
    assert placement({"kind": "twrw", "ranks": [0, 1]}, 16, 2) == ROW_WISE
    with pytest.raises(PlanError, match="consecutive"):
        placement({"kind": "twrw", "ranks": [0, 2]}, 16, 4)
    with pytest.raises(PlanError, match="0-15"):
        placement({"kind": "twrw", "ranks": [16, 17]}, 16, 16)
    with pytest.raises(PlanError, match="not the ranks of one node"):
        check_nodes(Plan("p", 16, {"t/0": TableRowWise(tuple(range(4, 12)))}), 8)
    check_nodes(Plan("p", 16, {"t/0": TableRowWise(NODE1)}), 8)


def _doc(sharding=None):
    doc = json.loads(SMALL.read_text())
    doc["platform"] = {"preset": "2node-8x-h100"}
    if sharding is not None:
        doc["parallelism"] = {"embedding_sharding": sharding}
    return doc


def test_a_scenario_names_a_node_that_is_not_one():
    with pytest.raises(ScenarioError, match="one node's, all of them"):
        prepare(_doc({"tables/0": {"kind": "twrw", "ranks": list(range(4, 12))}}), None)


@pytest.fixture(scope="module")
def graphs():
    doc, platform, prof = prepare(_doc(), None)
    return RankGraphs(doc, platform, prof)


def _plan(graphs, **kinds):
    keys = [t.key for t in graphs.tables]
    assignment = {k: i % graphs.ranks for i, k in enumerate(keys)}
    assignment.update({keys[int(i)]: where for i, where in kinds.items()})
    return Plan("p", graphs.ranks, assignment)


def test_each_rank_runs_the_node_exchange_and_only_its_node_looks_up(graphs):
    plan = _plan(graphs, **{"0": TableRowWise(NODE1)})
    key = graphs.tables[0].key
    for r in (0, 7, 8, 15):
        ops = graphs.rank_graph(plan, r).ops
        names = [op.name for op in ops]
        assert names.count("mldse::node_reduce_scatter") == 1
        assert names.count("mldse::node_all_gather") == 1
        looked_up = any(op.table == key and "embedding_bag" in op.name for op in ops)
        assert looked_up == (r in NODE1)


@pytest.mark.parametrize("kinds", [
    {"0": TableRowWise(NODE0)},   # the other node's ranks hold no table at all
    pytest.param({"0": TableRowWise(NODE1), "3": TableRowWise(NODE0)},
                 marks=pytest.mark.slow),
    pytest.param({"0": TableRowWise(NODE1), "1": ROW_WISE}, marks=pytest.mark.slow)])
def test_composed_plans_equal_captured_ones(graphs, kinds):
    plan = _plan(graphs, **kinds)
    composed = PlanEvaluator(graphs).spans_ms([plan])[0]
    assert np.allclose(composed, graphs.rank_spans_ms(plan), rtol=1e-9)


def test_the_exchange_crosses_the_network_once(graphs):
    """A node's reduce-scatter on NVLink, then an all-to-all of each rank's share: with
    a slower NIC the row-wise reduce-scatter over both nodes slows down by more."""
    nbytes, ranks = 16e6, graphs.ranks
    fast = collective_timer(graphs.platform)
    node = fast.timed("node_reduce_scatter", nbytes, ranks)[0]
    parts = fast.timed("reduce_scatter", nbytes, 8)[0] + \
        fast.timed("all_to_all", nbytes / 8, ranks)[0]
    assert node == pytest.approx(parts)
    assert "reduce-scatter over 8 ranks" in fast.timed("node_reduce_scatter", nbytes, ranks)[1]
    slow = collective_timer(dataclasses.replace(graphs.platform, inter_link="nic200"))
    rw_cost = slow.timed("reduce_scatter", nbytes, ranks)[0] - \
        fast.timed("reduce_scatter", nbytes, ranks)[0]
    node_cost = slow.timed("node_reduce_scatter", nbytes, ranks)[0] - node
    assert rw_cost > node_cost > 0


def test_memory_torchrec_and_the_search_know_it(graphs):
    plan = _plan(graphs, **{"0": TableRowWise(NODE1)})
    table = graphs.tables[0]
    held = PlanMemory(graphs).parts(plan, graphs.tables)
    assert held[8]["tables"] >= table.shard_bytes(8)
    base = PlanMemory(graphs).parts(_plan(graphs, **{"0": 1}), graphs.tables)
    assert held[0]["tables"] < base[0]["tables"] + 1 and held[1]["tables"] < base[1]["tables"]
    doc = to_torchrec(plan)
    assert doc["tables"][table.key] == {"sharding_type": "table_row_wise",
                                        "ranks": list(NODE1)}
    assert from_torchrec(doc, graphs.tables, graphs.ranks).assignment == plan.assignment
    spans = np.arange(graphs.ranks, dtype=float)[::-1]   # rank 15 least loaded
    moved = _other_kinds(plan, spans, graphs.tables[1], graphs.ranks, node_size=8)
    assert any(p.assignment[graphs.tables[1].key] == TableRowWise(NODE1) for p in moved)
    assert not any(isinstance(p.assignment[graphs.tables[1].key], TableRowWise)
                   for p in _other_kinds(plan, spans, graphs.tables[1], graphs.ranks))


def test_the_exchange_is_booked_as_the_embeddings_exchange():
    from predictors.model.comm_ops import PROFILER_NAMES
    from predictors.plan.rank_sharding import EXCHANGE
    # every collective but DDP's all-reduce carries the embeddings
    assert set(PROFILER_NAMES.values()) - {"nccl:all_reduce"} <= set(EXCHANGE)


def test_the_largest_batch_holds_the_rows_on_their_node(graphs):
    from predictors.plan.capacity import _rank_memories
    doc = json.loads(json.dumps(graphs.doc))
    doc["model"]["nodes"][2]["params"]["tables"][0]["rows"] = 10_000_000
    plan = _plan(graphs, **{"0": TableRowWise(NODE1)})
    peaks = [m.peak for m in _rank_memories(doc, graphs.platform, plan, gpu=True)]
    block = 10_000_000 / 8 * doc["model"]["nodes"][2]["params"]["tables"][0]["dim"] * 4
    assert peaks[8] - peaks[0] > 0.9 * block   # node 1 holds the rows, node 0 none
