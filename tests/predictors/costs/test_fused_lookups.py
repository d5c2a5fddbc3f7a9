"""Fused embedding lookups (``kernel: fused``): the module, its capture and its costs."""
import copy

import pytest
import torch
from paths import SCENARIOS

from predictors.costs.fused_lookups import fused_seconds, split_fused
from predictors.costs.op_costs import cost_op_graph, kernel_seconds
from predictors.engine.parallel import RankGraphs
from predictors.engine.predict import predict
from predictors.hardware.platforms import resolve_platform
from predictors.hardware.specs import device_spec
from predictors.model.capture import capture_training_step
from predictors.model.embedding_blocks import (
    FusedEmbeddingTables,
    fused_groups,
    per_table_doc,
    with_kernel,
)
from predictors.model.sharding import tables_of
from predictors.model.workload import RankShard, build_workload, training_step
from predictors.scenario.format import ScenarioError, load_scenario, validate_scenario


def _with_kernel(doc: dict, kernel: str) -> dict:
    return validate_scenario(with_kernel(doc, kernel))


@pytest.fixture
def dlrm():
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["training"]["batch_size"] = 32
    doc["model"]["nodes"][2]["params"]["tables"][5]["dim"] = 16  # all 16 wide
    return validate_scenario(doc)


def _names(graph, name):
    return [graph.nodes[i] for i in sorted(graph.nodes) if graph.nodes[i]["name"] == name]


def _tabled(graph, name):
    """The ops ``name`` that read a table, in table order."""
    return sorted((n for n in _names(graph, name) if n["lookup"]),
                  key=lambda n: n["lookup"]["table"])


def _check_split(fused_graph, per_table_graph, names, tables):
    for name in names:
        fused = _tabled(fused_graph, name)
        every = _tabled(per_table_graph, name)   # table-major, capture order inside
        assert fused and len(every) == len(fused) * tables, name
        for i, node in enumerate(fused):
            parts, single = split_fused(node), every[i::len(fused)]
            assert len(parts) == tables, name
            for part, one in zip(parts, single):
                assert part["lookup"] == one["lookup"], name
                for key in ("input_shapes", "output_shapes", "input_nnz", "output_nnz"):
                    assert part[key] == one[key], (name, key)
        assert split_fused(every[0]) is None


def test_the_kernel_is_a_checked_block_parameter(dlrm):
    assert dlrm["model"]["nodes"][2]["params"]["kernel"] == "per_table"  # the default
    bad = copy.deepcopy(dlrm)
    bad["model"]["nodes"][2]["params"]["kernel"] = "tbe"
    with pytest.raises(ScenarioError, match="per_table"):
        validate_scenario(bad)


def test_fused_and_per_table_lookups_give_the_same_step(dlrm):
    """Same weights, same indices: the same pooled embeddings, loss and updated rows."""
    torch.manual_seed(0)
    per_table = build_workload(_with_kernel(dlrm, "per_table"), device="cpu")
    fused = build_workload(_with_kernel(dlrm, "fused"), device="cpu")
    tables = per_table.module.blocks["tables"]
    block = fused.module.blocks["tables"]
    assert isinstance(block, FusedEmbeddingTables) and block.groups == [list(range(8))]
    with torch.no_grad():
        block.weights[0].copy_(torch.cat([w for w in tables.sparse_weights()]))
        fused.module.load_state_dict({k: v for k, v in per_table.module.state_dict().items()
                                      if "tables" not in k}, strict=False)
    a, b = per_table.make_batch(3), fused.make_batch(3)
    (idx, off), = b["sparse"]["tables"]
    assert idx.shape[0] == sum(i.shape[0] for i, _ in a["sparse"]["tables"])
    assert off.shape[0] == 8 * 32
    loss_a = training_step(per_table.module, a, per_table.optimizer())
    loss_b = training_step(fused.module, b, fused.optimizer())
    torch.testing.assert_close(loss_a, loss_b)
    torch.testing.assert_close(torch.cat(tables.sparse_weights()), block.weights[0].detach())


def test_a_fused_capture_has_one_lookup_per_group(dlrm):
    graph = capture_training_step(build_workload(_with_kernel(dlrm, "fused")), gpu=True)
    forward = [n for n in _names(graph, "aten::_embedding_bag") if n["phase"] == "forward"]
    assert len(forward) == 1
    lookup = forward[0]["lookup"]
    assert [p["table"] for p in lookup["parts"]] == [f"tables/{j}" for j in range(8)]
    assert lookup["rows"] == sum(p["rows"] for p in lookup["parts"])
    assert forward[0]["input_shapes"][1] == (sum(p["lookups"] for p in lookup["parts"]),)
    # the backward and the sparse update know the tables too
    update = [n for n in _names(graph, "aten::add_") if n["lookup"]]
    assert len(update) == 1 and update[0]["lookup"]["parts"] == lookup["parts"]
    per_table = capture_training_step(build_workload(_with_kernel(dlrm, "per_table")),
                                      gpu=True)
    assert graph.number_of_nodes() < per_table.number_of_nodes() - 40


SPLIT_OPS = ("aten::_embedding_bag", "aten::_embedding_bag_backward", "aten::_indices",
             "aten::_values", "aten::add_")


def test_split_gives_each_table_its_own_shapes(dlrm):
    graph = capture_training_step(build_workload(_with_kernel(dlrm, "fused")), gpu=True)
    per_table = capture_training_step(build_workload(_with_kernel(dlrm, "per_table")),
                                      gpu=True)
    _check_split(graph, per_table, SPLIT_OPS, 8)


def test_split_reads_roles_where_the_group_sizes_coincide(dlrm):
    """Two tables of 40 and 24 rows, one index per bag, batch 32: the group's rows, its
    indices and its bags are all 64."""
    doc = copy.deepcopy(dlrm)
    doc["model"]["nodes"][2]["params"]["tables"] = [
        {"rows": 40, "dim": 16, "pooling": 1, "distribution": {"kind": "uniform"}},
        {"rows": 24, "dim": 16, "pooling": 1, "distribution": {"kind": "uniform"}}]
    graph = capture_training_step(build_workload(_with_kernel(doc, "fused")), gpu=True)
    per_table = capture_training_step(build_workload(_with_kernel(doc, "per_table")),
                                      gpu=True)
    _check_split(graph, per_table, SPLIT_OPS, 2)


def test_split_row_wise_blocks_in_a_sharded_rank(dlrm):
    doc = _with_kernel(dlrm, "fused")
    keys = [t.key for t in tables_of(doc)]
    shard = RankShard(0, 4, frozenset(), 8, 32, rowwise=frozenset(keys[:3]))
    fused = capture_training_step(build_workload(doc, shard=shard), gpu=True)
    single = capture_training_step(build_workload(per_table_doc(doc), shard=shard),
                                   gpu=True)
    _check_split(fused, single, ("aten::_embedding_bag", "aten::_embedding_bag_backward"), 3)


def test_a_fused_kernel_pays_one_floor():
    assert fused_seconds([3e-6, 4e-6, 5e-6], 2.5e-6) == pytest.approx(7e-6)
    assert fused_seconds([3e-6, 3e-6], 5e-6) == pytest.approx(3e-6)  # never below the longest
    assert fused_seconds([], 2.5e-6) == 0.0


@pytest.mark.parametrize("preset", ["a100-1", "local-cpu"])
def test_fused_lookups_cost_their_tables(dlrm, preset):
    platform = resolve_platform({"preset": preset})
    gpu = platform.device != "cpu"
    fused = capture_training_step(build_workload(_with_kernel(dlrm, "fused")), gpu=gpu)
    single = capture_training_step(build_workload(_with_kernel(dlrm, "per_table")), gpu=gpu)
    device = device_spec(platform.device, platform.threads)
    for name in ("aten::_embedding_bag", "aten::_embedding_bag_backward", "aten::add_"):
        (node,) = _tabled(fused, name)
        parts = _tabled(single, name)
        _, (fused_s,), (model,) = kernel_seconds([node], device)
        _, secs, _ = kernel_seconds(parts, device)
        assert fused_s == pytest.approx(fused_seconds(secs, device.kernel_floor_s))
        assert "fused: 8 tables" in model
        # folded back in place among other ops
        others = [n for n in _names(single, "aten::addmm")][:2]
        _, mixed, _ = kernel_seconds([others[0], node, others[1]], device)
        _, alone, _ = kernel_seconds(others, device)
        assert mixed == pytest.approx([alone[0], fused_s, alone[1]])
    costed = cost_op_graph(fused, platform)
    assert sum(1 for op in costed.ops if op.table.count("tables/") == 8) >= 3


def test_fused_steps_are_predicted_faster_on_a_gpu(dlrm):
    """Fewer ops: less CPU dispatch in front of a GPU, the same memory."""
    doc = copy.deepcopy(dlrm)
    doc["platform"] = {"preset": "a100-1"}
    per_table = predict(_with_kernel(doc, "per_table"))
    fused = predict(_with_kernel(doc, "fused"))
    assert fused.iteration_ms < per_table.iteration_ms
    assert fused.num_ops < per_table.num_ops
    peak = [p.per_rank[0]["peak_memory_bytes"] for p in (per_table, fused)]
    assert peak[1] == pytest.approx(peak[0], rel=0.05)


def test_a_rank_fuses_its_own_tables_and_its_row_wise_blocks_apart(dlrm):
    doc = _with_kernel(dlrm, "fused")
    keys = [t.key for t in tables_of(doc)]
    shard = RankShard(1, 4, frozenset(keys[:3]), 8, 32, rowwise=frozenset(keys[6:]))
    tables = doc["model"]["nodes"][2]["params"]["tables"]
    assert fused_groups(tables, "tables", shard) == [[0, 1, 2], [6, 7]]
    workload = build_workload(doc, shard=shard)
    block = workload.module.blocks["tables"]
    # its weights hold its tables and its blocks of the row-wise ones, nothing else
    rows = [w.shape[0] for w in block.weights]
    assert rows[0] == sum(tables[j]["rows"] for j in range(3))
    assert rows[1] < tables[6]["rows"] + tables[7]["rows"]
    graph = capture_training_step(workload, gpu=True)
    forward = [n for n in _names(graph, "aten::_embedding_bag") if n["phase"] == "forward"]
    assert len(forward) == 2
    assert [len(n["lookup"]["parts"]) for n in forward] == [3, 2]
    assert _names(graph, "mldse::all_to_all") and _names(graph, "mldse::reduce_scatter")


def test_planners_still_see_each_tables_cost(dlrm):
    doc = _with_kernel(dlrm, "fused")
    doc["platform"] = {"preset": "dgx-a100"}
    doc = validate_scenario(doc)
    platform = resolve_platform(doc["platform"])
    fused = RankGraphs(doc, platform).table_seconds()
    single = RankGraphs(per_table_doc(doc), platform).table_seconds()
    unfused = per_table_doc(doc)
    assert unfused is not doc and per_table_doc(unfused) is unfused
    assert fused == pytest.approx(single)
    assert all(s > 0 for s in fused.values())
    result = predict(doc)
    assert set(result.sharding["assignment"]) == set(fused) and len(result.per_rank) == 8
