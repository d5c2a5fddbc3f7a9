"""GPU kernel models: regressor export, GEMM model, embedding L2 model, bundled profiles."""
from __future__ import annotations

import numpy as np
import pytest

from predictors.calibrate.gemm_fit import (
    TrainingSet,
    fit_regressor,
    leave_one_gpu_out,
    shape_range_split,
    shape_range_validation,
)
from predictors.calibrate.gpu_profiles import (
    BUNDLED_GPUS,
    PROFILE_DIR,
    profile_for_device,
    profile_slug,
)
from predictors.calibrate.public_data import neusight_dir
from predictors.costs.gemm_features import (
    DEVICE_FEATURES,
    FEATURE_NAMES,
    figures_from_spec,
    gemm_features,
)
from predictors.costs.gpu_embedding import (
    BAG_FORWARD,
    EmbeddingLookupModel,
    bag_forward_ms,
    embedding_bag_ms,
    l2_hit_model,
)
from predictors.costs.gpu_gemm import GemmKernelModel, gemm_dims
from predictors.costs.regressors import (
    MlpRegressor,
    PooledRegressor,
    TreeEnsemble,
    fit_gbm,
    fit_mlp,
    regressor_from_arrays,
)
from predictors.hardware.peaks import measured_peaks
from predictors.hardware.specs import GPU_SPECS
from predictors.profiles import DeviceProfile, ProfileError, load_profile, save_profile

needs_data = pytest.mark.skipif(neusight_dir() is None,
                                reason="../shared/data/microbench/neusight-gemm is absent")
H100 = GPU_SPECS["NVIDIA H100 80GB HBM3"]


def _node(name, shapes, dtype="float32", out=None, out_nnz=None):
    return {"name": f"aten::{name}", "input_shapes": shapes,
            "input_dtypes": [dtype if len(s) != 1 or name in ("addmm",) else "int64"
                             for s in shapes],
            "input_nnz": [None] * len(shapes), "output_shapes": out or [],
            "output_dtypes": [dtype] * len(out or []), "output_nnz": out_nnz or [None] * len(
                out or [])}


def test_tree_export_matches_sklearn():
    from sklearn.ensemble import HistGradientBoostingRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5))
    X[::17, 2] = np.nan  # missing values follow the learned direction
    y = np.nan_to_num(X[:, 0] * 2 + np.sin(X[:, 1]) + X[:, 2])
    sk = HistGradientBoostingRegressor(max_iter=30, random_state=0).fit(X, y)
    ours = TreeEnsemble.from_sklearn(sk)
    np.testing.assert_allclose(ours.predict(X), sk.predict(X), rtol=1e-9, atol=1e-9)
    again = TreeEnsemble.from_arrays(ours.to_arrays())
    np.testing.assert_array_equal(again.predict(X), ours.predict(X))


def test_mlp_round_trip():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(256, 4))
    mlp = fit_mlp(X, X[:, 0] - X[:, 1], hidden=(16,), epochs=5, batch=64)
    again = MlpRegressor.from_arrays(mlp.to_arrays())
    np.testing.assert_allclose(again.predict(X), mlp.predict(X), rtol=1e-5, atol=1e-6)


def _synthetic(n=600, seed=0):
    """Features of random GEMMs on three datasheet GPUs and a smooth efficiency law."""
    rng = np.random.default_rng(seed)
    names = ("NVIDIA A100-SXM4-40GB", "Tesla V100-SXM2-32GB", "NVIDIA H100 80GB HBM3")
    parts = []
    for name in names:
        M, N, K = (np.exp(rng.uniform(3, 9, n)) for _ in range(3))
        parts.append(gemm_features(np.ones(n), M, N, K, figures_from_spec(GPU_SPECS[name])))
    X = np.vstack(parts)
    y = 0.3 + 2.0 * np.exp(-X[:, FEATURE_NAMES.index("log_waves_128x128")].clip(-5, 5))
    return X, y, np.repeat(np.arange(len(names)), n)


def test_pooled_regressor_shrinks_the_device_figures_and_round_trips(tmp_path):
    X, y, _ = _synthetic()
    dev = [FEATURE_NAMES.index(n) for n in DEVICE_FEATURES]
    pooled = fit_regressor("gbm", X, y, device_weight=0.5)
    assert isinstance(pooled, PooledRegressor) and len(pooled.components) == 2
    (_, cols_full, w_full), (_, cols_agn, w_agn) = pooled.components
    assert w_full == w_agn == 0.5 and len(cols_full) == len(FEATURE_NAMES)
    assert not set(dev) & set(cols_agn.tolist())
    # the device-agnostic regressor alone ignores the device columns
    agnostic = fit_regressor("gbm", X, y, device_weight=0.0)
    moved = X.copy()
    moved[:, dev] += 1.0
    np.testing.assert_array_equal(agnostic.predict(moved), agnostic.predict(X))
    assert isinstance(fit_regressor("gbm", X, y, device_weight=1.0), TreeEnsemble)
    back = regressor_from_arrays("pooled", pooled.to_arrays())
    np.testing.assert_array_equal(back.predict(X), pooled.predict(X))
    # through a profile file (npz, no pickle)
    model = GemmKernelModel(figures_from_spec(H100), pooled)
    profile = DeviceProfile(H100.name, "fitted", H100, kernel_models={"gemm": model})
    again = load_profile(save_profile(profile, tmp_path / "h100.json")).kernel_models["gemm"]
    sizes = 2.0 ** np.arange(6, 14)
    np.testing.assert_array_equal(again.predict_shapes(1, sizes, sizes, sizes),
                                  model.predict_shapes(1, sizes, sizes, sizes))


def test_profile_with_other_features_fails_clearly(tmp_path):
    import json

    model = _small_model(figures_from_spec(H100))
    profile = DeviceProfile(H100.name, "fitted", H100, kernel_models={"gemm": model})
    path = save_profile(profile, tmp_path / "h100.json")
    doc = json.loads(path.read_text())
    doc["kernel_models"]["gemm"]["features"] = FEATURE_NAMES[:-1]
    path.write_text(json.dumps(doc))
    with pytest.raises(ProfileError, match="features differ.*build-profiles"):
        load_profile(path)


def test_leave_one_gpu_out_uses_nothing_of_the_left_out_gpu():
    X, y, gpu = _synthetic(n=200)
    lat = np.exp(y) * 0.01 + 0.05
    names = ["a", "b", "c"]

    def run(overhead, y_used):
        ts = TrainingSet(X, y_used, np.full(len(y), 0.01), lat, overhead, gpu, names)
        seen = []

        def fit(Xt, yt, seed):
            seen.append(len(yt))
            return fit_gbm(Xt, yt, max_iter=10)
        return leave_one_gpu_out(ts, fit), seen

    overhead = np.select([gpu == 0, gpu == 1], [0.04, 0.05], 0.09)
    base, seen = run(overhead, y)
    assert seen == [400, 400, 400]
    assert base["a"]["overhead_ms_used"] == pytest.approx(0.07)  # median of b and c
    # the left-out GPU's own overhead and targets change nothing of its prediction
    changed = np.where(gpu == 0, 0.5, overhead)
    y_changed = np.where(gpu == 0, y + 3.0, y)
    again, _ = run(changed, y_changed)
    assert again["a"] == base["a"]


def test_shape_range_check_fits_on_small_shapes_and_scores_the_far_ones():
    rng = np.random.default_rng(0)
    n = 600
    dims = np.column_stack([rng.integers(1, 3, n), *(2.0 ** rng.integers(3, 13, (3, n)))])
    X = np.log(dims[:, 1:])
    y = 0.1 * X[:, 0]
    gpu = np.arange(n) % 2
    lat = np.exp(y) * 0.01 + 0.05
    ts = TrainingSet(X, y, np.full(n, 0.01), lat, np.full(n, 0.05), gpu, ["a", "b"], dims)
    masks = shape_range_split(ts)
    flops = dims.prod(axis=1)
    assert flops[masks["large"]].min() >= np.percentile(flops, 90)
    B, M, N, K = dims[masks["tall_skinny"]].T
    rows = B * M  # a linear layer's batch folds into its rows
    assert (np.maximum(np.maximum(rows, N), K) >= 256 * np.minimum(np.minimum(rows, N), K)).all()
    B, M, N, K = dims[~masks["tall_skinny"]].T
    assert (np.maximum(np.maximum(B * M, N), K) < 256 * np.minimum(np.minimum(B * M, N), K)).all()
    fitted = []

    def fit(Xt, yt, seed):
        fitted.append(len(yt))
        return fit_gbm(Xt, yt, max_iter=10)

    out = shape_range_validation(ts, fit)
    test = masks["large"] | masks["tall_skinny"]
    assert fitted == [n - test.sum()]
    assert out["all"]["n"] == test.sum() and set(out["per_kind"]) == set(masks)
    assert sum(f["n"] for f in out["per_gpu"].values()) == test.sum()


def test_gemm_dims_of_aten_ops():
    assert gemm_dims(_node("mm", [(64, 32), (32, 16)])) == (1, 64, 16, 32)
    assert gemm_dims(_node("addmm", [(16,), (64, 32), (32, 16)])) == (1, 64, 16, 32)
    assert gemm_dims(_node("bmm", [(8, 9, 16), (8, 16, 9)])) == (8, 9, 9, 16)
    assert gemm_dims(_node("baddbmm", [(8, 9, 9), (8, 9, 16), (8, 16, 9)])) == (8, 9, 9, 16)
    assert gemm_dims(_node("relu", [(8, 9)])) is None


def _small_model(figs):
    """A GEMM model fitted in a second on a synthetic efficiency law."""
    rng = np.random.default_rng(0)
    M, N, K = (np.exp(rng.uniform(3, 9, 600)) for _ in range(3))
    X = gemm_features(np.ones(600), M, N, K, figs)
    y = 0.3 + 2.0 * np.exp(-X[:, FEATURE_NAMES.index("log_waves_128x128")].clip(-5, 5))
    return GemmKernelModel(figs, fit_gbm(X, y, max_iter=40))


def test_gemm_model_predicts_ops_and_round_trips(tmp_path):
    model = _small_model(figures_from_spec(H100))
    nodes = [_node("mm", [(512, 1024), (1024, 256)]),
             _node("addmm", [(256,), (512, 1024), (1024, 256)]),
             _node("bmm", [(64, 32, 16), (64, 16, 32)]),
             _node("baddbmm", [(64, 32, 32), (64, 32, 16), (64, 16, 32)]),
             _node("relu", [(512, 256)]),
             _node("mm", [(512, 1024), (1024, 256)], dtype="bfloat16")]
    pred = model.predict_ms(nodes)
    # the bias of addmm and baddbmm leaves their product's time; none beats the peak
    assert pred[1] == pred[0] and pred[3] == pred[2]
    peak = model.figures.peak_flops
    assert pred[0] >= 2 * 512 * 1024 * 256 / peak * 1e3
    assert pred[2] >= 2 * 64 * 32 * 16 * 32 / peak * 1e3
    assert np.isnan(pred[4]) and np.isnan(pred[5])
    profile = DeviceProfile(H100.name, "fitted", H100, kernel_models={"gemm": model})
    back = load_profile(save_profile(profile, tmp_path / "h100.json"))
    np.testing.assert_array_equal(back.kernel_models["gemm"].predict_ms(nodes), pred)


def test_embedding_hit_rate_knows_the_distribution():
    l2 = 40e6
    uni = l2_hit_model(10_000_000, 128, 40960, {"kind": "uniform"}, l2)["hit_rate"]
    z08 = l2_hit_model(10_000_000, 128, 40960, {"kind": "zipf", "alpha": 0.8}, l2)["hit_rate"]
    z12 = l2_hit_model(10_000_000, 128, 40960, {"kind": "zipf", "alpha": 1.2}, l2)["hit_rate"]
    assert uni < 0.01 < z08 < z12 < 1
    small = l2_hit_model(1000, 128, 40960, None, l2)["hit_rate"]
    assert small > 0.95  # the whole table fits: only compulsory misses
    rates = [l2_hit_model(r, 64, 20000, {"kind": "zipf", "alpha": 1.0}, l2)["hit_rate"]
             for r in (1e4, 1e5, 1e6, 1e7)]
    assert rates == sorted(rates, reverse=True)
    pk = measured_peaks(GPU_SPECS["NVIDIA A100-SXM4-40GB"])
    fast = embedding_bag_ms(10_000_000, 128, 2048, 20, {"kind": "zipf", "alpha": 1.2}, pk)
    slow = embedding_bag_ms(10_000_000, 128, 2048, 20, {"kind": "uniform"}, pk)
    assert 0 < fast < slow


def test_embedding_model_on_captured_ops(tmp_path):
    model = EmbeddingLookupModel(measured_peaks(H100))
    fwd = _node("_embedding_bag", [(100000, 16), (10240,), (512,)], out=[(512, 16)])
    bwd = {"name": "aten::_embedding_bag_backward",
           "input_shapes": [(512, 16), (10240,), (512,), (10240,), (512,), (0,)],
           "input_dtypes": ["float32"] + ["int64"] * 5, "input_nnz": [None] * 6,
           "output_shapes": [(100000, 16)], "output_dtypes": ["float32"],
           "output_nnz": [10240]}
    pred = model.predict_ms([fwd, bwd, _node("mm", [(4, 4), (4, 4)])])
    assert np.isnan(pred[2])
    # twice the lookups per bag: both passes take longer
    fwd2 = _node("_embedding_bag", [(100000, 16), (20480,), (512,)], out=[(512, 16)])
    bwd2 = dict(bwd, input_shapes=[(512, 16), (20480,), (512,), (20480,), (512,), (0,)],
                output_nnz=[20480])
    assert np.all(model.predict_ms([fwd2, bwd2]) > pred[:2])
    profile = DeviceProfile(H100.name, "datasheet", H100, kernel_models={"embedding": model})
    back = load_profile(save_profile(profile, tmp_path / "p.json"))
    np.testing.assert_array_equal(back.kernel_models["embedding"].predict_ms([fwd, bwd]),
                                  pred[:2])


def test_bag_forward_is_latency_bound_per_warp_lookup():
    pk = measured_peaks(H100)
    # a small batch fills few warps: time grows with the pooling (each warp loops over
    # its bag), not with the bytes
    ms = [bag_forward_ms(100_000, 32, 256, p, None, pk) for p in (10, 20, 30)]
    assert ms[0] < ms[1] < ms[2]
    assert (ms[2] - ms[1]) == pytest.approx(ms[1] - ms[0], rel=1e-6)
    # a warp covers 32 features: dims 16 and 32 cost the same, 64 costs two warps
    d16, d32, d64 = (bag_forward_ms(100_000, d, 16384, 20, None, pk) for d in (16, 32, 64))
    assert d16 == pytest.approx(d32) and d64 > 1.8 * (d32 - 0.003)
    # warm (replayed) beats cold (other tables' rows evicted it); the distribution matters
    zipf = {"kind": "zipf", "alpha": 1.2}
    warm = bag_forward_ms(2_000_000, 64, 8192, 30, zipf, pk)
    cold = bag_forward_ms(2_000_000, 64, 8192, 30, zipf, pk, reuse_bytes=1e10)
    uniform = bag_forward_ms(2_000_000, 64, 8192, 30, None, pk, reuse_bytes=1e10)
    assert warm < cold < uniform
    # issue cycles are per clock: a slower clock takes longer
    slow = bag_forward_ms(100_000, 32, 65536, 20, None, pk, clock_mhz=990)
    assert slow > bag_forward_ms(100_000, 32, 65536, 20, None, pk, clock_mhz=1980)


def test_embedding_model_reads_the_lookup_and_the_step():
    model = EmbeddingLookupModel(measured_peaks(H100), clock_mhz=H100.clock_mhz)

    def bag(rows, dist):
        node = _node("_embedding_bag", [(rows, 64), (8192 * 30,), (8192,)], out=[(8192, 64)])
        node["lookup"] = {"rows": rows, "dim": 64, "pooling": 30, "distribution": dist}
        return node
    zipf, uni = bag(2_000_000, {"kind": "zipf", "alpha": 1.2}), bag(2_000_000, None)
    alone = model.predict_ms([zipf])[0]
    # with 20 other big tables in the step, the table's rows are gone from L2
    in_step = model.predict_ms([zipf] + [bag(2_000_000, None) for _ in range(20)])[0]
    assert in_step > alone
    assert model.predict_ms([zipf, uni])[0] < model.predict_ms([uni, zipf])[0]
    back = EmbeddingLookupModel.from_json(*model.to_json())
    assert back.clock_mhz == H100.clock_mhz and back.bag_forward == BAG_FORWARD
    np.testing.assert_array_equal(back.predict_ms([zipf, uni]), model.predict_ms([zipf, uni]))


def test_bag_forward_on_h200_microbenchmarks():
    """The bundled H200 profile against the H200's own measured forwards (kept in the
    repository): held-out figures are in docs/models/gpu_profiles.md."""
    import importlib.util

    path = PROFILE_DIR.parents[2] / "benchmarks" / "gpu_embedding.py"
    spec = importlib.util.spec_from_file_location("gpu_embedding", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    model = load_profile(PROFILE_DIR / "nvidia-h200-measured.json").kernel_models["embedding"]
    cases = bench.micro_cases()
    assert len(cases) >= 36
    new = bench.errors(cases, lambda c: bench.predict_us(c, model))
    old = bench.errors(cases, lambda c: bench.predict_us(c, model, old=True))
    assert new["gmae"] < 0.08 and 0.9 < new["median"] < 1.1
    assert old["gmae"] > 0.25  # the traffic model it replaced: half the measured time


@pytest.mark.parametrize("name", BUNDLED_GPUS)
def test_bundled_profiles_load_and_predict(name):
    path = PROFILE_DIR / f"{profile_slug(name)}.json"
    assert path.is_file(), f"{path} missing: run python -m predictors kernels build-profiles"
    profile = load_profile(path)
    assert profile.name == name and profile.provenance.get("gemm")
    assert set(profile.kernel_models) >= {"gemm", "embedding", "other"}
    gemm = profile.kernel_models["gemm"]
    sizes = 2.0 ** np.arange(8, 14)
    ms = gemm.predict_shapes(1, sizes, sizes, sizes)
    assert np.all(np.isfinite(ms)) and np.all(np.diff(ms) > 0)
    # the largest square GEMM runs below the datasheet peak and above 30% of it
    flops = 2 * sizes[-1] ** 3
    achieved = flops / (ms[-1] / 1e3)
    assert 0.3 * gemm.figures.peak_flops < achieved < gemm.figures.peak_flops
    assert profile.validation.get("leave_one_gpu_out"), "validation figures missing"


def test_unseen_gpu_from_datasheet_is_finite_and_monotone():
    profile = profile_for_device("NVIDIA A100-SXM4-80GB")  # no bundled profile
    assert profile.kind == "datasheet"
    gemm = profile.kernel_models["gemm"]
    for k in (64, 1024, 8192):
        ms = gemm.predict_shapes(1, 2.0 ** np.arange(6, 15), 2048, k)
        assert np.all(np.isfinite(ms))
        # more FLOPs, more time: strictly over 4x steps; over 2x steps a learned model (like
        # cuBLAS' kernel choice) may dip a little while the GEMM fills less than a wave
        assert np.all(np.diff(ms[::2]) > 0)
        assert np.all(ms[1:] >= 0.75 * ms[:-1])
    with pytest.raises(KeyError, match="unknown device"):
        profile_for_device("NVIDIA GeForce 256")


@needs_data
def test_fit_on_a_subsample_generalizes_loosely():
    from predictors.calibrate.gemm_fit import training_set
    from predictors.utils.metrics import gmae
    from predictors.calibrate.public_data import load_neusight

    ts = training_set(load_neusight())
    rng = np.random.default_rng(0)
    pick = rng.random(len(ts.y)) < 0.15
    train = pick & (rng.random(len(ts.y)) < 0.8)
    test = pick & ~train
    reg = fit_gbm(ts.X[train], ts.y[train], max_iter=60, learning_rate=0.2)
    pred = np.exp(reg.predict(ts.X[test])) * ts.roof_ms[test] + ts.overhead_ms[test]
    assert gmae(pred, ts.latency_ms[test]) < 0.15
