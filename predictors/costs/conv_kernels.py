"""2-D fp32 convolution kernel time: the better of direct implicit GEMM and Winograd, then
a learned residual.

The structure: cuDNN runs a 3x3 stride-1 convolution either as an implicit GEMM
``(N*Ho*Wo) x Cout x (Cin*kh*kw)`` or, mostly, as non-fused Winograd F(4x4, 3x3)
(the kernel names of the NeuSight measurements: ``winogradforwarddata4x4``, an sgemm,
``winogradforwardoutput4x4``): 36 GEMMs of ``tiles x Cout x Cin`` over 6x6 input tiles,
plus transforms that write and read the tiles (Lavin & Gray, CVPR 2016).  Each is priced
with the tile-and-wave estimate of :mod:`.batched_gemm`; the structured time is the
smaller, never below streaming the input, output and weights once.  A gradient-boosted
regressor learns ``log(kernel / structured time)``.

The public measurements cover 3x3, stride-1, padding-1 convolutions, batch 1-64,
3-2048 channels, 5-252 pixels square; :meth:`ConvKernelModel.covers` says which shapes
the model prices (others stay with the implicit-GEMM model of :mod:`.convolution`).
"""
from __future__ import annotations

import math

import numpy as np

from .batched_gemm import BatchedGemmModel, bmm_features, structured_ms
from .convolution import conv_geometry, conv_pass
from .gemm_features import GpuFigures

__all__ = [
    "CONV_FEATURES",
    "WINOGRAD_TILE",
    "ConvKernelModel",
    "conv_features",
    "conv_structured_ms",
]

WINOGRAD_TILE = 4  # output tile of F(4x4, 3x3): 6x6 input tiles, 36 products per tile
_ITEM = 4.0


def _geometry(N, Cin, Cout, H, W, kernel, stride, pad):
    N, Cin, Cout, H, W, kernel, stride, pad = (np.asarray(x, dtype=np.float64) for x in (
        N, Cin, Cout, H, W, kernel, stride, pad))
    Ho = np.maximum(np.floor((H + 2 * pad - kernel) / stride) + 1, 1.0)
    Wo = np.maximum(np.floor((W + 2 * pad - kernel) / stride) + 1, 1.0)
    return N, Cin, Cout, H, W, kernel, stride, Ho, Wo


def conv_structured_ms(N, Cin, Cout, H, W, kernel, stride, pad, fig: GpuFigures):
    """``(structured, direct, winograd, streaming)`` ms; Winograd is inf where it does
    not apply (not 3x3 stride 1)."""
    N, Cin, Cout, H, W, kernel, stride, Ho, Wo = _geometry(N, Cin, Cout, H, W, kernel,
                                                           stride, pad)
    direct = structured_ms(1, N * Ho * Wo, Cout, Cin * kernel * kernel, fig)
    tiles = N * np.ceil(Ho / WINOGRAD_TILE) * np.ceil(Wo / WINOGRAD_TILE)
    side = (WINOGRAD_TILE + 2) ** 2
    # the transformed input and output tiles are written once and read once
    moved = 2 * _ITEM * side * tiles * (Cin + Cout)
    wino = structured_ms(side, tiles, Cout, Cin, fig) + moved / fig.mem_bw * 1e3
    wino = np.where((kernel == 3) & (stride == 1), wino, np.inf)
    stream = _ITEM * (N * Cin * H * W + N * Cout * Ho * Wo
                      + Cout * Cin * kernel ** 2) / fig.mem_bw * 1e3
    return np.maximum(np.minimum(direct, wino), stream), direct, wino, stream


def _names() -> list[str]:
    return (["log_batch", "log_cin", "log_cout", "log_in_pixels", "log_out_pixels",
             "log_kernel", "log_stride", "log_stream_over_struct", "log_wino_over_direct",
             "log_direct_over_struct"] + [f"gemm_{n}" for n in BatchedGemmModel.features])


CONV_FEATURES = _names()


def conv_features(N, Cin, Cout, H, W, kernel, stride, pad, fig: GpuFigures) -> np.ndarray:
    """Feature rows (columns :data:`CONV_FEATURES`): the convolution's own sizes, the
    ratios of its structured estimates, and the implicit GEMM's :func:`bmm_features`."""
    struct, direct, wino, stream = conv_structured_ms(N, Cin, Cout, H, W, kernel, stride,
                                                      pad, fig)
    N, Cin, Cout, H, W, kernel, stride, Ho, Wo = _geometry(N, Cin, Cout, H, W, kernel,
                                                           stride, pad)
    wino_ratio = np.where(np.isfinite(wino), np.log(np.where(np.isfinite(wino), wino, 1.0)
                                                    / direct), 10.0)
    cols = [np.log(N), np.log(Cin), np.log(Cout), np.log(H * W), np.log(Ho * Wo),
            np.log(kernel), np.log(stride), np.log(stream / struct), wino_ratio,
            np.log(direct / struct)]
    gemm = bmm_features(1, N * Ho * Wo, Cout, Cin * kernel * kernel, fig)
    return np.column_stack(cols + [gemm])


class ConvKernelModel(BatchedGemmModel):
    """fp32 2-D convolution kernel time, forward passes (the measurements time no
    backward pass; those stay with the implicit-GEMM model)."""

    op_class = "conv"
    type_name = "gpu-conv"
    features = CONV_FEATURES
    target = "log(kernel_ms / structured_ms), conv_structured_ms from datasheet figures"
    # the range the public measurements cover
    kernels, strides = (3,), (1,)

    def predict_conv(self, N, Cin, Cout, H, W=None, kernel=3, stride=1, pad=1) -> np.ndarray:
        """Kernel milliseconds of 2-D convolutions of ``N`` images ``Cin x H x W`` (``W``
        defaults to ``H``) by ``Cout`` square ``kernel`` filters (arrays broadcast)."""
        W = H if W is None else W
        args = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (
            N, Cin, Cout, H, W, kernel, stride, pad)))
        struct = conv_structured_ms(*args, self.figures)[0]
        ms = np.exp(self._log_ratio(conv_features(*args, self.figures))) * struct
        return np.maximum(ms, self.min_kernel_ms)

    def predict_shapes(self, *args, **kwargs):
        raise TypeError("a convolution model predicts convolutions: use predict_conv")

    def covers(self, node: dict) -> tuple | None:
        """``(N, Cin, Cout, H, W, kernel, stride, pad)`` of a node this model prices: a 2-D,
        ungrouped, square-kernel forward pass on a square image, inside the measured kernel
        sizes and strides; None otherwise."""
        geo = conv_geometry(node) if conv_pass(node.get("name", "")) == "forward" else None
        if geo is None:
            return None
        x, w, y = geo
        if len(x) != 4 or len(w) != 4 or len(y) != 4 or w[2] != w[3] or x[1] != w[1]:
            return None
        k = int(w[2])
        stride = x[2] // y[2] if y[2] and x[2] % y[2] == 0 else 0
        if k not in self.kernels or stride not in self.strides:
            return None
        pad = max((y[2] - 1) * stride + k - x[2], 0) / 2
        if x[2] != x[3] or y[2] != y[3] or not float(pad).is_integer():
            return None
        return (x[0], w[1], w[0], x[2], x[3], k, stride, int(pad))

    def predict_ms(self, nodes: list[dict]) -> np.ndarray:
        """Per node: the kernel ms of a convolution it :meth:`covers`, else NaN."""
        out = np.full(len(nodes), np.nan)
        rows = [(i, g) for i, n in enumerate(nodes) if (g := self.covers(n)) is not None
                and math.prod(g[:5]) > 0]
        if rows:
            idx, geo = zip(*rows)
            out[list(idx)] = self.predict_conv(*np.array(geo, dtype=np.float64).T)
        return out
