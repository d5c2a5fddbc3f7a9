"""Kernel-model features: GEMM alignment, feature versions, and the sampled sizes."""
import numpy as np

import predictors.calibrate.models as models
from predictors.calibrate.features import FEATURES_VERSION, _alignment, featurize
from predictors.calibrate.microbench import _log_sizes
from predictors.calibrate.samples import random_scenarios
from predictors.devices.specs import local_cpu_spec


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
    assert FEATURES_VERSION >= 2 and not np.allclose(aligned, odd)
    old = featurize(_mm(320, 2048, 512), "gemm", spec, names, version=1)
    assert len(old) == len(aligned) - 3


def test_a_model_saved_without_a_feature_version_predicts_with_version_one(monkeypatch):
    spec = _cpu()
    nodes = [_mm(m, n, 64) for m in (16, 64, 256) for n in (32, 100, 512)]
    ms = np.array([1e-6 * 2 * n["input_shapes"][0][0] * n["output_shapes"][0][1] * 64
                   for n in nodes])
    real = models.featurize
    monkeypatch.setattr(models, "featurize",
                        lambda n, c, d, names, version=1: real(n, c, d, names, 1))
    old = models.fit_class_model("gemm", nodes, ms, spec, kinds=("gbm",))
    monkeypatch.setattr(models, "featurize", real)
    meta, arrays = old.to_json()
    meta.pop("features")  # as profiles written before feature versions
    loaded = models.LearnedKernelModel.from_json(meta, arrays, spec)
    assert loaded.features == 1
    assert np.allclose(loaded.predict_ms(nodes), old.predict_ms(nodes))


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
