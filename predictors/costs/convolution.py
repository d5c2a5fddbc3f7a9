"""Convolutions as the GEMMs they run: implicit-GEMM dimensions of each pass.

cuDNN and oneDNN run a convolution as a matrix product over unfolded input patches
(implicit GEMM): forward ``(N*Ho*Wo) x Cout x (Cin*kh*kw)``, the input gradient
``(N*H*W) x Cin x (Cout*kh*kw)``, the weight gradient ``Cout x (Cin*kh*kw) x (N*Ho*Wo)``;
a grouped convolution is a batch of ``groups`` such GEMMs.  The GEMM kernel models price
those.  A 3x3 stride-1 convolution in fp32 usually runs Winograd F(2x2, 3x3) instead,
which does 2.25x fewer multiplies (Lavin & Gray, CVPR 2016); :data:`WINOGRAD_SPEEDUP`.

A conv node holds the tensors the pass reads and writes, in the order PyTorch records
them:

- forward (``conv2d``, ``convolution``, ``cudnn_convolution``, ...): inputs
  ``[x, w, (bias)]``, output ``[y]``;
- ``*_backward_input``: inputs ``[dy, w]``, output ``[dx]``;
- ``*_backward_weight``: inputs ``[dy, x]``, output ``[dw]``;
- ``*_backward`` (both gradients): inputs ``[dy, x, w]`` or the 2021 order ``[x, dy, w]``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..model.op_classes import CONV_OPS

__all__ = ["ConvGemm", "conv_pass", "conv_geometry", "conv_gemms", "conv_flops",
           "WINOGRAD_SPEEDUP"]

WINOGRAD_SPEEDUP = 2.25  # multiplies of direct 3x3 over F(2x2, 3x3), per output tile


@dataclass(frozen=True)
class ConvGemm:
    """One pass of a convolution as ``groups`` GEMMs of ``m x n x k``."""

    name: str  # "fprop", "dgrad" or "wgrad"
    groups: int
    m: int
    n: int
    k: int
    winograd: bool  # a 3x3 stride-1 2-D pass that Winograd can run

    @property
    def flops(self) -> float:
        return 2.0 * self.groups * self.m * self.n * self.k


def conv_pass(name: str) -> str | None:
    """``forward``, ``backward_input``, ``backward_weight``, ``backward`` or None."""
    op = name.split("::")[-1]
    if op not in CONV_OPS:
        return None
    for suffix in ("backward_input", "backward_weight", "backward"):
        if op.endswith(suffix):
            return suffix
    return "forward"


def conv_geometry(node: dict) -> tuple[list, list, list] | None:
    """``(x, w, y)`` shapes of a conv node, or None when its shapes do not say."""
    kind = conv_pass(node["name"])
    ins = [list(s) for s in node.get("input_shapes") or [] if s]
    outs = [list(s) for s in node.get("output_shapes") or [] if s]
    rank = len(ins[0]) if ins else 0
    ins = [s for s in ins if len(s) == rank] if rank >= 3 else []
    outs = [s for s in outs if len(s) == rank]
    if kind == "forward" and len(ins) >= 2 and outs:
        return ins[0], ins[1], outs[0]
    if kind == "backward_input" and len(ins) >= 2 and outs:
        return outs[0], ins[1], ins[0]
    if kind == "backward_weight" and len(ins) >= 2 and outs:
        return ins[1], outs[0], ins[0]
    if kind == "backward" and len(ins) >= 3:
        a, b, w = ins[:3]
        # dy has w's output channels; when x has as many, the two are interchangeable
        # for the cost unless the spatial sizes differ (dy is never the larger)
        dy, x = (a, b) if a[1] == w[0] and math.prod(a[2:]) <= math.prod(b[2:]) else (b, a)
        return x, w, dy
    return None


def conv_gemms(node: dict) -> list[ConvGemm]:
    """The implicit GEMMs a conv node runs (empty when it is not one, or its shapes
    are incomplete)."""
    geo = conv_geometry(node)
    if geo is None:
        return []
    x, w, y = geo
    n, cin, cout = x[0], x[1], w[0]
    cin_g = w[1]
    if min(n, cin, cout, cin_g) <= 0 or cin % cin_g:
        return []
    groups = cin // cin_g
    if cout % groups:
        return []
    cout_g = cout // groups
    taps = math.prod(w[2:])
    in_sp, out_sp = math.prod(x[2:]), math.prod(y[2:])
    stride1 = all(a == b for a, b in zip(x[2:], y[2:]))
    wino = len(w) == 4 and w[2] == w[3] == 3 and stride1 and groups == 1
    fprop = ConvGemm("fprop", groups, n * out_sp, cout_g, cin_g * taps, wino)
    dgrad = ConvGemm("dgrad", groups, n * in_sp, cin_g, cout_g * taps, wino)
    wgrad = ConvGemm("wgrad", groups, cout_g, cin_g * taps, n * out_sp, wino)
    return {"forward": [fprop], "backward_input": [dgrad], "backward_weight": [wgrad],
            "backward": [dgrad, wgrad]}[conv_pass(node["name"])]


def conv_flops(node: dict) -> float:
    """Multiply-add FLOPs of the direct (implicit-GEMM) algorithm, 0 if unknown."""
    return sum(g.flops for g in conv_gemms(node))
