"""Convolutions as implicit GEMMs: pass geometry, FLOPs, Winograd eligibility, pricing."""
import math

import pytest

from predictors.calibrate.gpu_profiles import profile_for_device
from predictors.costs.convolution import conv_flops, conv_gemms, conv_pass
from predictors.costs.roofline import kernel_cost
from predictors.hardware.specs import GPU_SPECS
from predictors.model.op_classes import classify


def conv(name, ins, outs=()):
    return {"name": name, "input_shapes": ins, "input_dtypes": ["float32"] * len(ins),
            "input_nnz": [None] * len(ins), "output_shapes": list(outs),
            "output_dtypes": ["float32"] * len(outs), "output_nnz": [None] * len(outs)}


X, W, Y = [32, 64, 56, 56], [128, 64, 3, 3], [32, 128, 28, 28]  # 3x3, stride 2


def test_passes_and_their_gemms():
    assert conv_pass("aten::cudnn_convolution") == "forward"
    assert conv_pass("aten::convolution_backward") == "backward"
    assert conv_pass("aten::cudnn_convolution_backward_weight") == "backward_weight"
    assert conv_pass("aten::mm") is None and classify("aten::conv2d") == "gemm"
    (f,) = conv_gemms(conv("aten::conv2d", [X, W, [128]], [Y]))
    assert (f.groups, f.m, f.n, f.k) == (1, 32 * 28 * 28, 128, 64 * 9) and not f.winograd
    (d,) = conv_gemms(conv("aten::cudnn_convolution_backward_input", [Y, W], [X]))
    assert (d.m, d.n, d.k) == (32 * 56 * 56, 64, 128 * 9)
    (w,) = conv_gemms(conv("aten::cudnn_convolution_backward_weight", [Y, X], [W]))
    assert (w.m, w.n, w.k) == (128, 64 * 9, 32 * 28 * 28)
    # the combined backward, in either recorded order, is both gradients
    for ins in ([Y, X, W], [X, Y, W]):
        assert [g.name for g in conv_gemms(conv("aten::convolution_backward", ins))] == [
            "dgrad", "wgrad"]
    assert conv_flops(conv("aten::conv2d", [X, W], [Y])) == 2 * 32 * 28 * 28 * 128 * 64 * 9


def test_winograd_only_for_3x3_stride_1_and_groups():
    same = [32, 64, 56, 56]
    (f,) = conv_gemms(conv("aten::conv2d", [same, [64, 64, 3, 3]], [same]))
    assert f.winograd
    (f,) = conv_gemms(conv("aten::conv2d", [same, [64, 64, 1, 1]], [same]))
    assert not f.winograd
    (f,) = conv_gemms(conv("aten::conv2d", [same, [64, 1, 3, 3]], [same]))  # depthwise
    assert f.groups == 64 and f.n == 1 and f.k == 9 and not f.winograd
    assert conv_gemms(conv("aten::conv2d", [same, [64, 64, 3, 3]])) == []  # no output


def test_convolutions_are_priced_as_their_gemms():
    v100 = profile_for_device("Tesla V100-SXM2-32GB")
    gemm = v100.kernel_models["gemm"]
    node = conv("aten::conv2d", [X, W], [Y])
    (ms,) = gemm.predict_ms([node])
    direct = float(gemm.predict_shapes(1, 32 * 28 * 28, 128, 64 * 9))
    assert ms == pytest.approx(direct)
    same = [32, 64, 56, 56]
    # a 3x3 stride-1 input gradient runs Winograd: the multiply savings off the GEMM
    wino = conv("aten::cudnn_convolution_backward_input", [same, [64, 64, 3, 3]], [same])
    (ms,) = gemm.predict_ms([wino])
    direct = float(gemm.predict_shapes(1, 32 * 56 * 56, 64, 64 * 9))
    assert ms == pytest.approx(direct / 2.25)
    # its forward pass is what the measured convolution model covers
    (ms,) = gemm.predict_ms([conv("aten::conv2d", [same, [64, 64, 3, 3]], [same])])
    assert ms == pytest.approx(float(gemm.bundled("gpu-conv").predict_conv(32, 64, 64, 56)[0]))
    bwd = conv("aten::convolution_backward", [Y, X, W])
    (ms,) = gemm.predict_ms([bwd])
    parts = [float(gemm.predict_shapes(1, 32 * 56 * 56, 64, 128 * 9)),
             float(gemm.predict_shapes(1, 128, 64 * 9, 32 * 28 * 28))]
    assert ms == pytest.approx(float(sum(parts)))
    cost = kernel_cost(node, GPU_SPECS["Tesla V100-SXM2-32GB"])
    assert cost.category == "gemm" and cost.flops == 2 * 32 * 28 * 28 * 128 * 64 * 9
    assert cost.bytes == 4 * (math.prod(X) + math.prod(W) + math.prod(Y))
