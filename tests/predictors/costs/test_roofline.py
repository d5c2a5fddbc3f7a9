from hypothesis import given, settings
from hypothesis import strategies as st
from paths import SCENARIOS

from predictors.costs.op_costs import cost_op_graph
from predictors.costs.roofline import kernel_cost
from predictors.hardware.platforms import PLATFORM_PRESETS
from predictors.hardware.specs import GPU_SPECS, local_cpu_spec
from predictors.model.capture import capture_training_step
from predictors.model.op_classes import classify
from predictors.model.workload import build_workload
from predictors.scenario.format import load_scenario

DEVICES = list(GPU_SPECS.values()) + [local_cpu_spec(1), local_cpu_spec(8)]


def mm(m, n, k, dtype="float32"):
    return {"name": "aten::mm", "input_shapes": [(m, k), (k, n)], "input_dtypes": [dtype] * 2,
            "input_nnz": [None, None], "output_shapes": [(m, n)], "output_dtypes": [dtype],
            "output_nnz": [None]}


def elementwise(n):
    return {"name": "aten::relu", "input_shapes": [(n,)], "input_dtypes": ["float32"],
            "input_nnz": [None], "output_shapes": [(n,)], "output_dtypes": ["float32"],
            "output_nnz": [None]}


dims = st.integers(1, 8192)


@settings(max_examples=200, deadline=None)
@given(m=dims, n=dims, k=dims, grow=st.sampled_from(["m", "n", "k"]),
       factor=st.integers(2, 8), device=st.sampled_from(DEVICES))
def test_more_flops_never_take_less_time(m, n, k, grow, factor, device):
    base = kernel_cost(mm(m, n, k), device)
    bigger = dict(m=m, n=n, k=k)
    bigger[grow] *= factor
    more = kernel_cost(mm(**bigger), device)
    assert more.flops > base.flops
    assert more.seconds >= base.seconds


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 10**8), device=st.sampled_from(DEVICES))
def test_elementwise_time_grows_with_size(n, device):
    assert kernel_cost(elementwise(2 * n), device).seconds >= kernel_cost(
        elementwise(n), device).seconds


def test_big_gemm_is_compute_bound_near_peak():
    a100 = GPU_SPECS["NVIDIA A100-SXM4-40GB"]
    cost = kernel_cost(mm(8192, 8192, 8192), a100)
    achieved = cost.flops / cost.seconds
    assert 0.5 * a100.flops("float32") < achieved < a100.flops("float32")


def test_every_captured_op_of_every_bundled_scenario_gets_a_cost():
    for path in SCENARIOS.glob("*.json"):
        doc = load_scenario(path)
        graph = capture_training_step(build_workload(doc))
        for preset in ("local-cpu", "a100-1", "h100-1"):
            costed = cost_op_graph(graph, PLATFORM_PRESETS[preset])
            for op in costed.ops:
                if op.category == "view":
                    assert op.kernel_s == 0.0
                else:
                    assert op.kernel_s > 0.0, (path.name, op.name)
                    assert op.bytes > 0 or op.flops > 0, (path.name, op.name)


def test_sparse_updates_cost_the_touched_rows_only():
    a100 = GPU_SPECS["NVIDIA A100-SXM4-40GB"]
    update = {"name": "aten::add_", "input_shapes": [(10**7, 128), (10**7, 128)],
              "input_dtypes": ["float32", "float32"], "input_nnz": [None, 4096],
              "output_shapes": [(10**7, 128)], "output_dtypes": ["float32"],
              "output_nnz": [None]}
    dense = dict(update, input_nnz=[None, None])
    assert kernel_cost(update, a100).bytes < kernel_cost(dense, a100).bytes / 1000


def test_classification():
    assert classify("aten::addmm") == "gemm"
    assert classify("aten::_embedding_bag_backward") == "embedding"
    assert classify("aten::t") == "view"
    assert classify("aten::native_layer_norm") == "reduction"
    assert classify("aten::gelu") == "elementwise"
    assert classify("aten::cat") == "memcpy"


def _node(name, ins, outs=(), dtypes=None):
    dtypes = dtypes or ["float32"] * len(ins)
    return {"name": name, "input_shapes": [tuple(s) for s in ins], "input_dtypes": dtypes,
            "input_nnz": [None] * len(ins), "output_shapes": [tuple(s) for s in outs],
            "output_dtypes": ["float32"] * len(outs), "output_nnz": [None] * len(outs)}


def test_in_place_ops_write_their_first_argument_back():
    a100 = GPU_SPECS["NVIDIA A100-SXM4-40GB"]
    mb = 4 * 2**20
    assert kernel_cost(_node("aten::add_", [(2**20,), (2**20,)]), a100).bytes == 3 * mb
    assert kernel_cost(_node("aten::add", [(2**20,), (2**20,)], [(2**20,)]),
                       a100).bytes == 3 * mb
    # an in-place op whose output is recorded (captured graphs) is not counted twice
    assert kernel_cost(_node("aten::mul_", [(2**20,), (2**20,)], [(2**20,)]),
                       a100).bytes == 3 * mb
    assert kernel_cost(_node("aten::fill_", [(2**20,)]), a100).bytes == mb  # no read
    assert kernel_cost(_node("aten::copy_", [(2**20,), (2**20,)]), a100).bytes == 2 * mb


def test_index_driven_ops_touch_only_the_selected_rows():
    a100 = GPU_SPECS["NVIDIA A100-SXM4-40GB"]
    table, rows = (10**6, 256), 128
    sel = kernel_cost(_node("aten::index_select", [table, (rows,)],
                            dtypes=["float32", "int64"]), a100)
    assert sel.bytes == rows * 8 + 2 * rows * 256 * 4  # indices, rows read, output
    recorded = _node("aten::index_select", [table, (rows,)], [(rows, 256)],
                     dtypes=["float32", "int64"])
    assert kernel_cost(recorded, a100).bytes == sel.bytes
    put = kernel_cost(_node("aten::index_put_", [table, (rows,), (rows, 256)],
                            dtypes=["float32", "int64", "float32"]), a100)
    assert put.bytes == rows * 8 + 3 * rows * 256 * 4


def test_training_batch_norm_reads_its_input_twice():
    a100 = GPU_SPECS["NVIDIA A100-SXM4-40GB"]
    x = (32, 64, 56, 56)
    act = 4 * 32 * 64 * 56 * 56
    fwd = kernel_cost(_node("aten::cudnn_batch_norm", [x, (64,), (64,)], [x]), a100)
    bwd = kernel_cost(_node("aten::cudnn_batch_norm_backward", [x, x, (64,)], [x]), a100)
    assert classify("aten::cudnn_batch_norm") == "reduction"
    assert 3 * act <= fwd.bytes < 3.01 * act
    assert 5 * act <= bwd.bytes < 5.01 * act


def test_fused_attention_flops_and_efficiency():
    """4·B·H·S²·D forward, 2.5x backward, in both layouts; its own share of the peak."""
    from predictors.costs.roofline import attention_efficiency, attention_flops
    fwd = attention_flops("_scaled_dot_product_flash_attention",
                          [(8, 16, 1024, 128), (8, 16, 1024, 128), (8, 16, 1024, 128)])
    assert fwd == 4.0 * 8 * 16 * 1024 * 1024 * 128
    bwd = attention_flops("_scaled_dot_product_flash_attention_backward",
                          [(8, 16, 1024, 128)] * 4)
    assert bwd == 2.5 * fwd
    # the kernels' own ops take (B, S, H, D)
    assert attention_flops("_efficient_attention_forward",
                           [(8, 1024, 16, 128), (8, 1024, 16, 128)]) == fwd
    assert attention_flops("_cudnn_attention_forward",  # cuDNN's op: (B, H, S, D)
                           [(8, 16, 1024, 128), (8, 16, 1024, 128)]) == fwd
    assert classify("aten::_scaled_dot_product_efficient_attention_backward") == "gemm"
    # a large attention reaches 20-50 % of the dtype's peak (25-45 % measured on an H200,
    # ~35 % published for FlashAttention-2 forward on an H100): well below a plain GEMM
    h100 = GPU_SPECS["NVIDIA H100 80GB HBM3"]
    q = (8, 16, 1024, 128)
    gemm = kernel_cost(mm(8192, 8192, 8192, "bfloat16"), h100)
    for op, dtype, ins in (("_scaled_dot_product_flash_attention", "bfloat16", [q] * 3),
                           ("_scaled_dot_product_flash_attention_backward", "bfloat16",
                            [q] * 4),
                           ("_scaled_dot_product_efficient_attention", "float32", [q] * 3),
                           ("_scaled_dot_product_efficient_attention_backward", "float32",
                            [q] * 4)):
        cost = kernel_cost(_node(f"aten::{op}", ins, [q], [dtype] * len(ins)), h100)
        share = cost.flops / cost.seconds / h100.flops(dtype)
        assert cost.flops == attention_flops(op, ins) and 0.2 < share < 0.5, (op, share)
        assert share < gemm.flops / gemm.seconds / h100.flops("bfloat16")
    assert attention_efficiency("mm", "float32") is None
