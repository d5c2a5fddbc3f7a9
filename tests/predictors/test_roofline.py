from hypothesis import given, settings, strategies as st

from predictors.capture import capture_training_step
from predictors.devices.costs import cost_op_graph
from predictors.devices.platforms import PLATFORM_PRESETS
from predictors.devices.roofline import classify, kernel_cost
from predictors.devices.specs import GPU_SPECS, local_cpu_spec
from predictors.scenario import load_scenario
from predictors.workload import build_workload

from paths import SCENARIOS

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
