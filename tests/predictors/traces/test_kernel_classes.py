"""Kernel classification by name (plain substrings since the regular expressions were slow)."""
import numpy as np
import pytest
from synth import new_format, write

from predictors.engine.timeline import CATEGORIES
from predictors.traces import load_recording
from predictors.traces.kineto import Kind
from predictors.traces.recording import kernel_categories, kernel_category


@pytest.mark.parametrize("name, category", [
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
     "communication"),
    ("void all_to_all_kernel<float>", "communication"),
    ("ALLGATHER_copy", "communication"),
    ("Reduce_Scatter_kernel", "communication"),
    ("void fbgemm_gpu::split_embedding_backward_codegen", "embedding"),
    ("void at::native::indexSelectLargeIndex<float>", "embedding"),
    ("volta_sgemm_128x64_nn", "gemm"),
    ("Cijk_Ailk_Bljk_SB_MT64x64x8", "gemm"),
    ("flash_fwd_kernel<Flash_fwd_kernel_traits>", "gemm"),
    ("void cudnn::bn_fw_tr_1C11_kernel_NCHW", "gemm"),
    ("void at::native::x_mm_y", "gemm"),
    ("void cub::DeviceReduceKernel", "reduction"),
    ("void at::native::(anonymous namespace)::softmax_warp_forward", "reduction"),
    ("void at::native::CatArrayBatchedCopy<float>", "memcpy"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
     "memcpy"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>",
     "elementwise"),
])
def test_kernel_category(name, category):
    assert kernel_category(name) == category


def test_kernel_categories_classify_kernel_names_only(tmp_path):
    rec = load_recording([write(tmp_path / "t.json", new_format())])
    tr = rec.traces[0]
    cats = kernel_categories(tr)
    assert cats is kernel_categories(tr)  # computed once per trace
    kern = np.flatnonzero(tr.kind == Kind.KERNEL)
    assert {CATEGORIES[c] for c in cats[tr.name_id[kern]]} == {"gemm", "communication"}
    ops = np.flatnonzero(tr.kind == Kind.CPU_OP)
    assert {CATEGORIES[c] for c in cats[tr.name_id[ops]]} == {"other"}
