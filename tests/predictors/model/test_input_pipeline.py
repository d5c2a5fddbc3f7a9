"""TorchRec's pipeline around a step: the batch's copy, the sparse features' input
distribution, and what the host waits for."""
import copy

import pytest
from paths import SCENARIOS

from predictors.costs.op_costs import cost_op_graph
from predictors.engine.predict import predict, prepare
from predictors.engine.simulate import rank_items
from predictors.model.capture import capture_training_step
from predictors.model.comm_ops import INPUT_DIST_OPS
from predictors.model.input_pipeline import COPY_BLOCK, DIST_BLOCK, TAKE_BLOCK
from predictors.model.sharding import tables_of
from predictors.model.workload import RankShard, build_workload
from predictors.scenario.format import ScenarioError, load_scenario, validate_scenario


@pytest.fixture
def dlrm():
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "dgx-a100"}
    doc["training"]["input_pipeline"] = "torchrec"
    return validate_scenario(doc)


def _pipeline_ops(graph):
    return [graph.nodes[i] for i in sorted(graph.nodes)
            if graph.nodes[i]["block"] in (COPY_BLOCK, DIST_BLOCK, TAKE_BLOCK)]


def test_a_rank_copies_its_batch_and_sends_each_sharding_kinds_features(dlrm):
    keys = [t.key for t in tables_of(dlrm)]
    tables = next(n for n in dlrm["model"]["nodes"] if n["kind"] == "embedding_tables")
    pooling = sum(t["pooling"] for t in tables["params"]["tables"])
    shard = RankShard(0, 8, frozenset(keys[:3]), 64, 512, rowwise=frozenset(keys[-1:]))
    graph = capture_training_step(build_workload(dlrm, shard=shard), gpu=True)
    ops = _pipeline_ops(graph)
    copies = [n for n in ops if n["block"] == COPY_BLOCK]
    # dense features, labels, the KJT's values and lengths of this rank's 64 samples
    assert [n["name"] for n in copies] == ["aten::_to_copy"] * 4
    assert [tuple(n["input_shapes"][0]) for n in copies] == [
        (64, 13), (64, 1), (64 * pooling,), (64 * len(keys),)]
    names = [n["name"] for n in ops if n["name"].startswith("mldse::")]
    # table-wise and row-wise tables: an input distribution each
    assert names == ["mldse::kjt_splits", "mldse::kjt_all_to_all",
                     "mldse::kjt_all_to_all"] * 2
    lengths = [n for n in ops if n["name"] == "mldse::kjt_all_to_all"][0::2]
    values = [n for n in ops if n["name"] == "mldse::kjt_all_to_all"][1::2]
    assert [n["input_shapes"][0][0] for n in values] == [
        64 * sum(t["pooling"] for t in tables["params"]["tables"][:-1]),
        64 * tables["params"]["tables"][-1]["pooling"]]
    # a row-wise feature's lengths go to each of the 8 buckets of its rows
    assert [n["input_shapes"][0][0] for n in lengths] == [64 * (len(keys) - 1), 64 * 8]
    # sent after the forward's own exchange, before backward
    order = [graph.nodes[i]["name"] for i in sorted(graph.nodes)]
    assert order.index("mldse::all_to_all") < order.index("mldse::kjt_splits")
    assert all(n["phase"] == "forward" for n in ops)


def test_the_copy_and_the_input_distribution_run_on_streams_of_their_own(dlrm):
    keys = [t.key for t in tables_of(dlrm)]
    doc, platform, profile = prepare(dlrm)
    shard = RankShard(0, 8, frozenset(keys[:3]), 64, 512)
    graph = capture_training_step(build_workload(doc, shard=shard), gpu=True)
    items = rank_items(cost_op_graph(graph, platform, profile))
    streams = {}
    for item in items[1:]:
        for call in item.calls:
            for k in call.kernels:
                op = item.payload
                if op.name in INPUT_DIST_OPS:   # NCCL's stream waits for the dist stream
                    assert k.wait_streams == (DIST_BLOCK,)
                elif not k.collective:
                    streams.setdefault(op.block, set()).add(k.stream)
    # neither waits behind the forward's kernels; the forward's side runs among them
    assert streams[COPY_BLOCK] == {COPY_BLOCK} and streams[DIST_BLOCK] == {DIST_BLOCK}
    assert streams[TAKE_BLOCK] == {"compute"}


def test_data_parallel_tables_and_one_gpu_have_no_input_distribution(dlrm):
    keys = [t.key for t in tables_of(dlrm)]
    shard = RankShard(0, 8, frozenset(), 64, 512, replicated=frozenset(keys))
    ranked = capture_training_step(build_workload(dlrm, shard=shard), gpu=True)
    single = copy.deepcopy(dlrm)
    single["platform"] = {"preset": "a100-1"}
    alone = capture_training_step(build_workload(single), gpu=True)
    for graph in (ranked, alone):
        ops = _pipeline_ops(graph)
        assert ops and not [n for n in ops if n["name"].startswith("mldse::")]
        assert any(n["name"] == "aten::cumsum" for n in ops)   # the lookups' offsets
    # the CPU device and the resident pipeline record none of it
    assert not _pipeline_ops(capture_training_step(build_workload(dlrm, shard=shard)))
    resident = copy.deepcopy(dlrm)
    resident["training"]["input_pipeline"] = "resident"
    assert not _pipeline_ops(capture_training_step(build_workload(resident, shard=shard),
                                                   gpu=True))


def test_the_host_waits_for_the_splits_and_the_step_takes_longer(dlrm):
    piped = predict(dlrm)
    resident = copy.deepcopy(dlrm)
    resident["training"]["input_pipeline"] = "resident"
    plain = predict(resident)
    assert piped.iteration_ms > plain.iteration_ms
    # host-bound, with the what-if that TorchRec's pipeline adds
    assert piped.verdict["bound"] == plain.verdict["bound"] == "host"
    assert any("sharding kinds" in w for w in piped.verdict["what_if"])
    assert not any("sharding kinds" in w for w in plain.verdict["what_if"])
    tl = piped.timeline
    lanes = {i: ln for i, ln in enumerate(tl.lanes)}

    def events(lane_name):
        return sorted((j for j in range(len(tl.start_us)) if lanes[tl.lane[j]].rank == 0
                       and lanes[tl.lane[j]].name == lane_name), key=lambda j: tl.start_us[j])

    comm = events("stream 1 (communication)")
    main = events("CPU main thread")
    calls = [j for j in main if tl.names[tl.name_id[j]] == "nccl:all_to_all"]
    # the pooled embeddings' exchange, then the splits: the host waits for them to end
    splits, call = comm[1], calls[1]
    end = tl.start_us[splits] + tl.dur_us[splits]
    # the call holds the thread over the whole exchange
    assert tl.start_us[call] <= tl.start_us[splits] and tl.start_us[call] + tl.dur_us[call] >= end
    after = main[main.index(call) + 1]
    assert tl.start_us[after] >= end - 1e-6


def test_an_unknown_pipeline_is_named(dlrm):
    doc = copy.deepcopy(dlrm)
    doc["training"]["input_pipeline"] = "dali"
    with pytest.raises(ScenarioError, match="training.input_pipeline"):
        validate_scenario(doc)
