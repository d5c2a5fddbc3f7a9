"""Peak device memory of a captured step, against the same step run for real."""
import copy

import numpy as np
import pytest
import torch
from paths import SCENARIOS

from predictors.calibrate.measure import measure
from predictors.calibrate.samples import random_dlrm, random_transformer
from predictors.engine.predict import predict
from predictors.model.capture import capture_training_step
from predictors.model.memory import GPU_BLOCK, memory_note, rank_memory
from predictors.model.workload import RankShard, build_workload
from predictors.plan.sweep import sweep
from predictors.scenario.format import load_scenario


def small(doc: dict, batch: int = 64) -> dict:
    doc = copy.deepcopy(doc)
    doc["training"]["batch_size"] = batch
    return doc


def captured_memory(doc, gpu=False, shard=None):
    return capture_training_step(build_workload(doc, shard=shard), gpu=gpu).graph["memory"]


@pytest.mark.parametrize("make", [random_dlrm, random_transformer])
def test_predicted_peak_matches_the_real_step_on_the_cpu(make):
    doc = small(make(np.random.default_rng(5)), batch=32)
    memory = captured_memory(doc)
    real = measure(doc, iters=1, warmup=2, memory=True)["peak_memory_bytes"]
    # every byte is accounted for: same tensors, same lifetimes as the real run
    assert memory.peak == pytest.approx(real, rel=0.01)
    assert memory.peak > memory.resident_total


def test_the_breakdown_adds_up_and_names_the_peak_op():
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    memory = captured_memory(doc)
    params = sum(p.numel() * 4 for p in build_workload(doc).module.parameters())
    assert memory.resident["parameters"] == params
    assert memory.peak == memory.resident_total + sum(memory.at_peak.values())
    assert memory.peak == memory.curve.max()
    assert memory.peak_op.startswith("aten::") and "backward" in memory.peak_op


def test_a_sparse_gradient_is_counted_once_and_without_its_indices():
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    tables = next(n for n in doc["model"]["nodes"] if n["kind"] == "embedding_tables")
    batch = doc["training"]["batch_size"]
    memory = captured_memory(doc)
    # the embedding backward's values (one row per lookup); the indices are the
    # batch's own, reshaped; AccumulateGrad wraps them without a copy
    sparse = sum(batch * t["pooling"] * t["dim"] * 4 for t in tables["params"]["tables"])
    dense = sum(p.numel() * 4 for nid, block in build_workload(doc).module.blocks.items()
                if nid != tables["id"] for p in block.parameters())
    assert memory.gradients == sparse + dense


def test_gpu_allocations_round_up_to_allocator_blocks():
    doc = small(load_scenario(SCENARIOS / "small_dlrm.json"), batch=3)
    cpu, gpu = captured_memory(doc), captured_memory(doc, gpu=True)
    assert gpu.peak > cpu.peak
    assert gpu.resident["inputs"] % GPU_BLOCK == 0 and gpu.gradients % GPU_BLOCK == 0


def test_a_rank_holds_only_its_own_tables():
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    tables = next(n for n in doc["model"]["nodes"] if n["kind"] == "embedding_tables")
    batch = doc["training"]["batch_size"]
    one = RankShard(0, 2, frozenset({f"{tables['id']}/0"}), batch // 2, batch)
    memory = captured_memory(doc, gpu=True, shard=one)
    every = captured_memory(doc, gpu=True)
    t0 = tables["params"]["tables"][0]
    table_bytes = sum(t["rows"] * t["dim"] * 4 for t in tables["params"]["tables"])
    assert every.resident["parameters"] - memory.resident["parameters"] == pytest.approx(
        table_bytes - t0["rows"] * t0["dim"] * 4, abs=GPU_BLOCK * 16)
    # DDP's buckets: one copy of the dense gradients, in allocator blocks
    dense = sum(p.numel() * 4 for nid, b in build_workload(doc, shard=one).module.blocks.items()
                if nid != tables["id"] for p in b.parameters())
    assert dense <= memory.resident["communication buffers"] <= dense + 4 * GPU_BLOCK


def test_a_step_that_does_not_fit_is_predicted_with_a_note():
    doc = small(load_scenario(SCENARIOS / "bert_base.json"), batch=512)
    result = predict(doc)   # a100-1: 40 GB
    rank = result.per_rank[0]
    assert rank["memory"]["fits"] is False
    assert rank["peak_memory_bytes"] > rank["memory"]["device_bytes"]
    assert result.notes[0].startswith("does not fit: the step needs")
    assert "NVIDIA A100" in result.notes[0]
    assert predict(small(doc, 8)).per_rank[0]["memory"]["fits"] is True


def test_unknown_device_memory_is_not_judged():
    memory = captured_memory(small(load_scenario(SCENARIOS / "small_dlrm.json")))
    figures = rank_memory(memory, 0.0)
    assert "fits" not in figures["memory"]
    assert memory_note([dict(rank=0, **figures)], "cpu") is None


def test_a_sweep_prefers_the_fastest_value_that_fits():
    doc = load_scenario(SCENARIOS / "bert_base.json")
    result = sweep(doc, "batch_size", [8, 64, 512])
    rows = {r.value: r for r in result.rows}
    assert rows[512].fits is False and rows[64].fits is True
    assert rows[8].peak_memory_bytes < rows[64].peak_memory_bytes < rows[512].peak_memory_bytes
    assert result.best() is not rows[512]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_predicted_peak_matches_max_memory_allocated_on_cuda():
    doc = small(random_transformer(np.random.default_rng(3)), batch=4)
    memory = captured_memory(doc, gpu=True)
    real = measure(doc, device="cuda", iters=1, warmup=2, memory=True)["peak_memory_bytes"]
    assert memory.peak == pytest.approx(real, rel=0.05)


def test_the_timeline_carries_each_ranks_memory_over_time():
    doc = load_scenario(SCENARIOS / "small_dlrm.json")
    doc["platform"] = {"preset": "pcie-4x-a100"}
    result = predict(doc)
    tl = result.timeline
    lanes = [k for k, lane in enumerate(tl.lanes) if lane.kind == "counter"]
    assert sorted(tl.lanes[k].rank for k in lanes) == [0, 1, 2, 3]
    for k in lanes:
        times, values = tl.counters[k]
        rank = result.per_rank[tl.lanes[k].rank]
        assert values.max() == rank["peak_memory_bytes"]
        assert values[0] == sum(rank["memory"]["resident_bytes"].values())
        assert np.all(np.diff(times) >= 0) and times[-1] <= tl.end_us


def test_adamw_keeps_two_moments_per_dense_weight_and_records_a_steady_step():
    doc = small(random_transformer(np.random.default_rng(5)), batch=4)
    doc["training"]["optimizer"] = "adamw"
    graph = capture_training_step(build_workload(doc), gpu=True)
    memory = graph.graph["memory"]
    assert memory.resident["optimizer state"] == 2 * memory.resident["parameters"]
    names = [graph.nodes[i]["name"] for i in graph.nodes]
    assert "aten::zeros_like" not in names   # the state is made by the first step only
    assert "aten::_foreach_lerp_" in names   # torch's multi-tensor Adam on a GPU
    # the CPU step counters: host work, no kernel, no device memory
    host = [graph.nodes[i] for i in graph.nodes if graph.nodes[i].get("host")]
    assert host and all(n["phase"] == "optimizer" for n in host)
    result = predict(doc | {"platform": {"preset": "h100-1"}})
    resident = result.per_rank[0]["memory"]["resident_bytes"]
    assert resident["optimizer state"] == 2 * resident["parameters"]


def test_adagrad_keeps_one_sum_per_dense_weight_and_updates_the_fused_tables_once():
    doc = small(load_scenario(SCENARIOS / "small_dlrm.json"))
    doc["training"]["optimizer"] = "adagrad"
    tables = next(n for n in doc["model"]["nodes"] if n["kind"] == "embedding_tables")
    tables["params"]["kernel"] = "fused"    # FBGEMM's table-batched lookups
    workload = build_workload(doc)
    graph = capture_training_step(workload, gpu=True)
    table_bytes = sum(t["rows"] * t["dim"] * 4 for t in tables["params"]["tables"])
    dense = sum(p.numel() * 4 for p in workload.module.parameters()) - table_bytes
    params = len(list(workload.module.parameters())) - 1
    state = graph.graph["memory"].resident["optimizer state"]
    assert dense <= state < dense + GPU_BLOCK * params   # one sum each, in allocator blocks
    nodes = [graph.nodes[i] for i in graph.nodes if graph.nodes[i]["phase"] == "optimizer"]
    names = [n["name"] for n in nodes]
    assert "aten::_foreach_addcdiv_" in names   # torch's multi-tensor Adagrad on a GPU
    sparse = [n for n in nodes if any(x is not None for x in n["input_nnz"])]
    assert len(sparse) == 1   # one row update for the fused group of tables


def test_adam_on_a_dlrm_updates_the_tables_with_sparse_sgd():
    doc = small(load_scenario(SCENARIOS / "small_dlrm.json"))
    doc["training"]["optimizer"] = "adam"
    workload = build_workload(doc)
    memory = captured_memory(doc)
    tables = next(n for n in doc["model"]["nodes"] if n["kind"] == "embedding_tables")
    table_bytes = sum(t["rows"] * t["dim"] * 4 for t in tables["params"]["tables"])
    dense = sum(p.numel() * 4 for p in workload.module.parameters()) - table_bytes
    assert memory.resident["optimizer state"] == 2 * dense   # no moments for the tables
