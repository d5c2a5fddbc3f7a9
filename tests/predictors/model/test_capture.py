"""The captured op graph against a real, profiled CPU run of the same model."""
import difflib

import networkx as nx
import pytest
from paths import SCENARIOS
from cpu_scenarios import small_transformer
from profiled import compute_ops, profiled_compute_ops

from predictors.model.capture import capture_training_step, op_sequence
from predictors.model.workload import build_workload
from predictors.scenario.format import load_scenario


def small_dlrm():
    d = load_scenario(SCENARIOS / "small_dlrm.json")
    d["training"]["batch_size"] = 32
    for t in d["model"]["nodes"][2]["params"]["tables"]:
        t["rows"] = 1000
    return d


def small_dcn():
    d = load_scenario(SCENARIOS / "mlperf_dlrm_dcnv2.json")
    d["training"]["batch_size"] = 16
    for t in d["model"]["nodes"][2]["params"]["tables"]:
        t["rows"], t["dim"] = min(t["rows"], 1000), 16
    d["model"]["nodes"][1]["params"]["layers"] = [32, 16]
    d["model"]["nodes"][3]["params"]["low_rank"] = 8
    d["model"]["nodes"][4]["params"]["layers"] = [32, 1]
    return d


def _diff(a, b):
    return "\n".join(list(difflib.unified_diff(a, b, "captured", "profiled", lineterm="", n=1))[:40])


@pytest.mark.parametrize("optimizer", ["sgd", "adamw", "adagrad"])
@pytest.mark.parametrize("make", [small_dlrm, small_transformer])
def test_capture_matches_profiled_cpu_run(make, optimizer):
    doc = make()
    # adamw, adagrad: torch's optimizer over the dense weights, the tables' sparse update
    doc["training"]["optimizer"] = optimizer
    seq = op_sequence(capture_training_step(build_workload(doc)))
    captured, profiled = compute_ops(seq), profiled_compute_ops(doc, set(seq))
    assert captured == profiled, _diff(captured, profiled)


def test_dcn_capture_matches_up_to_in_place_variants():
    # BCE-with-logits backward and some DCN gradient sums run in place for real; the
    # dispatch-mode capture sees their out-of-place twins (same kernels and bytes).
    doc = small_dcn()
    seq = op_sequence(capture_training_step(build_workload(doc)))
    strip = lambda names: [n.rstrip("_") for n in names]
    captured, profiled = strip(compute_ops(seq)), strip(profiled_compute_ops(doc, set(seq)))
    assert captured == profiled, _diff(captured, profiled)


def test_graph_records_phases_threads_shapes_and_dependencies():
    doc = small_dlrm()
    graph = capture_training_step(build_workload(doc))
    assert nx.is_directed_acyclic_graph(graph)
    nodes = [graph.nodes[i] for i in sorted(graph.nodes)]
    phases = [n["phase"] for n in nodes]
    # forward, then backward, then the optimizer: each a contiguous run
    assert phases.index("backward") > phases.index("forward")
    assert phases.index("optimizer") > max(i for i, p in enumerate(phases) if p == "backward")
    assert all(n["thread"] == "autograd" for n in nodes if n["phase"] == "backward"
               and n["name"] != "aten::ones_like")
    bags = [n for n in nodes if n["name"] == "aten::_embedding_bag"]
    assert len(bags) == 8 and bags[0]["input_shapes"][0] == (1000, 16)
    assert bags[0]["output_shapes"][0] == (32, 16) and bags[0]["block"] == "tables"
    # every sparse gradient keeps its nnz = batch x pooling through the optimizer
    updates = [n for n in nodes if n["phase"] == "optimizer" and any(
        x is not None for x in n["input_nnz"])]
    assert sorted(max(x for x in u["input_nnz"] if x) for u in updates) == sorted(
        32 * t["pooling"] for t in doc["model"]["nodes"][2]["params"]["tables"])
    # the first addmm feeds the relu after it
    first_addmm = next(i for i in sorted(graph.nodes) if nodes[i]["name"] == "aten::addmm")
    assert any(graph.nodes[j]["name"] == "aten::relu" for j in graph.successors(first_addmm))


def test_meta_capture_of_a_huge_model_needs_no_memory():
    import resource

    doc = load_scenario(SCENARIOS / "mlperf_dlrm_dcnv2.json")  # ~96 GB of tables
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    graph = capture_training_step(build_workload(doc))
    assert graph.number_of_nodes() > 400
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 500, f"capture grew RSS by {grown_mb:.0f} MB"


def test_capture_pauses_automatic_collection_and_restores_it():
    import gc
    import threading

    from predictors.utils.gc_pause import collection_paused
    assert gc.isenabled()
    seen = []
    with collection_paused():
        seen.append(gc.isenabled())
        t = threading.Thread(target=lambda: seen.append(_nested()))
        t.start()
        t.join()
        seen.append(gc.isenabled())  # the other thread's exit did not turn it back on
    assert seen == [False, False, False] and gc.isenabled()


def _nested():
    import gc

    from predictors.utils.gc_pause import collection_paused
    with collection_paused():
        return gc.isenabled()


@pytest.mark.parametrize("dtype, fused", [
    ("float32", "aten::_scaled_dot_product_efficient_attention"),
    ("bfloat16", "aten::_scaled_dot_product_flash_attention")])
def test_gpu_capture_records_fused_attention(dtype, fused):
    """On a GPU, scaled_dot_product_attention runs as one fused kernel each way (seen in
    the H200 traces); the CPU capture keeps the decomposed matmuls."""
    doc = small_transformer()
    doc["training"]["dtype"] = dtype
    gpu = op_sequence(capture_training_step(build_workload(doc), gpu=True))
    cpu = op_sequence(capture_training_step(build_workload(doc)))
    layers = doc["model"]["nodes"][1]["params"]["count"]
    assert gpu.count(fused) == layers
    assert gpu.count(fused + "_backward") == layers
    assert "aten::bmm" not in gpu and fused not in cpu
    assert cpu.count("aten::bmm") >= 2 * layers
    import torch.nn.functional as F
    assert F.scaled_dot_product_attention.__name__ == "scaled_dot_product_attention"


def test_gpu_captures_in_threads_leave_cpu_captures_alone():
    """Predictions run in worker threads: a GPU capture in one thread must not change
    what a CPU capture (or a real CPU run) in another records, nor outlive itself."""
    import threading

    import torch.nn.functional as F
    doc = small_transformer()
    fused = "aten::_scaled_dot_product_efficient_attention"
    seen: dict[int, set] = {}

    def run(i):
        for _ in range(3):
            ops = op_sequence(capture_training_step(build_workload(doc), gpu=i % 2 == 0))
            seen.setdefault(i, set()).add((fused in ops, "aten::bmm" in ops))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {0: {(True, False)}, 1: {(False, True)}, 2: {(True, False)},
                    3: {(False, True)}}
    assert F.scaled_dot_product_attention.__name__ == "scaled_dot_product_attention"
