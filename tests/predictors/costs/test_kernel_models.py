"""The bundled bmm and convolution models: structure, storage, routing from the GEMM
model, every listed GPU, and (with ../shared/data) their fit to the public measurements."""
from __future__ import annotations

import numpy as np
import pytest

from predictors.calibrate.kernel_fit import (
    kernels_dir,
    load_kernel_set,
    shape_range_split,
)
from predictors.costs.batched_gemm import (
    BMM_FEATURES,
    BatchedGemmModel,
    bmm_features,
    roofline_ms,
    structured_ms,
    tile_estimates,
)
from predictors.costs.conv_kernels import (
    CONV_FEATURES,
    ConvKernelModel,
    conv_structured_ms,
)
from predictors.costs.gemm_features import FEATURE_NAMES, GpuFigures, figures_from_spec
from predictors.costs.gpu_gemm import GemmKernelModel
from predictors.costs.kernel_artifacts import (
    KERNEL_MODEL_DIR,
    bundled_kernel_model,
    load_kernel_model,
    save_kernel_model,
)
from predictors.costs.regressors import fit_gbm
from predictors.hardware.specs import GPU_SPECS

A100 = GpuFigures("A100", 19.5e12, 1555e9, 108, 40e6, 1410, 64)
LISTED = ("NVIDIA A100-PCIE-40GB", "NVIDIA A100 80GB PCIe", "NVIDIA H100 80GB HBM3",
          "NVIDIA L4", "Tesla P100-PCIE-16GB", "Tesla P4", "Tesla T4", "Tesla V100-PCIE-32GB",
          "NVIDIA L40S", "NVIDIA B200", "AMD Instinct MI300X")
needs_data = pytest.mark.skipif(kernels_dir() is None,
                                reason="../shared/data/microbench/neusight-kernels is absent")


def _conv(n, cin, cout, size, k=3, stride=1, pad=1, name="aten::convolution", groups=1):
    out = (size + 2 * pad - k) // stride + 1
    return {"name": name, "input_shapes": [[n, cin, size, size], [cout, cin // groups, k, k]],
            "input_dtypes": ["float32"] * 2, "input_nnz": [None] * 2,
            "output_shapes": [[n, cout, out, out]], "output_dtypes": ["float32"],
            "output_nnz": [None]}


def test_waves_count_the_batch_tiles_over_the_sms():
    # 216 products of one 128x128 tile each: two full waves of the 108 SMs
    tiles, waves, _ = tile_estimates(216, 128, 128, 64, A100)
    assert tiles[0] == 216 and waves[0] == 2
    # one more product opens a third wave, and the structured time grows with it
    assert tile_estimates(217, 128, 128, 64, A100)[1][0] == 3
    assert structured_ms(217, 128, 128, 64, A100) > structured_ms(216, 128, 128, 64, A100)


def test_a_waves_tiles_read_their_shared_panels_once():
    # one 1024 x 1024 product in 128 x 128 tiles: 64 tiles, one wave on 108 SMs, reading
    # 8 row panels and 8 column panels, not 64 of each
    fig = GpuFigures("slow memory", 19.5e12, 10e9, 108, 40e6, 1410, 64)
    secs = tile_estimates(1, 1024, 1024, 1024, fig)[2][0]
    assert secs == pytest.approx(4 * 1024 * 16 * 128 / 10e9)
    # three 256 x 256 products on 5 SMs, three waves: the first holds the first product's
    # four tiles (2 row and 2 column panels) and the second's first tile (1 + 1 more)
    five = GpuFigures("five SMs", 19.5e12, 10e9, 5, 40e6, 1410, 64)
    secs = tile_estimates(3, 256, 256, 1024, five)[2][0]
    assert secs == pytest.approx(3 * 4 * 1024 * (3 * 128 + 3 * 128) / 10e9)


def test_gpus_of_one_compute_run_a_compute_bound_bmm_alike():
    # the H100 and the H200 differ only in memory bandwidth: 64 products of 1024^3 are
    # compute-bound on both
    h100, h200 = (bundled_kernel_model("gpu-bmm").with_figures(figures_from_spec(GPU_SPECS[n]))
                  for n in ("NVIDIA H100 80GB HBM3", "NVIDIA H200"))
    a, b = (m.predict_shapes(np.array([64.0, 8.0]), np.array([1024.0, 2048.0]),
                             np.array([1024.0, 2048.0]), np.array([1024.0, 2048.0]))
            for m in (h100, h200))
    assert np.allclose(a, b, rtol=0.1)


def test_a_variant_of_a_measured_die_keeps_its_efficiency():
    # the V100-SXM2 and the V100-DGXS are the V100-PCIe's die at a higher clock: a
    # compute-bound bmm runs faster on them by their ratio of peaks, and so do convolutions
    model = bundled_kernel_model("gpu-bmm")
    conv = bundled_kernel_model("gpu-conv")
    pcie_fig = figures_from_spec(GPU_SPECS["Tesla V100-PCIE-32GB"])
    pcie = model.with_figures(pcie_fig)
    assert pcie.die.name == "Tesla V100-PCIE-32GB" and pcie.die is not pcie.figures
    shape = (np.array([64.0]), 1024.0, 1024.0, 1024.0)
    conv_pcie = conv.with_figures(pcie_fig).predict_conv(32, 256, 256, 14)[0]
    for name in ("Tesla V100-SXM2-32GB", "Tesla V100-DGXS-32GB"):
        fig = figures_from_spec(GPU_SPECS[name])
        variant = model.with_figures(fig)
        assert variant.die.name == "Tesla V100-PCIE-32GB"
        ratio = pcie.predict_shapes(*shape)[0] / variant.predict_shapes(*shape)[0]
        assert ratio == pytest.approx(fig.peak_flops / pcie_fig.peak_flops, rel=0.01)
        assert conv.with_figures(fig).predict_conv(32, 256, 256, 14)[0] < conv_pcie
    # a GPU of no measured die keeps its own figures
    h100 = model.with_figures(figures_from_spec(GPU_SPECS["NVIDIA H100 80GB HBM3"]))
    assert h100.die is h100.figures


def test_structured_time_is_never_under_the_roofline():
    rng = np.random.default_rng(0)
    B, M, N, K = (rng.integers(1, 2048, 200).astype(float) for _ in range(4))
    assert (structured_ms(B, M, N, K, A100) >= roofline_ms(B, M, N, K, A100) * (1 - 1e-12)).all()
    X = bmm_features(B, M, N, K, A100)
    assert X.shape == (200, len(BMM_FEATURES)) and np.isfinite(X).all()


def test_winograd_prices_3x3_stride_1_only():
    struct, direct, wino, _ = conv_structured_ms(32, 256, 256, 14, 14, 3, 1, 1, A100)
    assert wino < direct and struct == pytest.approx(max(wino, struct))
    _, _, wino2, _ = conv_structured_ms(32, 256, 256, 14, 14, 3, 2, 1, A100)
    _, _, wino1, _ = conv_structured_ms(32, 256, 256, 14, 14, 1, 1, 0, A100)
    assert np.isinf(wino2) and np.isinf(wino1)


def _tiny(cls, n_features):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, n_features))
    reg = fit_gbm(X, 0.3 * X[:, 0] + 0.5, seed=0, max_iter=20, threads=1)
    return cls(A100, reg, info={"note": "test"})


def test_saved_model_is_deterministic_and_reads_back(tmp_path):
    model = _tiny(BatchedGemmModel, len(BMM_FEATURES))
    a, b = tmp_path / "a" / "m.json", tmp_path / "b" / "m.json"
    save_kernel_model(model, a)
    save_kernel_model(model, b)
    assert a.read_bytes() == b.read_bytes()
    assert a.with_suffix(".npz").read_bytes() == b.with_suffix(".npz").read_bytes()
    back = load_kernel_model(a)
    shapes = ([4, 64, 512], [32, 128, 1000], [64, 64, 300], [16, 256, 7])
    assert np.array_equal(back.predict_shapes(*shapes), model.predict_shapes(*shapes))
    conv = _tiny(ConvKernelModel, len(CONV_FEATURES))
    save_kernel_model(conv, tmp_path / "c.json")
    assert np.array_equal(load_kernel_model(tmp_path / "c.json").predict_conv(8, 64, 64, 28),
                          conv.predict_conv(8, 64, 64, 28))


def test_a_model_with_other_features_is_refused(tmp_path):
    model = _tiny(BatchedGemmModel, len(BMM_FEATURES))
    path = save_kernel_model(model, tmp_path / "m.json")
    path.write_text(path.read_text().replace('"log_b"', '"log_batch_size"'))
    with pytest.raises(ValueError, match="m.json.*features differ"):
        load_kernel_model(path)


def test_bundled_models_are_small_and_described():
    for name in ("gpu-bmm", "gpu-conv"):
        path = KERNEL_MODEL_DIR / f"{name}.npz"
        assert path.stat().st_size < 2e6
        info = bundled_kernel_model(name).info
        assert info["seed"] == 0 and len(info["trained_on"]) == 5
        assert set(info["leave_one_gpu_out"]) == set(info["trained_on"])


@pytest.mark.parametrize("name", LISTED)
def test_every_listed_gpu_gets_bmm_and_conv_times(name):
    fig = figures_from_spec(GPU_SPECS[name])
    bmm = bundled_kernel_model("gpu-bmm").with_figures(fig)
    B = np.array([1, 8, 64, 512, 4096])
    ms = bmm.predict_shapes(B, 256, 256, 256)
    assert np.isfinite(ms).all() and (ms >= roofline_ms(B, 256, 256, 256, fig)).all()
    # 4096 products take longer than 8 of them
    assert ms[-1] > 10 * ms[1]
    conv = bundled_kernel_model("gpu-conv").with_figures(fig)
    c = conv.predict_conv([1, 32], 128, 128, 28)
    assert np.isfinite(c).all() and c[1] > c[0] > 0


def test_gemm_model_routes_batched_products_and_convolutions():
    fig = figures_from_spec(GPU_SPECS["NVIDIA L4"])
    plain = GemmKernelModel(fig, _tiny(BatchedGemmModel, len(FEATURE_NAMES)).regressor)
    plain.__dict__["_bundled"] = {"gpu-bmm": None, "gpu-conv": None}
    routed = GemmKernelModel(fig, plain.regressor)
    bmm = bundled_kernel_model("gpu-bmm").with_figures(fig)
    got = routed.predict_shapes([1, 64], [512, 32], [512, 32], [512, 64])
    # one product stays with the GEMM regressor; 64 go to the bmm model
    assert got[0] == plain.predict_shapes([1], 512, 512, 512)[0]
    assert got[1] == bmm.predict_shapes([64], 32, 32, 64)[0]
    # a linear layer on a 3-D input (shared weight) stays with the GEMM regressor
    assert routed.predict_shapes([64], 32, 32, 64, shared_weight=True)[0] == \
        plain.predict_shapes([64], 32, 32, 64, shared_weight=True)[0]
    conv = bundled_kernel_model("gpu-conv").with_figures(fig)
    nodes = [_conv(32, 64, 64, 56), _conv(32, 64, 256, 56, k=1, pad=0),
             _conv(32, 64, 64, 56, stride=2), _conv(32, 64, 64, 56, groups=2),
             _conv(32, 64, 64, 56, name="aten::cudnn_convolution_backward_input")]
    ms = routed.predict_ms(nodes)
    assert ms[0] == pytest.approx(conv.predict_conv(32, 64, 64, 56, 56)[0])
    # outside what the conv model measured: the implicit-GEMM path, as before
    assert np.isfinite(ms).all() and np.array_equal(ms[1:], plain.predict_ms(nodes[1:]))
    assert [conv.covers(n) is not None for n in nodes] == [True, False, False, False, False]


@needs_data
def test_shape_range_split_holds_out_the_far_shapes():
    ks = load_kernel_set("bmm")
    masks = shape_range_split(ks)
    test = np.logical_or.reduce(list(masks.values()))
    assert not (test & ks.aux).any()  # the linear GEMMs only train
    assert 0.1 < test[~ks.aux].mean() < 0.35
    B, M, N, _ = ks.dims[masks["tiny_batched"]].T
    assert (B >= 256).all() and (M * N <= 48 * 48).all()
    # the training range has no product as large as the large ones
    flops = ks.dims.prod(axis=1)
    assert flops[~test & ~ks.aux].max() < flops[masks["large"]].min()


@needs_data
@pytest.mark.parametrize("op", ["bmm", "conv"])
def test_bundled_models_fit_the_measurements(op):
    """The bundled model on a sample of its own training measurements: a lost or wrong
    artifact, or a feature change without a rebuild, fails here."""
    ks = load_kernel_set(op, linear=False)
    rng = np.random.default_rng(0)
    model = bundled_kernel_model(f"gpu-{op}")
    for g, name in enumerate(ks.names):
        rows = rng.choice(np.flatnonzero(ks.gpu == g), 400, replace=False)
        m = model.with_figures(ks.figures[g])
        d = ks.dims[rows]
        pred = (m.predict_shapes(*d.T) if op == "bmm" else
                m.predict_conv(d[:, 0], d[:, 1], d[:, 2], d[:, 3], d[:, 3], *d[:, 4:].T))
        err = np.abs((pred + ks.overhead_ms[rows]) / ks.latency_ms[rows] - 1)
        assert np.exp(np.mean(np.log(np.maximum(err, 1e-4)))) < 0.12, name


def _norm(rows, hidden):
    x = [rows, hidden]
    return {"name": "aten::native_layer_norm", "input_shapes": [x, [hidden], [hidden], [hidden]],
            "input_dtypes": ["float32"] * 4, "input_nnz": [None] * 4,
            "output_shapes": [x, [rows, 1], [rows, 1]], "output_dtypes": ["float32"] * 3,
            "output_nnz": [None] * 3, "scalars": []}


def test_public_profiles_stream_layer_norm_at_the_measured_share():
    from predictors.calibrate.gpu_profiles import profile_for_device
    from predictors.costs.gpu_roofline import PUBLIC_OP_EFFICIENCY, MeasuredRooflineModel

    t4 = profile_for_device("Tesla T4").kernel_models["other"]  # datasheet, estimated peaks
    assert t4.op_efficiency == PUBLIC_OP_EFFICIENCY["estimated"]
    plain = MeasuredRooflineModel(t4.spec, t4.peaks)
    node = _norm(8192, 4096)  # 128 MiB in, memory-bound
    slow, fast = t4.predict_ms([node])[0], plain.predict_ms([node])[0]
    assert (slow - t4.floor_ms) == pytest.approx((fast - t4.floor_ms) / 0.54, rel=0.01)
    a100 = profile_for_device("NVIDIA A100 80GB PCIe").kernel_models["other"]  # measured peaks
    assert a100.op_efficiency == PUBLIC_OP_EFFICIENCY["measured"]
    # a profile measured on its device keeps its own share
    h200 = profile_for_device("nvidia-h200-measured").kernel_models["other"]
    assert h200.op_efficiency["aten::native_layer_norm"] != PUBLIC_OP_EFFICIENCY[
        "measured"]["aten::native_layer_norm"]


@needs_data
def test_public_op_efficiency_is_what_the_data_give():
    from predictors.calibrate.kernel_fit import MEMORY_BOUND_OPS, memory_bound_check
    from predictors.costs.gpu_roofline import PUBLIC_OP_EFFICIENCY

    for op, rows in memory_bound_check(("ln", "softmax")).items():
        for peaks in ("measured", "estimated"):
            share = np.median([r["share"] for r in rows if r["peaks"] == peaks])
            assert share == pytest.approx(
                PUBLIC_OP_EFFICIENCY[peaks][MEMORY_BOUND_OPS[op]], abs=0.006), (op, peaks)
