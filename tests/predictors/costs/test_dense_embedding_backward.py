"""A dense-gradient EmbeddingBag backward on the CPU pays for sorting its indices."""
import dataclasses
import math

import pytest

from predictors.costs.op_costs import dense_bag_backward_sort_s, kernel_seconds
from predictors.hardware.specs import device_spec


def _backward(n: int, dense: bool) -> dict:
    return {"name": "aten::_embedding_bag_backward",
            "input_shapes": [(512, 16), (n,), (512,), (n,), (512,), (512,)],
            "input_dtypes": ["float32", "int64", "int64", "int64", "int64", "int64"],
            "input_nnz": [None] * 6, "output_shapes": [(5000, 16)],
            "output_dtypes": ["float32"], "output_nnz": [None if dense else n],
            "lookup": {"rows": 5000, "dim": 16, "pooling": n / 512,
                       "distribution": {"kind": "uniform"}}}


def test_the_sort_is_n_log_n_at_the_measured_rate_and_only_dense_on_a_cpu():
    cpu = dataclasses.replace(device_spec("cpu"), sort_ns=5.0)
    n = 24_576
    assert dense_bag_backward_sort_s(_backward(n, True), cpu) == pytest.approx(
        5e-9 * n * math.log2(n))
    assert dense_bag_backward_sort_s(_backward(n, False), cpu) == 0.0   # sparse gradient
    # the op's cost carries it: twice the rate, the sort's time more
    slower = dataclasses.replace(cpu, sort_ns=10.0)
    dense = kernel_seconds([_backward(n, True)], cpu)[1][0]
    assert kernel_seconds([_backward(n, True)], slower)[1][0] - dense == pytest.approx(
        5e-9 * n * math.log2(n), rel=1e-6)
    sparse = kernel_seconds([_backward(n, False)], cpu)[1][0]
    assert kernel_seconds([_backward(n, False)], slower)[1][0] == sparse
