"""Kernel-model features: GEMM alignment, feature versions, and the sampled sizes."""
import numpy as np
import pytest

import predictors.costs.learned_models as models
from predictors.calibrate.microbench import _log_sizes
from predictors.calibrate.samples import random_scenarios
from predictors.costs.op_features import FEATURES_VERSION, _alignment, featurize
from predictors.hardware.specs import local_cpu_spec
from predictors.profiles import ProfileError


def _mm(m, n, k):
    return {"name": "aten::mm", "input_shapes": [(m, k), (k, n)],
            "input_dtypes": ["float32"] * 2, "input_nnz": [None, None],
            "output_shapes": [(m, n)], "output_dtypes": ["float32"], "output_nnz": [None]}


def _cpu():
    return local_cpu_spec(1)


def test_alignment_counts_trailing_zero_bits_up_to_sixteen():
    assert [_alignment(x) for x in (1, 2049, 2050, 2052, 2056, 2048, 0)] == \
        [0, 0, 1, 2, 3, 4, 0]


def test_gemm_features_tell_aligned_rows_from_unaligned_ones():
    spec, names = _cpu(), ["aten::mm"]
    aligned, odd = (featurize(_mm(320, n, 512), "gemm", spec, names) for n in (2048, 2049))
    # the alignment of m, n and k, just before the op-name one-hot
    assert list(aligned[-4:-1]) == [4, 4, 4] and list(odd[-4:-1]) == [4, 0, 4]
    old = featurize(_mm(320, 2048, 512), "gemm", spec, names, version=1)
    assert len(old) == len(aligned) - 3


def _op(name, ins, out, phase="forward"):
    return {"name": name, "input_shapes": ins, "input_dtypes": ["float32"] * len(ins),
            "input_nnz": [None] * len(ins), "output_shapes": [out],
            "output_dtypes": ["float32"], "output_nnz": [None], "phase": phase}


def test_elementwise_features_see_the_innermost_dim_broadcast_and_phase():
    spec, names = _cpu(), ["aten::add", "aten::add_"]
    full = featurize(_op("aten::add", [(64, 95), (64, 95)], (64, 95)), "elementwise", spec,
                     names)
    bias = featurize(_op("aten::add", [(64, 95), (95,)], (64, 95)), "elementwise", spec,
                     names)
    step = featurize(_op("aten::add_", [(64, 95), (64, 95)], (64, 95), "optimizer"),
                     "elementwise", spec, names)
    # [log inner, inner alignment, log rows, log second, smaller second, 3 phases],
    # [3 stride features], names
    tail = slice(-14, -6)
    assert list(full[tail][[1, 4, 5, 6, 7]]) == [0, 0, 1, 0, 0]
    assert bias[tail][4] == 1 and bias[tail][3] < full[tail][3]
    assert list(step[tail][5:]) == [0, 0, 1]
    scalar = featurize(_op("aten::mul", [(), ()], ()), "elementwise", spec, names)
    assert np.isfinite(scalar).all()
    assert len(featurize(_op("aten::add", [(8,)], (8,)), "elementwise", spec, names,
                         version=2)) == len(full) - 12


def test_copy_features_tell_a_transposed_input_from_a_contiguous_one():
    """The two clones of an attention backward: same shapes, 2-3x apart in time."""
    spec, names = _cpu(), ["aten::clone"]
    rows = dict(_op("aten::clone", [(127, 64, 34)], (127, 64, 34), "backward"),
                input_stride=(64 * 34, 34, 1))
    columns = dict(rows, input_stride=(34, 127 * 34, 1))
    transposed = dict(rows, input_stride=(1, 127, 127 * 64))
    feats = [featurize(n, "memcpy", spec, names) for n in (rows, columns, transposed)]
    # [contiguous, log2(1 + innermost stride), unit-stride dim from the end, age], name
    assert list(feats[0][-5:-1]) == [1, 1, 0, 0]
    assert list(feats[1][-5:-1]) == [0, 1, 0, 0]
    assert feats[2][-5] == 0 and feats[2][-4] > 1 and feats[2][-3] == 2
    # no strides (a trace, a microbenchmark): as contiguous
    no_stride = featurize(_op("aten::clone", [(127, 64, 34)], (127, 64, 34), "backward"),
                          "memcpy", spec, names)
    assert list(no_stride[-5:-1]) == [1, 1, 0, 0]
    assert len(featurize(rows, "memcpy", spec, names, version=3)) == len(feats[0]) - 4
    old = featurize(dict(rows, input_age_bytes=64 << 20), "memcpy", spec, names)
    assert old[-2] == pytest.approx(np.log2(1 + 65536))


def test_captured_ops_carry_their_first_inputs_strides():
    from predictors.model.capture import capture_training_step
    from predictors.model.workload import build_workload
    from predictors.scenario.format import validate_scenario

    doc = validate_scenario(random_scenarios(2, 3, kinds=("transformer",))[0])
    graph = capture_training_step(build_workload(doc))
    clones = [graph.nodes[i] for i in graph.nodes if graph.nodes[i]["name"] == "aten::clone"]
    assert clones and all(len(n["input_stride"]) == len(n["input_shapes"][0])
                          for n in clones)
    spec = _cpu()
    # attention's clones make permuted tensors contiguous; most elementwise ops read
    # contiguous ones
    assert all(featurize(n, "memcpy", spec, [])[-4] == 0 for n in clones)
    gelu = [graph.nodes[i] for i in graph.nodes if graph.nodes[i]["name"] == "aten::gelu"]
    assert gelu and all(featurize(n, "elementwise", spec, [])[-4] == 1 for n in gelu)
    # ages: the gelu reads what the linear before it just wrote; a clone in the backward
    # reads a gradient written some ops before; the first op reads the batch
    first = graph.nodes[min(graph.nodes)]
    assert first["input_age_bytes"] == 0
    assert all(n["input_age_bytes"] < 4 * 4 * 1e6 for n in gelu)
    assert max(n["input_age_bytes"] for n in clones) > min(n["input_age_bytes"] for n in gelu)


def test_a_model_saved_without_a_feature_version_predicts_with_version_one():
    spec = _cpu()
    nodes = [_mm(m, n, 64) for m in (16, 64, 256) for n in (32, 100, 512)]
    ms = np.array([1e-6 * 2 * n["input_shapes"][0][0] * n["output_shapes"][0][1] * 64
                   for n in nodes])
    # an MLP: its first layer's width is the feature count, so a wrong version raises
    old = models.fit_class_model("gemm", nodes, ms, spec, kinds=("mlp",), features=1)
    meta, arrays = old.to_json()
    assert meta.pop("features") == 1  # as profiles written before feature versions
    loaded = models.LearnedKernelModel.from_json(meta, arrays, spec)
    assert loaded.features == 1
    x1 = np.stack([featurize(n, "gemm", spec, loaded.names, version=1) for n in nodes])
    assert np.allclose(np.log(loaded.predict_ms(nodes)), loaded._raw(x1))
    with pytest.raises(ValueError):  # the current features do not fit this model
        loaded._raw(np.stack([featurize(n, "gemm", spec, loaded.names) for n in nodes]))


def test_a_model_from_a_newer_feature_set_is_refused():
    spec = _cpu()
    nodes = [_mm(m, 64, 64) for m in (16, 64, 256, 512, 1024)]
    model = models.fit_class_model("gemm", nodes, np.arange(1, 6) * 0.01, spec,
                                   kinds=("mlp",))
    meta, arrays = model.to_json()
    meta["features"] = FEATURES_VERSION + 1
    with pytest.raises(ProfileError, match="feature set"):
        models.LearnedKernelModel.from_json(meta, arrays, spec)


def test_gemm_sweep_sizes_are_both_odd_and_aligned():
    sizes = _log_sizes(np.random.default_rng(0), 1, 4096, 24)
    assert sizes.min() >= 1 and sizes.max() <= 4096
    big = sizes[sizes >= 64]
    assert (big % 8 == 0).sum() >= 5 and (big % 8 != 0).sum() >= 5


def test_random_scenarios_draw_round_and_arbitrary_sizes_in_range():
    hidden = []
    for doc in random_scenarios(40, 7, kinds=("transformer",)):
        p = next(n for n in doc["model"]["nodes"] if n["id"] == "encoder")["params"]
        seq = next(n for n in doc["model"]["nodes"] if n["id"] == "tokens")["params"]["seq_len"]
        assert 128 - p["heads"] < p["hidden"] <= 512 and p["hidden"] % p["heads"] == 0
        assert 32 <= seq <= 128 and 2 <= doc["training"]["batch_size"] <= 8
        hidden.append(p["hidden"])
    assert any(h % 64 == 0 for h in hidden) and any(h % 8 for h in hidden)


def test_a_tables_update_and_lookup_see_the_steps_bytes_written_not_the_table():
    from predictors.model.capture import capture_training_step
    from predictors.model.workload import build_workload
    from predictors.scenario.format import validate_scenario

    doc = validate_scenario(random_scenarios(2, 7777, kinds=("dlrm",))[1])
    graph = capture_training_step(build_workload(doc))
    nodes = [graph.nodes[i] for i in sorted(graph.nodes)]
    updates = [n for n in nodes if n["name"] == "aten::add_" and n["lookup"]]
    tables = doc["model"]["nodes"][2]["params"]["tables"]
    assert len(updates) == len(tables)
    ages = [n["input_age_bytes"] for n in updates]
    # each update follows the last by the rows it wrote, never by the whole table
    assert ages == sorted(ages) and ages[-1] - ages[0] < min(
        t["rows"] * t["dim"] * 4 for t in tables) / 10
    spec = _cpu()
    v4, v5 = (featurize(updates[0], "sparse_update", spec, ["aten::add_"], version=v)
              for v in (4, 5))
    assert len(v5) == len(v4) + 1 and v5[-2] == pytest.approx(np.log2(1 + ages[0] / 1024))


def test_an_inputs_age_is_the_bytes_written_since_it_was():
    import torch

    from predictors.model.capture import OpRecorder

    x = torch.empty(1000, device="meta")            # made before the step
    weight = torch.empty(10, 100, device="meta")
    recorder = OpRecorder(device="meta")
    with recorder:
        a = x * 2            # reads x: nothing written yet      (writes 4000 bytes)
        b = a + 1            # reads a: just written             (4000)
        b * 3                # reads b: just written             (4000)
        a.clone()            # reads a: b and b * 3 since        (4000)
        v = a.view(10, 100)  # reads a (three writes since); writes nothing, as old as a
        v.clone()            # b, b * 3 and a.clone() since      (4000)
        t = weight.t()       # a view of a tensor from before the step
        t.clone()            # as old as the weight: everything written so far
    nodes = [recorder.graph.nodes[i] for i in sorted(recorder.graph.nodes)]
    assert [n["name"] for n in nodes] == ["aten::mul", "aten::add", "aten::mul",
                                          "aten::clone", "aten::view", "aten::clone",
                                          "aten::t", "aten::clone"]
    assert [n["input_age_bytes"] for n in nodes] == [0, 0, 0, 8000, 12000, 12000, 20000,
                                                     20000]
    assert recorder.written == 24000
