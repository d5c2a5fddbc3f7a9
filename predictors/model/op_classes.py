"""Which kind of kernel an aten op is, by its name: the timeline's categories, and the op
families that the kernel models and the trace readers share.  Names only, no costs."""
from __future__ import annotations

__all__ = ["classify", "op_base", "VIEW_OPS", "GEMM_OPS", "CONV_OPS", "ATTENTION_OPS",
           "EMBEDDING_OPS", "TWO_PASS_NORM_OPS", "REDUCTION_OPS", "MEMORY_OPS", "ITEMSIZE"]

# Ops that only make a new view or metadata: no kernel, only CPU dispatch time.
VIEW_OPS = frozenset(
    "t transpose view _unsafe_view reshape _reshape_alias as_strided expand expand_as slice "
    "select unsqueeze squeeze permute detach alias split split_with_sizes unbind chunk "
    "_indices _values indices values lift_fresh narrow diagonal view_as unflatten flatten "
    "numpy_T to empty empty_like empty_strided new_empty new_empty_strided sparse_resize_ "
    "resize_ set_ _sparse_coo_tensor_with_dims_and_tensors _sparse_coo_tensor_unsafe".split())

GEMM_OPS = frozenset("mm addmm bmm baddbmm addbmm matmul _scaled_mm".split())
# Fused attention (what scaled_dot_product_attention runs on a GPU): two GEMMs forward,
# five backward (the scores are recomputed), softmax and dropout in registers.
ATTENTION_OPS = frozenset(
    f"{op}{suffix}" for op in ("_scaled_dot_product_flash_attention",
                               "_scaled_dot_product_efficient_attention",
                               "_scaled_dot_product_cudnn_attention", "_flash_attention",
                               "_efficient_attention", "_cudnn_attention")
    for suffix in ("", "_forward", "_backward"))
CONV_OPS = frozenset(
    "conv1d conv2d conv3d convolution _convolution cudnn_convolution mkldnn_convolution "
    "miopen_convolution _nnpack_spatial_convolution slow_conv2d_forward "
    "thnn_conv2d convolution_backward cudnn_convolution_backward mkldnn_convolution_backward "
    "miopen_convolution_backward cudnn_convolution_backward_input "
    "cudnn_convolution_backward_weight miopen_convolution_backward_input "
    "miopen_convolution_backward_weight".split())
EMBEDDING_OPS = frozenset(
    "embedding embedding_bag _embedding_bag _embedding_bag_forward_only _embedding_bag_backward "
    "_embedding_bag_sparse_backward _embedding_bag_dense_backward embedding_dense_backward "
    "embedding_backward".split())
# Training-mode batch norm reads its input twice (statistics, then normalization); its
# backward reads the output gradient and the input twice (reductions, then dx).
TWO_PASS_NORM_OPS = {"native_batch_norm": 1, "cudnn_batch_norm": 1, "miopen_batch_norm": 1,
                     "_native_batch_norm_legit": 1, "native_batch_norm_backward": 2,
                     "cudnn_batch_norm_backward": 2, "miopen_batch_norm_backward": 2}
REDUCTION_OPS = frozenset(
    "sum mean max min amax amin argmax argmin norm var var_mean std logsumexp cumsum "
    "_softmax _safe_softmax _log_softmax _softmax_backward_data _log_softmax_backward_data "
    "native_layer_norm native_layer_norm_backward nll_loss_forward nll_loss_backward "
    "binary_cross_entropy binary_cross_entropy_backward binary_cross_entropy_with_logits "
    "mse_loss mse_loss_backward".split()) | frozenset(TWO_PASS_NORM_OPS)
MEMORY_OPS = frozenset(
    "copy_ clone _to_copy contiguous cat stack index index_select index_put index_put_ "
    "_index_put_impl_ index_add_ gather scatter scatter_add_ tril_indices triu_indices tril "
    "triu zeros zeros_like new_zeros ones ones_like full full_like fill_ zero_ arange "
    "select_backward slice_backward coalesce _coalesce".split())
# bytes per element of each tensor dtype (predict sizes tables with it too)
ITEMSIZE = {"float32": 4, "float64": 8, "bfloat16": 2, "float16": 2, "int64": 8, "int32": 4,
            "bool": 1, "uint8": 1, "int8": 1}


def op_base(name: str) -> str:
    """``aten::addmm`` -> ``addmm``."""
    return name.split("::")[-1]


def classify(name: str) -> str:
    """The timeline category of an aten op name (``aten::addmm`` -> ``gemm``)."""
    if name.startswith("mldse::"):  # a collective (predictors/model/comm_ops.py)
        return "communication"
    op = op_base(name)
    if op in VIEW_OPS:
        return "view"
    if op in GEMM_OPS or op in CONV_OPS or op in ATTENTION_OPS:
        return "gemm"  # convolutions run as implicit GEMMs, attention as fused GEMMs
    if op in EMBEDDING_OPS:
        return "embedding"
    if op in REDUCTION_OPS:
        return "reduction"
    if op in MEMORY_OPS:
        return "memcpy"
    return "elementwise"
